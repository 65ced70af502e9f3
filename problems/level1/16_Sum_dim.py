"""Sum over the middle dimension of an (80, 4096, 1024) fp32 tensor (keepdim=False).

The reduced dimension is strided: neighbouring output elements read
neighbouring memory, each output reads 4096 elements 4 KiB apart.
"""
import torch
import torch.nn as nn

batch_size = 80
dim1 = 4096
dim2 = 1024
reduce_dim = 1


class Model(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sum(x, dim=self.dim)


def get_inputs():
    # Positive entries: sums stay far from 0, so fp32 rounding stays small
    # relative to every output.
    return [torch.rand(batch_size, dim1, dim2)]


def get_init_inputs():
    return [reduce_dim]
