"""relu(x * scale + shift) with a scale and a shift per column: three passes over x in
eager PyTorch (multiply, add, relu), each writing a full temporary. CPU-sized."""
import torch
import torch.nn as nn

rows, cols = 1024, 1024


class Model(nn.Module):
    def __init__(self, cols: int):
        super().__init__()
        self.scale = nn.Parameter(torch.randn(cols))
        self.shift = nn.Parameter(torch.randn(cols))

    def forward(self, x):
        return torch.relu(x * self.scale + self.shift)


def get_inputs():
    return [torch.randn(rows, cols)]


def get_init_inputs():
    return [cols]
