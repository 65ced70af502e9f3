"""BatchNorm2d in inference mode (running statistics) on a (40, 128, 256, 256) fp32 tensor.

The running mean and variance, weight and bias are fixed non-trivial
per-channel values; the module is put in eval mode in __init__, so forward
normalizes with the running statistics and updates nothing.
"""
import torch
import torch.nn as nn

batch_size = 40
channels = 128
height = 256
width = 256


class Model(nn.Module):
    def __init__(self, channels: int):
        super().__init__()
        self.bn = nn.BatchNorm2d(channels)
        c = torch.arange(channels, dtype=torch.float32)
        with torch.no_grad():
            self.bn.running_mean.copy_(0.5 * torch.sin(c))
            self.bn.running_var.copy_(1.0 + 0.75 * torch.cos(0.7 * c))
            self.bn.weight.copy_(1.0 + 0.3 * torch.sin(0.3 * c))
            self.bn.bias.copy_(0.1 * torch.cos(0.5 * c))
        self.eval()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.bn(x)


def get_inputs():
    return [torch.randn(batch_size, channels, height, width) * 1.5 + 0.3]


def get_init_inputs():
    return [channels]
