import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# RMSNorm: one block per row; sum of squares reduced in shared memory, then scale and weight
rmsnorm_source = """
#include <torch/extension.h>
#include <cuda_runtime.h>

__global__ void rmsnorm_kernel(const float* __restrict__ x, const float* __restrict__ weight,
                               float* __restrict__ out, int cols, float eps) {
    extern __shared__ float sdata[];
    int row = blockIdx.x;
    int tid = threadIdx.x;
    const float* xr = x + (long long)row * cols;
    float* outr = out + (long long)row * cols;

    float sum = 0.0f;
    for (int i = tid; i < cols; i += blockDim.x) {
        float v = xr[i];
        sum += v * v;
    }
    sdata[tid] = sum;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (tid < s) sdata[tid] += sdata[tid + s];
        __syncthreads();
    }
    float rms = sqrtf(sdata[0] / cols + eps);

    for (int i = tid; i < cols; i += blockDim.x) {
        outr[i] = xr[i] / rms * weight[i];
    }
}

torch::Tensor rmsnorm_cuda(torch::Tensor x, torch::Tensor weight, float eps) {
    int cols = x.size(-1);
    int rows = x.numel() / cols;
    auto out = torch::empty_like(x);
    const int threads = 512;
    rmsnorm_kernel<<<rows, threads, threads * sizeof(float)>>>(
        x.data_ptr<float>(), weight.data_ptr<float>(), out.data_ptr<float>(), cols, eps);
    return out;
}
"""

rmsnorm_cpp_source = "torch::Tensor rmsnorm_cuda(torch::Tensor x, torch::Tensor weight, float eps);"

rmsnorm = load_inline(
    name="rmsnorm_block_reduce",
    cpp_sources=rmsnorm_cpp_source,
    cuda_sources=rmsnorm_source,
    functions=["rmsnorm_cuda"],
    verbose=True,
    extra_cflags=[""],
    extra_ldflags=[""],
)


class ModelNew(nn.Module):
    def __init__(self, features: int, eps: float):
        super(ModelNew, self).__init__()
        self.weight = nn.Parameter(torch.ones(features))
        self.eps = eps
        self.rmsnorm = rmsnorm

    def forward(self, x):
        return self.rmsnorm.rmsnorm_cuda(x.contiguous(), self.weight, self.eps)
