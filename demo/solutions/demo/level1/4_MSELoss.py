"""PyTorch's fused mse_loss: no temporaries for the difference and its square."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def forward(self, predictions, targets):
        return F.mse_loss(predictions, targets)
