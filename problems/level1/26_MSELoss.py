"""Mean squared error between two 16384 x 11264 fp32 tensors (scalar output)."""
import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 16384
dim = 11264


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return F.mse_loss(predictions, targets)


def get_inputs():
    return [torch.randn(batch_size, dim), torch.randn(batch_size, dim)]


def get_init_inputs():
    return []


def get_check_inputs():
    # With independent predictions and targets, pairing predictions[i, j] with
    # any other targets element gives the same expected squared difference
    # (2), so a kernel with misaligned indexing lands within ~1e-4 of the
    # answer. Targets close to their own predictions (MSE ~0.01) make any
    # misalignment cost a factor of ~200.
    predictions = torch.randn(batch_size, dim)
    targets = predictions + 0.1 * torch.randn(batch_size, dim)
    return [[predictions, targets]]
