# Expected: ok. Sum over the middle dimension with atomicAdd into a torch::zeros output: each block sums a
# slab of 64 rows of the reduced dimension for 256 columns and adds its partial sums.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

sum_source = """
#include <torch/extension.h>
#include <cuda_runtime.h>

__global__ void sum_dim1_kernel(const float* x, float* out, int d1, int d2, int rows_per_block) {
    int b = blockIdx.z;
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    int r0 = blockIdx.y * rows_per_block;
    if (col >= d2) return;
    float acc = 0.0f;
    for (int r = r0; r < min(r0 + rows_per_block, d1); ++r) {
        acc += x[((long)b * d1 + r) * d2 + col];
    }
    atomicAdd(&out[(long)b * d2 + col], acc);
}

torch::Tensor sum_dim1_cuda(torch::Tensor x) {
    int B = x.size(0), d1 = x.size(1), d2 = x.size(2);
    auto out = torch::zeros({B, d2}, x.options());
    const int rows_per_block = 64;
    dim3 block(256);
    dim3 grid((d2 + 255) / 256, (d1 + rows_per_block - 1) / rows_per_block, B);
    sum_dim1_kernel<<<grid, block>>>(x.data_ptr<float>(), out.data_ptr<float>(), d1, d2, rows_per_block);
    return out;
}
"""

sum_cpp_source = "torch::Tensor sum_dim1_cuda(torch::Tensor x);"

sum_mod = load_inline(
    name="sum_dim1_atomic",
    cpp_sources=sum_cpp_source,
    cuda_sources=sum_source,
    functions=["sum_dim1_cuda"],
    verbose=True,
)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super(ModelNew, self).__init__()
        self.dim = dim

    def forward(self, x):
        return sum_mod.sum_dim1_cuda(x.contiguous())
