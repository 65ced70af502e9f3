"""Unbiased variance and mean over the last dimension of a 16384 x 4096 fp32 tensor, returned as a tuple
(var, mean) (256 MB in): ~90 us on an H100. The inputs sit far from zero (mean 3), where E[x^2] - E[x]^2 loses
digits that a two-pass or Welford variance keeps."""
import torch
import torch.nn as nn

batch_size = 16384
dim = 4096


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor):
        return torch.var_mean(x, dim=1, correction=1)


def get_inputs():
    return [torch.randn(batch_size, dim) + 3.0]


def get_init_inputs():
    return []
