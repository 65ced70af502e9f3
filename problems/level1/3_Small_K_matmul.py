"""Matrix product with a small inner dimension: (16384 x 128) @ (128 x 16384).

The output is 1 GiB, so writing it costs about as much as the arithmetic.
"""
import torch
import torch.nn as nn

M = 16384
K = 128
N = 16384


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A, B)


def get_inputs():
    A = torch.randn(M, K)
    B = torch.randn(K, N) / K ** 0.5
    return [A, B]


def get_init_inputs():
    return []
