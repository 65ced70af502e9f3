"""Matrix product with a long inner dimension: (1024 x 65536) @ (65536 x 1024).

Only 64 output tiles of 128 x 128: a kernel must split K to fill the GPU.
"""
import torch
import torch.nn as nn

M = 1024
K = 65536
N = 1024


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
