"""Matrix product with a transposed operand: C = A @ B.T, A (8192 x 4096), B stored as (N, K) = (2048, 4096)."""
import torch
import torch.nn as nn

M = 8192
K = 4096
N = 2048


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A, B.T)


def get_inputs():
    A = torch.randn(M, K)
    B = torch.randn(N, K) / K ** 0.5
    return [A, B]


def get_init_inputs():
    return []
