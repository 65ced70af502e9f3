"""Elementwise ELU (alpha = 1.0) over a 16384 x 16384 fp32 tensor."""
import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 16384
dim = 16384
alpha = 1.0


class Model(nn.Module):
    def __init__(self, alpha: float):
        super().__init__()
        self.alpha = alpha

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.elu(x, alpha=self.alpha)


def get_inputs():
    return [torch.randn(batch_size, dim) * 2.0]


def get_init_inputs():
    return [alpha]
