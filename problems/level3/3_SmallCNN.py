"""Small image classifier: four conv-BatchNorm(eval)-ReLU-maxpool stages, global average pooling, linear head.

Input (32, 3, 224, 224); channels 3 -> 32 -> 64 -> 128 -> 256; 1000 classes.
BatchNorm layers hold fixed non-trivial running statistics and the model is
in eval mode.
"""
import torch
import torch.nn as nn

batch_size = 32
in_channels = 3
image_size = 224
stage_channels = [32, 64, 128, 256]
num_classes = 1000


class Model(nn.Module):
    def __init__(self, in_channels: int, stage_channels: list, num_classes: int):
        super().__init__()
        layers = []
        width = in_channels
        for out in stage_channels:
            conv = nn.Conv2d(width, out, 3, padding=1, bias=False)
            bn = nn.BatchNorm2d(out)
            c = torch.arange(out, dtype=torch.float32)
            with torch.no_grad():
                bn.running_mean.copy_(0.2 * torch.sin(c))
                bn.running_var.copy_(1.0 + 0.5 * torch.cos(0.7 * c))
                bn.weight.copy_(1.0 + 0.3 * torch.sin(0.3 * c))
                bn.bias.copy_(0.1 * torch.cos(0.5 * c))
            layers += [conv, bn, nn.ReLU(), nn.MaxPool2d(2)]
            width = out
        self.features = nn.Sequential(*layers)
        self.head = nn.Linear(width, num_classes)
        self.eval()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.features(x)
        x = x.mean(dim=(2, 3))
        return self.head(x)


def get_inputs():
    return [torch.randn(batch_size, in_channels, image_size, image_size)]


def get_init_inputs():
    return [in_channels, stage_channels, num_classes]
