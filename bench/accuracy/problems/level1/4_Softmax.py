"""Softmax over the last dimension of a 4096 x 4096 fp32 tensor (64 MB in, 64 MB out)."""
import torch
import torch.nn as nn

batch_size = 4096
dim = 4096


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=1)


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
