import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.autotune(
    configs=[
        triton.Config({}, num_warps=4),
        triton.Config({}, num_warps=8),
        triton.Config({}, num_warps=16),
    ],
    key=["N"],
)
@triton.jit
def rmsnorm_kernel(x_ptr, w_ptr, y_ptr, stride, N, eps, BLOCK_SIZE: tl.constexpr):
    # One program per row; the whole row sits in registers.
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < N
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=0.0)
    mean_sq = tl.sum(x * x, axis=0) / N
    rms = tl.sqrt(mean_sq + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0)
    tl.store(y_ptr + row * stride + cols, x / rms * w, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, features: int, eps: float):
        super(ModelNew, self).__init__()
        self.weight = nn.Parameter(torch.ones(features))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        N = x.shape[-1]
        x2d = x.contiguous().view(-1, N)
        y = torch.empty_like(x2d)
        BLOCK_SIZE = triton.next_power_of_2(N)
        rmsnorm_kernel[(x2d.shape[0],)](x2d, self.weight, y, x2d.stride(0), N, self.eps, BLOCK_SIZE=BLOCK_SIZE)
        return y.view(x.shape)
