"""2-D average pooling, 3x3 window, stride 1, padding 1 (zero pads counted): (32, 128, 256, 256) in and out."""
import torch
import torch.nn as nn

batch_size = 32
channels = 128
height = 256
width = 256
kernel_size = 3
stride = 1
padding = 1


class Model(nn.Module):
    def __init__(self, kernel_size: int, stride: int, padding: int):
        super().__init__()
        self.pool = nn.AvgPool2d(kernel_size, stride=stride, padding=padding)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(x)


def get_inputs():
    return [torch.randn(batch_size, channels, height, width)]


def get_init_inputs():
    return [kernel_size, stride, padding]
