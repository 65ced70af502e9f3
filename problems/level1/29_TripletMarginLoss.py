"""Triplet margin loss (margin 1.0, L2 distance), 24576 triplets of 4096-dim embeddings, mean reduction."""
import torch
import torch.nn as nn
import torch.nn.functional as F

batch_size = 24576
dim = 4096
margin = 1.0


class Model(nn.Module):
    def __init__(self, margin: float):
        super().__init__()
        self.margin = margin

    def forward(self, anchor: torch.Tensor, positive: torch.Tensor, negative: torch.Tensor) -> torch.Tensor:
        return F.triplet_margin_loss(anchor, positive, negative, margin=self.margin)


def get_inputs():
    # Positives and negatives near the anchor at different distances, so
    # the hinge is active for some rows and not for others.
    anchor = torch.randn(batch_size, dim)
    positive = anchor + 0.1 * torch.randn(batch_size, dim)
    negative = anchor + 0.1 * (0.8 + 0.6 * torch.rand(batch_size, 1)) * torch.randn(batch_size, dim)
    return [anchor, positive, negative]


def get_init_inputs():
    return [margin]


def get_check_inputs():
    # Unrelated random triplets are all ~sqrt(2 * dim) ~ 90 apart, which is
    # why even the default inputs put positives and negatives near their
    # anchor. Here rows also differ in scale (anchors' entries 0.5 to 4 times
    # N(0, 1), distances scaled alike), and every third row's negative is far
    # away, so its hinge is inactive and its loss exactly 0: a kernel that
    # drops the clamp at 0 or mixes rows is far off.
    row_scale = 0.5 + 3.5 * torch.rand(batch_size, 1)
    anchor = torch.randn(batch_size, dim) * row_scale
    positive = anchor + 0.1 * row_scale * torch.randn(batch_size, dim)
    spread = 0.08 + 0.06 * torch.rand(batch_size, 1)
    spread[::3] = 1.0
    negative = anchor + spread * row_scale * torch.randn(batch_size, dim)
    return [[anchor, positive, negative]]
