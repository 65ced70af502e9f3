"""Matrix product with a transposed operand: C = A.T @ B, A stored as (K, M) = (4096, 4096)."""
import torch
import torch.nn as nn

M = 4096
K = 4096
N = 4096


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A.T, B)


def get_inputs():
    A = torch.randn(K, M)
    B = torch.randn(K, N) / K ** 0.5
    return [A, B]


def get_init_inputs():
    return []
