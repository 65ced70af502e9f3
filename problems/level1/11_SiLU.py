"""Elementwise SiLU / Swish, x * sigmoid(x), over a 16384 x 16384 fp32 tensor."""
import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 16384
dim = 16384


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.silu(x)


def get_inputs():
    return [torch.randn(batch_size, dim) * 3.0]


def get_init_inputs():
    return []


def get_check_inputs():
    # |x| up to ~250: exp(|x|) overflows fp32 past 88, so forms such as
    # x * exp(x) / (1 + exp(x)) give inf / inf = NaN for large positive x.
    return [[torch.randn(batch_size, dim) * 50.0]]
