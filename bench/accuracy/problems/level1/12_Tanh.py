"""Tanh over a 4096 x 512 fp32 tensor (8 MB): a few microseconds. Its solutions carry injected device waits."""
import torch
import torch.nn as nn

batch_size = 4096
dim = 512


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(x)


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
