# Expected: build_error. The launch uses `blockSize`, the kernel's host code declares `block_size`.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

layernorm_source = """
#include <torch/extension.h>
#include <cuda_runtime.h>

__global__ void layernorm_kernel(const float* x, const float* w, const float* b, float* out, int cols, float eps) {
    int row = blockIdx.x;
    extern __shared__ float buf[];
    float sum = 0.0f, sq = 0.0f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) {
        float v = x[row * cols + c];
        sum += v;
        sq += v * v;
    }
    buf[threadIdx.x] = sum;
    buf[blockDim.x + threadIdx.x] = sq;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) {
            buf[threadIdx.x] += buf[threadIdx.x + s];
            buf[blockDim.x + threadIdx.x] += buf[blockDim.x + threadIdx.x + s];
        }
        __syncthreads();
    }
    float mean = buf[0] / cols;
    float var = buf[blockDim.x] / cols - mean * mean;
    float inv = rsqrtf(var + eps);
    for (int c = threadIdx.x; c < cols; c += blockDim.x) {
        out[row * cols + c] = (x[row * cols + c] - mean) * inv * w[c] + b[c];
    }
}

torch::Tensor layernorm_cuda(torch::Tensor x, torch::Tensor w, torch::Tensor b, double eps) {
    int rows = x.size(0);
    int cols = x.size(1);
    auto out = torch::empty_like(x);
    const int block_size = 256;
    layernorm_kernel<<<rows, blockSize, 2 * blockSize * sizeof(float)>>>(
        x.data_ptr<float>(), w.data_ptr<float>(), b.data_ptr<float>(), out.data_ptr<float>(), cols, (float)eps);
    return out;
}
"""

layernorm_cpp_source = "torch::Tensor layernorm_cuda(torch::Tensor x, torch::Tensor w, torch::Tensor b, double eps);"

layernorm = load_inline(
    name="layernorm_rows",
    cpp_sources=layernorm_cpp_source,
    cuda_sources=layernorm_source,
    functions=["layernorm_cuda"],
    verbose=True,
)


class ModelNew(nn.Module):
    def __init__(self, features: int):
        super(ModelNew, self).__init__()
        self.ln = nn.LayerNorm(features)

    def forward(self, x):
        return layernorm.layernorm_cuda(x, self.ln.weight, self.ln.bias, self.ln.eps)
