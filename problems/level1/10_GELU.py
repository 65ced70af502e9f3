"""Elementwise GELU (exact, erf form) over a 16384 x 16384 fp32 tensor."""
import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 16384
dim = 16384


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(x)


def get_inputs():
    # Spread over [-9, 9] or so, where GELU bends, saturates to 0 and to x.
    return [torch.randn(batch_size, dim) * 3.0]


def get_init_inputs():
    return []
