"""Matmul + scale + sigmoid + sum over the features: sigmoid((x @ W) * scale).sum(dim=1).

x (8192, 2048), W (2048, 4096) a parameter; output (8192,).
"""
import torch
import torch.nn as nn

batch_size = 8192
in_features = 2048
out_features = 4096
scale = 1.5


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int, scale: float):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(in_features, out_features) / in_features ** 0.5)
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(torch.matmul(x, self.weight) * self.scale).sum(dim=1)


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, scale]

