"""LayerNorm over the last dimension of an 8192 x 4096 fp32 tensor, with weight and bias (128 MB in, 128 MB out):
~100 us on an H100."""
import torch
import torch.nn as nn

batch_size = 8192
features = 4096


class Model(nn.Module):
    def __init__(self, features: int):
        super().__init__()
        self.ln = nn.LayerNorm(features)
        with torch.no_grad():  # not the identity affine, so that a kernel that drops it fails
            self.ln.weight.copy_(torch.rand(features) + 0.5)
            self.ln.bias.copy_(0.1 * torch.randn(features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.ln(x)


def get_inputs():
    return [torch.randn(batch_size, features) * 2.0 + 0.5]


def get_init_inputs():
    return [features]
