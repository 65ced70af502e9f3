"""The difference squared in place: one temporary instead of two. (F.mse_loss, the
obvious rewrite, ran at 0.38x the reference in kbench on one CPU thread: a rewrite is
only faster once timed.)"""
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, predictions, targets):
        return (predictions - targets).square_().mean()
