"""Mean hinge loss; targets (one per column) broadcast along the last dimension."""
import torch
import torch.nn as nn

batch_size = 32768
dim = 32768


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return torch.mean(torch.clamp(1 - predictions * targets, min=0))


def get_inputs():
    predictions = torch.rand(batch_size, dim)
    targets = torch.randint(0, 2, (dim,)).float() * 2 - 1
    return [predictions, targets]


def get_init_inputs():
    return []


def get_check_inputs():
    # targets[j] multiplies column j. A kernel that multiplies row i by
    # targets[i] instead moves the mean of iid inputs by only ~1e-5 relative.
    # Here predictions depend on their column's target (range [0, 2) where the
    # target is +1, [0, 1) where it is -1): the true mean is ~0.875 and the
    # wrong-axis mean ~1.06.
    targets = torch.randint(0, 2, (dim,)).float() * 2 - 1
    predictions = torch.rand(batch_size, dim) * (1.5 + 0.5 * targets)
    return [[predictions, targets]]
