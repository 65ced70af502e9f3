"""KL divergence with batchmean reduction over 16384 rows of 16384 probabilities."""
import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 16384
dim = 16384


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return F.kl_div(torch.log(predictions), targets, reduction="batchmean")


def get_inputs():
    scale = torch.rand(())
    predictions = (torch.rand(batch_size, dim) * scale).softmax(-1)
    targets = torch.rand(batch_size, dim).softmax(-1)
    return [predictions, targets]


def get_init_inputs():
    return []


def get_check_inputs():
    # Near-uniform rows (the default inputs) make every term tiny and similar,
    # so a kernel that mixes up rows or the reduction still lands close.
    # Peaked rows with a different peak per row do not.
    predictions = (torch.rand(batch_size, dim) * 20.0).softmax(-1)
    targets = (torch.rand(batch_size, dim) * 8.0).softmax(-1)
    return [[predictions, targets]]
