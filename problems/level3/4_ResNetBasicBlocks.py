"""Two ResNet basic blocks (conv-BN-ReLU-conv-BN + identity, then ReLU) at 64 channels on (16, 64, 112, 112).

BatchNorm layers hold fixed non-trivial running statistics and the model is
in eval mode.
"""
import torch
import torch.nn as nn

batch_size = 16
channels = 64
image_size = 112
num_blocks = 2


def _batch_norm(channels: int, phase: float) -> nn.BatchNorm2d:
    bn = nn.BatchNorm2d(channels)
    c = torch.arange(channels, dtype=torch.float32) + phase
    with torch.no_grad():
        bn.running_mean.copy_(0.2 * torch.sin(c))
        bn.running_var.copy_(1.0 + 0.5 * torch.cos(0.7 * c))
        bn.weight.copy_(1.0 + 0.3 * torch.sin(0.3 * c))
        bn.bias.copy_(0.1 * torch.cos(0.5 * c))
    return bn


class BasicBlock(nn.Module):
    def __init__(self, channels: int, phase: float):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn1 = _batch_norm(channels, phase)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = _batch_norm(channels, phase + 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return torch.relu(out + x)


class Model(nn.Module):
    def __init__(self, channels: int, num_blocks: int):
        super().__init__()
        self.blocks = nn.Sequential(*[BasicBlock(channels, float(i)) for i in range(num_blocks)])
        self.eval()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.blocks(x)


def get_inputs():
    return [torch.randn(batch_size, channels, image_size, image_size)]


def get_init_inputs():
    return [channels, num_blocks]
