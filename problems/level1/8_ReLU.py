"""Elementwise ReLU over a 16384 x 16384 fp32 tensor."""
import torch
import torch.nn as nn

batch_size = 16384
dim = 16384


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)


def get_inputs():
    # Standard normal: half the entries are negative.
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
