"""Linear (4096 -> 4096, with bias) + LayerNorm over the features + ReLU, batch 4096."""
import torch
import torch.nn as nn

batch_size = 4096
in_features = 4096
out_features = 4096


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.norm = nn.LayerNorm(out_features)
        # Non-trivial affine parameters (the defaults are ones and zeros).
        i = torch.arange(out_features, dtype=torch.float32)
        with torch.no_grad():
            self.norm.weight.copy_(1.0 + 0.5 * torch.sin(0.37 * i))
            self.norm.bias.copy_(0.2 * torch.cos(0.11 * i))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.norm(self.linear(x)))


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
