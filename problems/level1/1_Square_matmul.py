"""Square matrix product C = A @ B with N = 4096 (fp32)."""
import torch
import torch.nn as nn

N = 4096


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.matmul(A, B)


def get_inputs():
    # B is scaled by 1/sqrt(N) so the entries of C are O(1).
    A = torch.randn(N, N)
    B = torch.randn(N, N) / N ** 0.5
    return [A, B]


def get_init_inputs():
    return []
