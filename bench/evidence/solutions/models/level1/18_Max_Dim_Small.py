import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# Row max: one warp per row, warp-shuffle reduction
row_max_source = """
#include <torch/extension.h>
#include <cuda_runtime.h>

__global__ void row_max_kernel(const float* __restrict__ x, float* __restrict__ out, int rows, int cols) {
    int warp_id = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
    int lane = threadIdx.x % 32;
    if (warp_id >= rows) return;  // the whole warp leaves together

    const float* row = x + (long long)warp_id * cols;
    float m = -INFINITY;
    for (int i = lane; i < cols; i += 32) {
        m = fmaxf(m, row[i]);
    }
    for (int offset = 16; offset > 0; offset /= 2) {
        m = fmaxf(m, __shfl_down_sync(0xffffffff, m, offset));
    }
    if (lane == 0) {
        out[warp_id] = m;
    }
}

torch::Tensor row_max_cuda(torch::Tensor x) {
    int rows = x.size(0);
    int cols = x.size(1);
    auto out = torch::empty({rows}, x.options());
    const int threads = 256;  // 8 rows per block
    const int blocks = (rows * 32 + threads - 1) / threads;
    row_max_kernel<<<blocks, threads>>>(x.data_ptr<float>(), out.data_ptr<float>(), rows, cols);
    return out;
}
"""

row_max_cpp_source = "torch::Tensor row_max_cuda(torch::Tensor x);"

row_max = load_inline(
    name="row_max_small",
    cpp_sources=row_max_cpp_source,
    cuda_sources=row_max_source,
    functions=["row_max_cuda"],
    verbose=True,
    extra_cflags=[""],
    extra_ldflags=[""],
)


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()
        self.row_max = row_max

    def forward(self, x):
        return self.row_max.row_max_cuda(x.contiguous())
