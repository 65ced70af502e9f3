"""Cosine-similarity loss: mean over rows of 1 - cos(a_i, b_i), rows of 5120 features, 32768 rows."""
import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 32768
dim = 5120


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        cosine = F.cosine_similarity(predictions, targets, dim=1)
        return torch.mean(1.0 - cosine)


def get_inputs():
    # Targets correlated with predictions so the cosines are not all ~0.
    predictions = torch.randn(batch_size, dim)
    targets = predictions + 2.0 * torch.randn(batch_size, dim)
    return [predictions, targets]


def get_init_inputs():
    return []


def get_check_inputs():
    # Two independent random rows have cosine ~0, and every default row has
    # the same expected cosine (~0.45), so the mean hides a kernel that gets
    # some rows right and others wrong in a way that averages out. Here each
    # row has its own noise level (0.1 to 3 times its scale), giving cosines
    # from ~1 down to ~0.3, and its own norm (0.5 to 5 per element), so a
    # kernel that mixes up rows' norms or forgets one of them is off.
    predictions = torch.randn(batch_size, dim) * (0.5 + 4.5 * torch.rand(batch_size, 1))
    noise = 0.1 + 2.9 * torch.rand(batch_size, 1)
    targets = (predictions + noise * predictions.norm(dim=1, keepdim=True) / dim ** 0.5
               * torch.randn(batch_size, dim))
    return [[predictions, targets]]
