"""Per-feature scale, LeakyReLU, per-feature bias over 512 x 4096 fp32: three small elementwise ops."""
import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 512
features = 4096
negative_slope = 0.01


class Model(nn.Module):
    def __init__(self, features: int, negative_slope: float):
        super().__init__()
        self.scale = nn.Parameter(torch.rand(features) + 0.5)
        self.bias = nn.Parameter(0.1 * torch.randn(features))
        self.negative_slope = negative_slope

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x * self.scale
        x = F.leaky_relu(x, self.negative_slope)
        return x + self.bias


def get_inputs():
    return [torch.randn(batch_size, features)]


def get_init_inputs():
    return [features, negative_slope]
