"""LayerNorm over the last dimension (4096, with weight and bias) of an 8192 x 4096 fp32 tensor."""
import torch
import torch.nn as nn

batch_size = 8192
features = 4096


class Model(nn.Module):
    def __init__(self, features: int):
        super().__init__()
        self.ln = nn.LayerNorm(features)
        with torch.no_grad():  # not the default ones and zeros, so that a kernel ignoring them fails
            self.ln.weight.uniform_(0.5, 1.5)
            self.ln.bias.normal_(0.0, 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.ln(x)


def get_inputs():
    return [3.0 * torch.randn(batch_size, features) + 1.0]


def get_init_inputs():
    return [features]
