"""Batched matrix product (bmm): 128 independent (512 x 1024) @ (1024 x 768) products."""
import torch
import torch.nn as nn

batch_size = 128
M = 512
K = 1024
N = 768


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
        return torch.bmm(A, B)


def get_inputs():
    A = torch.randn(batch_size, M, K)
    B = torch.randn(batch_size, K, N) / K ** 0.5
    return [A, B]


def get_init_inputs():
    return []

