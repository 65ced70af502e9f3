"""Mean over the last (contiguous) dimension of an (80, 1024, 4096) fp32 tensor."""
import torch
import torch.nn as nn

batch_size = 80
dim1 = 1024
dim2 = 4096
reduce_dim = -1


class Model(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.mean(x, dim=self.dim)


def get_inputs():
    # Positive entries, offset per row, so rows have different means.
    offset = torch.rand(batch_size, dim1, 1) * 4.0
    return [torch.rand(batch_size, dim1, dim2) + offset]


def get_init_inputs():
    return [reduce_dim]
