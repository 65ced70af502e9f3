"""Post-norm residual block: LayerNorm(x + Linear(x)), x (8192, 2048)."""
import torch
import torch.nn as nn

batch_size = 8192
hidden = 2048


class Model(nn.Module):
    def __init__(self, hidden: int):
        super().__init__()
        self.linear = nn.Linear(hidden, hidden)
        self.norm = nn.LayerNorm(hidden)
        # Non-trivial affine parameters (the defaults are ones and zeros).
        i = torch.arange(hidden, dtype=torch.float32)
        with torch.no_grad():
            self.norm.weight.copy_(1.0 + 0.5 * torch.sin(0.37 * i))
            self.norm.bias.copy_(0.2 * torch.cos(0.11 * i))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x + self.linear(x))


def get_inputs():
    return [torch.randn(batch_size, hidden)]


def get_init_inputs():
    return [hidden]
