"""Pre-norm transformer encoder block, written out: multi-head self-attention and a GELU MLP.

x (4, 1024, 1024) as (batch, sequence, model dim); 16 heads of 64; MLP
hidden 4096; no mask, no dropout. The attention is explicit matrix products
and a softmax, not a fused kernel.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 4
seq_len = 1024
d_model = 1024
num_heads = 16
d_ff = 4096


class Model(nn.Module):
    def __init__(self, d_model: int, num_heads: int, d_ff: int):
        super().__init__()
        self.num_heads = num_heads
        self.head_dim = d_model // num_heads
        self.norm1 = nn.LayerNorm(d_model)
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.fc1 = nn.Linear(d_model, d_ff)
        self.fc2 = nn.Linear(d_ff, d_model)
        # Non-trivial LayerNorm affine parameters (the defaults are ones and zeros).
        i = torch.arange(d_model, dtype=torch.float32)
        with torch.no_grad():
            self.norm1.weight.copy_(1.0 + 0.3 * torch.sin(0.37 * i))
            self.norm1.bias.copy_(0.1 * torch.cos(0.11 * i))
            self.norm2.weight.copy_(1.0 + 0.3 * torch.cos(0.23 * i))
            self.norm2.bias.copy_(0.1 * torch.sin(0.17 * i))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, d = x.shape
        h = self.norm1(x)
        qkv = self.qkv(h).view(b, s, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]                      # (b, heads, s, head_dim)
        scores = torch.matmul(q, k.transpose(-2, -1)) * self.head_dim ** -0.5
        attn = torch.matmul(torch.softmax(scores, dim=-1), v)  # (b, heads, s, head_dim)
        attn = attn.transpose(1, 2).reshape(b, s, d)
        x = x + self.proj(attn)
        x = x + self.fc2(F.gelu(self.fc1(self.norm2(x))))
        return x


def get_inputs():
    return [torch.randn(batch_size, seq_len, d_model)]


def get_init_inputs():
    return [d_model, num_heads, d_ff]
