"""Mean cross entropy over 32768 rows of 4096 classes (fp32 logits, int64 targets)."""
import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 32768
num_classes = 4096


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(predictions, targets)


def get_inputs():
    return [torch.rand(batch_size, num_classes), torch.randint(0, num_classes, (batch_size,))]


def get_init_inputs():
    return []


def get_check_inputs():
    # With iid uniform logits, reading the wrong row's target moves the mean
    # loss by ~1e-4 relative. Making each row's target logit stand out by 5
    # turns that bug into an O(1) error; logits scaled to ~50 also catch a
    # log-sum-exp computed without subtracting the row maximum.
    predictions = torch.rand(batch_size, num_classes) * 50.0
    targets = torch.randint(0, num_classes, (batch_size,))
    predictions[torch.arange(batch_size), targets] += 5.0
    return [[predictions, targets]]
