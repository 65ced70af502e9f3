import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def layer_norm_kernel(x_ptr, y_ptr, w_ptr, b_ptr, stride, N, eps, BLOCK_SIZE: tl.constexpr):
    # One program per row; the whole row fits in one block.
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < N
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=0) / N
    diff = tl.where(mask, x - mean, 0.0)
    var = tl.sum(diff * diff, axis=0) / N
    rstd = 1.0 / tl.sqrt(var + eps)
    w = tl.load(w_ptr + cols, mask=mask)
    b = tl.load(b_ptr + cols, mask=mask)
    y = diff * rstd * w + b
    tl.store(y_ptr + row * stride + cols, y, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, features: int):
        super(ModelNew, self).__init__()
        self.ln = nn.LayerNorm(features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        N = x.shape[-1]
        x2d = x.view(-1, N)
        BLOCK_SIZE = triton.next_power_of_2(N)
        layer_norm_kernel[(x2d.shape[0],)](
            x2d, y, self.ln.weight, self.ln.bias, x2d.stride(0), N, self.ln.eps,
            BLOCK_SIZE=BLOCK_SIZE, num_warps=8,
        )
        return y
