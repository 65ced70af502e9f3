"""Scaled dot-product attention core, written out: softmax(Q K^T / sqrt(d)) V.

Q, K, V (8, 16, 1024, 128) as (batch, heads, sequence, head dim); no mask.
"""
import torch
import torch.nn as nn

batch_size = 8
num_heads = 16
seq_len = 1024
head_dim = 128


class Model(nn.Module):
    def __init__(self, head_dim: int):
        super().__init__()
        self.scale = head_dim ** -0.5

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        scores = torch.matmul(q, k.transpose(-2, -1)) * self.scale
        return torch.matmul(torch.softmax(scores, dim=-1), v)


def get_inputs():
    shape = (batch_size, num_heads, seq_len, head_dim)
    return [torch.randn(shape), torch.randn(shape), torch.randn(shape)]


def get_init_inputs():
    return [head_dim]


def get_check_inputs():
    # With N(0, 1) q and k the scaled scores are ~N(0, 1) and exp() never
    # overflows. Here k's last feature is 1 for every key, so q's last feature
    # shifts all the scores of its query row alike: by 100 to 150, a
    # different shift per row. Softmax does not change, but exp() overflows
    # fp32 past 88, so an online softmax that does not track the running row
    # maximum returns inf / NaN. The shift sits in the last feature because a
    # product that sums features in order then adds the large term last,
    # which keeps the fp32 reference's rounding near 4e-6 (relative L2) on
    # the CPU, against 3e-5 with the shift in the first feature.
    shape = (batch_size, num_heads, seq_len, head_dim)
    q = torch.randn(shape) * 1.5
    k = torch.randn(shape) * 1.5
    k[..., -1] = 1.0
    shift = 100.0 + 50.0 * torch.rand(batch_size, num_heads, seq_len)
    q[..., -1] = shift * head_dim ** 0.5
    return [[q, k, torch.randn(shape)]]
