"""Attention scores: softmax(Q @ K^T * scale) over the last dimension, Q and K (32, 2048, 256)."""
import torch
import torch.nn as nn

batch_size = 32
seq_len = 2048
head_dim = 256


class Model(nn.Module):
    def __init__(self, head_dim: int):
        super().__init__()
        self.scale = head_dim ** -0.5

    def forward(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        scores = torch.bmm(q, k.transpose(1, 2)) * self.scale
        return torch.softmax(scores, dim=-1)


def get_inputs():
    return [torch.randn(batch_size, seq_len, head_dim), torch.randn(batch_size, seq_len, head_dim)]


def get_init_inputs():
    return [head_dim]


def get_check_inputs():
    # With N(0, 1) q and k the scaled scores are ~N(0, 1) and exp() never
    # overflows. Scaling q and k by 5.5 gives scores of standard deviation
    # ~30 and row maxima near 100: exp() overflows fp32 past 88, so a softmax
    # that does not subtract the row maximum returns inf / NaN.
    return [[torch.randn(batch_size, seq_len, head_dim) * 5.5,
             torch.randn(batch_size, seq_len, head_dim) * 5.5]]
