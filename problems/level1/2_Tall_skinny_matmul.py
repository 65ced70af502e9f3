"""Tall-skinny matrix product: a tall A (131072 x 1024) times a small B (1024 x 512)."""
import torch
import torch.nn as nn

M = 131072
K = 1024
N = 512


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
