"""Row-wise softmax over very long rows (4096 x 393216, fp32).

A row is 1.5 MiB, more than one multiprocessor's shared memory, which is
what makes this problem interesting for a kernel writer.
"""
import torch
import torch.nn as nn

batch_size = 4096
dim = 393216


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=1)


def get_inputs():
    return [torch.rand(batch_size, dim)]


def get_init_inputs():
    return []


def get_check_inputs():
    # Uniform [0, 1) inputs hide a kernel that skips the max subtraction:
    # exp(1) never overflows. One large logit per row (up to ~106) overflows
    # exp() in fp32 unless the row maximum is subtracted first.
    x = torch.rand(batch_size, dim)
    rows = torch.arange(batch_size)
    cols = torch.randint(0, dim, (batch_size,))
    x[rows, cols] = 100.0 + (rows % 7).float()
    return [[x]]
