"""Three-layer MLP with ReLU: 1024 -> 4096 -> 4096 -> 1024, batch 4096."""
import torch
import torch.nn as nn

batch_size = 4096
in_features = 1024
hidden_sizes = [4096, 4096]
out_features = 1024


class Model(nn.Module):
    def __init__(self, in_features: int, hidden_sizes: list, out_features: int):
        super().__init__()
        layers = []
        width = in_features
        for hidden in hidden_sizes:
            layers += [nn.Linear(width, hidden), nn.ReLU()]
            width = hidden
        layers.append(nn.Linear(width, out_features))
        self.net = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, hidden_sizes, out_features]
