"""Depthwise 2-D convolution (groups = channels), 3x3, stride 1, padding 1, with bias, on (16, 128, 256, 256)."""
import torch
import torch.nn as nn

batch_size = 16
channels = 128
height = 256
width = 256
kernel_size = 3


class Model(nn.Module):
    def __init__(self, channels: int, kernel_size: int):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, kernel_size, padding=kernel_size // 2, groups=channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return [channels, kernel_size]
