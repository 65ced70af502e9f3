"""Scale each row to unit L2 norm (as before a cosine similarity). CPU-sized.

get_check_inputs adds rows whose sizes differ by 1000x: a kernel that mixes up rows,
or normalizes by one norm for the whole tensor, is far off on them, while on iid
inputs every row's norm is nearly the same."""
import torch
import torch.nn as nn

rows, cols = 1024, 1024


class Model(nn.Module):
    def forward(self, x):
        return x / x.norm(dim=1, keepdim=True).clamp_min(1e-12)


def get_inputs():
    return [torch.randn(rows, cols)]


def get_check_inputs():
    scales = torch.logspace(-1.5, 1.5, rows).unsqueeze(1)
    return [[torch.randn(rows, cols) * scales]]


def get_init_inputs():
    return []
