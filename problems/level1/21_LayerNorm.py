"""LayerNorm over the last dimension (8192) of 32768 rows, with a non-trivial affine weight and bias."""
import torch
import torch.nn as nn

batch_size = 32768
hidden = 8192
eps = 1e-5


class Model(nn.Module):
    def __init__(self, hidden: int, eps: float):
        super().__init__()
        self.norm = nn.LayerNorm(hidden, eps=eps)
        # The default affine parameters (ones and zeros) would let a kernel
        # that ignores them, or reads them at the wrong index, pass. Use fixed
        # values that vary along the hidden dimension instead.
        i = torch.arange(hidden, dtype=torch.float32)
        with torch.no_grad():
            self.norm.weight.copy_(1.0 + 0.5 * torch.sin(0.37 * i))
            self.norm.bias.copy_(0.2 * torch.cos(0.11 * i))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x)


def get_inputs():
    return [torch.randn(batch_size, hidden)]


def get_init_inputs():
    return [hidden, eps]


def get_check_inputs():
    # Each row gets its own offset (up to +-100) and scale (0.5 to 2). On
    # zero-mean inputs a variance computed as E[x^2] - E[x]^2 in fp32 is fine;
    # at these offsets it cancels away most of its digits (errors ~1e-2 in the
    # output, against ~2e-5 for a two-pass or Welford variance).
    offset = (torch.rand(batch_size, 1) * 2.0 - 1.0) * 100.0
    scale = 0.5 + 1.5 * torch.rand(batch_size, 1)
    return [[torch.randn(batch_size, hidden) * scale + offset]]
