"""Conv2d (3x3, padding 1) + GroupNorm (8 groups) + tanh: (32, 64, 128, 128) -> (32, 128, 128, 128)."""
import torch
import torch.nn as nn

batch_size = 32
in_channels = 64
out_channels = 128
height = 128
width = 128
kernel_size = 3
num_groups = 8


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, num_groups: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)
        self.norm = nn.GroupNorm(num_groups, out_channels)
        # Non-trivial affine parameters (the defaults are ones and zeros).
        c = torch.arange(out_channels, dtype=torch.float32)
        with torch.no_grad():
            self.norm.weight.copy_(1.0 + 0.5 * torch.sin(0.37 * c))
            self.norm.bias.copy_(0.2 * torch.cos(0.11 * c))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.norm(self.conv(x)))


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size, num_groups]


def get_check_inputs():
    # GroupNorm's statistics are per (sample, group), each over 262144
    # values. On iid inputs all of them are nearly equal, so a kernel that
    # takes them over the wrong samples or channels is off by only ~0.2%, which
    # only a tight tolerance notices. Here each sample has its own offset (-3
    # to 3) and scale (0.2 to 5), which makes such a kernel off by O(1).
    offset = torch.rand(batch_size, 1, 1, 1) * 6.0 - 3.0
    scale = 0.2 + 4.8 * torch.rand(batch_size, 1, 1, 1)
    return [[torch.randn(batch_size, in_channels, height, width) * scale + offset]]
