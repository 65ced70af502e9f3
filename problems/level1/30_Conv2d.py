"""2-D convolution, 3x3 kernel, stride 1, padding 1, with bias: (16, 64, 224, 224) -> (16, 128, 224, 224)."""
import torch
import torch.nn as nn

batch_size = 16
in_channels = 64
out_channels = 128
height = 224
width = 224
kernel_size = 3


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
