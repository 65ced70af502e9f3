"""Linear layer without bias (2048 -> 2048, batch 2048), then a bias add, then GELU."""
import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 2048
in_features = 2048
out_features = 2048


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features, bias=False)
        self.bias = nn.Parameter(0.5 * torch.randn(out_features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(self.linear(x) + self.bias)


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
