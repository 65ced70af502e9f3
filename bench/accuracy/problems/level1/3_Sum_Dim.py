"""Sum over the middle dimension of a 64 x 1024 x 512 fp32 tensor (128 MB; keepdim=False)."""
import torch
import torch.nn as nn

batch_size = 64
dim1 = 1024
dim2 = 512
reduce_dim = 1


class Model(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sum(x, dim=self.dim)


def get_inputs():
    # Positive entries: no sum is near 0, so fp32 rounding stays small relative to every output.
    return [torch.rand(batch_size, dim1, dim2)]


def get_init_inputs():
    return [reduce_dim]
