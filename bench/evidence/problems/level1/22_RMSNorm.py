"""RMSNorm over the last dimension of an 8192 x 4096 fp32 tensor, with a learned weight: x / sqrt(mean(x^2) + eps) * w
(128 MB in, 128 MB out): ~100 us on an H100, ~4 eager kernels."""
import torch
import torch.nn as nn

batch_size = 8192
features = 4096
eps = 1e-6


class Model(nn.Module):
    def __init__(self, features: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.rand(features) + 0.5)
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rms = torch.sqrt(torch.mean(x * x, dim=-1, keepdim=True) + self.eps)
        return x / rms * self.weight


def get_inputs():
    return [torch.randn(batch_size, features)]


def get_init_inputs():
    return [features, eps]
