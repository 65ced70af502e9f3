"""Conv2d (3x3, padding 1, no bias) + BatchNorm2d in eval mode + SiLU: (32, 64, 128, 128) -> (32, 128, 128, 128)."""
import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 32
in_channels = 64
out_channels = 128
height = 128
width = 128
kernel_size = 3


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2, bias=False)
        self.bn = nn.BatchNorm2d(out_channels)
        # Fixed non-trivial running statistics and affine parameters; eval
        # mode, so forward uses them and updates nothing.
        c = torch.arange(out_channels, dtype=torch.float32)
        with torch.no_grad():
            self.bn.running_mean.copy_(0.3 * torch.sin(c))
            self.bn.running_var.copy_(1.0 + 0.75 * torch.cos(0.7 * c))
            self.bn.weight.copy_(1.0 + 0.3 * torch.sin(0.3 * c))
            self.bn.bias.copy_(0.1 * torch.cos(0.5 * c))
        self.eval()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.silu(self.bn(self.conv(x)))


def get_inputs():
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
