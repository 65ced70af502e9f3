"""GroupNorm, 8 groups over 256 channels, of a 32 x 256 x 64 x 64 fp32 tensor with affine weight and bias (128 MB in,
128 MB out): ~130 us on an H100."""
import torch
import torch.nn as nn

batch_size = 32
channels = 256
height = 64
width = 64
num_groups = 8


class Model(nn.Module):
    def __init__(self, num_groups: int, channels: int):
        super().__init__()
        self.gn = nn.GroupNorm(num_groups, channels)
        with torch.no_grad():
            self.gn.weight.copy_(torch.rand(channels) + 0.5)
            self.gn.bias.copy_(0.1 * torch.randn(channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.gn(x)


def get_inputs():
    return [torch.randn(batch_size, channels, height, width) + 1.0]


def get_init_inputs():
    return [num_groups, channels]
