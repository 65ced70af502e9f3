import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def argmax_kernel(x_ptr, out_ptr, n_cols, stride_row, BLOCK_SIZE: tl.constexpr):
    # One program per row. Each lane keeps its best value and the first column where it saw it,
    # then the row's answer is the smallest column among the lanes holding the maximum.
    row = tl.program_id(0)
    best_val = tl.full([BLOCK_SIZE], float("-inf"), tl.float32)
    best_idx = tl.zeros([BLOCK_SIZE], dtype=tl.int32)
    for start in range(0, n_cols, BLOCK_SIZE):
        cols = start + tl.arange(0, BLOCK_SIZE)
        x = tl.load(x_ptr + row * stride_row + cols, mask=cols < n_cols, other=float("-inf"))
        take = x > best_val
        best_val = tl.where(take, x, best_val)
        best_idx = tl.where(take, cols, best_idx)
    row_max = tl.max(best_val, axis=0)
    candidates = tl.where(best_val == row_max, best_idx, n_cols)
    idx = tl.min(candidates, axis=0)
    tl.store(out_ptr + row, idx.to(tl.int64))


def triton_argmax(x: torch.Tensor) -> torch.Tensor:
    x = x.contiguous()
    rows, cols = x.shape
    out = torch.empty(rows, device=x.device, dtype=torch.int64)
    argmax_kernel[(rows,)](x, out, cols, x.stride(0), BLOCK_SIZE=1024, num_warps=4)
    return out


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return triton_argmax(x)
