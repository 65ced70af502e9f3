"""SiLU written as x * sigmoid(x) over an 8192 x 8192 fp32 tensor (256 MB): two eager kernels."""
import torch
import torch.nn as nn

batch_size = 8192
dim = 8192


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.sigmoid(x)


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
