"""Conv2d (3x3, padding 1) + ReLU + 2x2 max pooling: (32, 32, 256, 256) -> (32, 64, 128, 128)."""
import torch
import torch.nn as nn

batch_size = 32
in_channels = 32
out_channels = 64
height = 256
width = 256
kernel_size = 3
pool_size = 2


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, pool_size: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)
        self.pool = nn.MaxPool2d(pool_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(torch.relu(self.conv(x)))


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, pool_size]
