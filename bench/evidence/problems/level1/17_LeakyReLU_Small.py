"""LeakyReLU (slope 0.01) over a 256 x 1024 fp32 tensor (1 MB): a few microseconds on an H100."""
import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 256
dim = 1024


class Model(nn.Module):
    def __init__(self, negative_slope: float = 0.01):
        super().__init__()
        self.negative_slope = negative_slope

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.leaky_relu(x, negative_slope=self.negative_slope)


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return [0.01]
