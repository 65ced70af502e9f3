import torch
import torch.nn as nn
import triton
import triton.language as tl

# LayerNorm as four kernels: row means, row variances (centered, second pass), 1/sqrt(var + eps),
# then normalize with the affine weight and bias.


@triton.jit
def row_mean_kernel(x_ptr, mean_ptr, stride, N, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for off in range(0, N, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        acc += tl.load(x_ptr + row * stride + cols, mask=cols < N, other=0.0)
    tl.store(mean_ptr + row, tl.sum(acc, axis=0) / N)


@triton.jit
def row_var_kernel(x_ptr, mean_ptr, var_ptr, stride, N, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    mean = tl.load(mean_ptr + row)
    acc = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for off in range(0, N, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        mask = cols < N
        x = tl.load(x_ptr + row * stride + cols, mask=mask, other=0.0)
        d = tl.where(mask, x - mean, 0.0)
        acc += d * d
    tl.store(var_ptr + row, tl.sum(acc, axis=0) / N)


@triton.jit
def rstd_kernel(var_ptr, rstd_ptr, M, eps, BLOCK_SIZE: tl.constexpr):
    offs = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offs < M
    var = tl.load(var_ptr + offs, mask=mask, other=1.0)
    tl.store(rstd_ptr + offs, 1.0 / tl.sqrt(var + eps), mask=mask)


@triton.jit
def normalize_kernel(x_ptr, y_ptr, w_ptr, b_ptr, mean_ptr, rstd_ptr, stride, N, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = cols < N
    mean = tl.load(mean_ptr + row)
    rstd = tl.load(rstd_ptr + row)
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=0.0)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0)
    b = tl.load(b_ptr + cols, mask=mask, other=0.0)
    tl.store(y_ptr + row * stride + cols, (x - mean) * rstd * w + b, mask=mask)


def triton_layer_norm(x, weight, bias, eps):
    N = x.shape[-1]
    x2d = x.contiguous().view(-1, N)
    M = x2d.shape[0]
    y = torch.empty_like(x2d)
    mean = torch.empty(M, device=x.device, dtype=torch.float32)
    var = torch.empty(M, device=x.device, dtype=torch.float32)
    rstd = torch.empty(M, device=x.device, dtype=torch.float32)
    BLOCK = 1024
    row_mean_kernel[(M,)](x2d, mean, x2d.stride(0), N, BLOCK_SIZE=BLOCK, num_warps=4)
    row_var_kernel[(M,)](x2d, mean, var, x2d.stride(0), N, BLOCK_SIZE=BLOCK, num_warps=4)
    rstd_kernel[(triton.cdiv(M, 1024),)](var, rstd, M, eps, BLOCK_SIZE=1024)
    normalize_kernel[(M, triton.cdiv(N, BLOCK))](x2d, y, weight, bias, mean, rstd, x2d.stride(0), N,
                                                 BLOCK_SIZE=BLOCK, num_warps=4)
    return y.view(x.shape)


class ModelNew(nn.Module):
    def __init__(self, features: int):
        super(ModelNew, self).__init__()
        self.ln = nn.LayerNorm(features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return triton_layer_norm(x, self.ln.weight, self.ln.bias, self.ln.eps)
