"""Row L2 normalization with the column loop fully unrolled (tl.static_range over the chunks of N_COLS, a constexpr)
and autotuned over eight configs: the kind of kernel whose first call is a long JIT compile. Every config is its own
compile, and the unrolled body grows with N_COLS / BLOCK_SIZE (two passes of 128 chunks at BLOCK_SIZE 128 for 16384
columns), so LLVM and ptxas see thousands of instructions. Compiling the eight configs for sm_90 took 38.9 s on a
2-core CPU box (Triton 3.9: 14-16 s for each BLOCK_SIZE 128 config, about 3 s at 256, under 1.5 s above), before the
autotuner's timing runs; expected 20-40 s on an H100 host, more with builds beside it."""
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.autotune(
    configs=[
        triton.Config({"BLOCK_SIZE": 128}, num_warps=4),
        triton.Config({"BLOCK_SIZE": 128}, num_warps=2),
        triton.Config({"BLOCK_SIZE": 256}, num_warps=4),
        triton.Config({"BLOCK_SIZE": 256}, num_warps=8),
        triton.Config({"BLOCK_SIZE": 512}, num_warps=4),
        triton.Config({"BLOCK_SIZE": 512}, num_warps=8),
        triton.Config({"BLOCK_SIZE": 1024}, num_warps=8),
        triton.Config({"BLOCK_SIZE": 1024}, num_warps=16),
    ],
    key=["N_COLS"],
)
@triton.jit
def l2norm_kernel(x_ptr, out_ptr, stride, N_COLS: tl.constexpr, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    x_row = x_ptr + row * stride
    out_row = out_ptr + row * stride
    acc = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    # pass 1: sum of squares, unrolled at compile time
    for i in tl.static_range((N_COLS + BLOCK_SIZE - 1) // BLOCK_SIZE):
        cols = i * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
        x = tl.load(x_row + cols, mask=cols < N_COLS, other=0.0)
        acc += x * x
    norm = tl.sqrt(tl.sum(acc, axis=0))
    # pass 2: scale, unrolled as well
    for i in tl.static_range((N_COLS + BLOCK_SIZE - 1) // BLOCK_SIZE):
        cols = i * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
        mask = cols < N_COLS
        x = tl.load(x_row + cols, mask=mask, other=0.0)
        tl.store(out_row + cols, x / norm, mask=mask)


def triton_l2norm(x: torch.Tensor) -> torch.Tensor:
    x = x.contiguous()
    rows, cols = x.shape
    out = torch.empty_like(x)
    l2norm_kernel[(rows,)](x, out, x.stride(0), N_COLS=cols)
    return out


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return triton_l2norm(x)
