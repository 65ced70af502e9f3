"""RMSNorm over the last dimension, written out in torch ops: x / sqrt(mean(x^2) + eps) * weight.

Input (16, 2048, 8192) fp32; the weight is a learnable parameter of 8192
fixed, non-trivial values.
"""
import torch
import torch.nn as nn

batch_size = 16
seq_len = 2048
hidden = 8192
eps = 1e-6


class Model(nn.Module):
    def __init__(self, hidden: int, eps: float):
        super().__init__()
        self.eps = eps
        i = torch.arange(hidden, dtype=torch.float32)
        self.weight = nn.Parameter(1.0 + 0.5 * torch.sin(0.37 * i))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rms_inv = torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps)
        return x * rms_inv * self.weight


def get_inputs():
    return [torch.randn(batch_size, seq_len, hidden)]


def get_init_inputs():
    return [hidden, eps]


def get_check_inputs():
    # Every row of iid N(0, 1) inputs has an RMS within about 1% of 1, so a
    # kernel that uses another row's RMS, or one global RMS, is off by only
    # ~1%. Here each row's scale is log-uniform in [1e-3, 1e2], so that error
    # becomes orders of magnitude; at the small end mean(x^2) is comparable to
    # eps, which also catches eps left out or added outside the square root.
    scale = 10.0 ** (torch.rand(batch_size, seq_len, 1) * 5.0 - 3.0)
    return [[torch.randn(batch_size, seq_len, hidden) * scale]]
