"""Max (values only) over the middle dimension of an (80, 4096, 1024) fp32 tensor."""
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
        return torch.max(x, dim=self.dim).values


def get_inputs():
    return [torch.randn(batch_size, dim1, dim2)]


def get_init_inputs():
    return [reduce_dim]


def get_check_inputs():
    # The maximum of 4096 standard normals is always positive, so a kernel
    # that starts its running max at 0 instead of -inf passes on the default
    # inputs. Here every entry lies in [-2, -1).
    return [[-1.0 - torch.rand(batch_size, dim1, dim2)]]
