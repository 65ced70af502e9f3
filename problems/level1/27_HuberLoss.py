"""Mean Huber loss (delta = 0.5) between two 16384 x 11264 fp32 tensors (scalar output)."""
import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 16384
dim = 11264
delta = 0.5


class Model(nn.Module):
    def __init__(self, delta: float):
        super().__init__()
        self.delta = delta

    def forward(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return F.huber_loss(predictions, targets, delta=self.delta)


def get_inputs():
    # Differences ~N(0, 2): about 28% fall in the quadratic zone |d| < 0.5.
    return [torch.randn(batch_size, dim), torch.randn(batch_size, dim)]


def get_init_inputs():
    return [delta]


def get_check_inputs():
    # As for MSE, independent inputs hide misaligned indexing: every pairing
    # has the same expected loss. Here targets sit near their own predictions,
    # half the rows well inside the quadratic zone (|d| ~ 0.05) and half mostly
    # in the linear zone (|d| ~ 2), so both branches count and a misaligned
    # kernel, or one that swaps the branches, is far off.
    predictions = torch.randn(batch_size, dim)
    spread = torch.where(torch.arange(batch_size) % 2 == 0, 0.05, 2.0).view(batch_size, 1)
    targets = predictions + spread * torch.randn(batch_size, dim)
    return [[predictions, targets]]
