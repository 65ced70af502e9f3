import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# silu(a) * b, four floats per thread through float4 loads when the pointers allow it,
# a scalar kernel for the tail (and for unaligned pointers)
silu_mul_source = """
#include <torch/extension.h>
#include <cuda_runtime.h>
#include <cstdint>

__device__ __forceinline__ float silu_mul(float a, float b) {
    return a / (1.0f + expf(-a)) * b;
}

__global__ void silu_mul_vec4_kernel(const float4* __restrict__ a, const float4* __restrict__ b,
                                     float4* __restrict__ out, int64_t n4) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n4) {
        float4 va = a[i];
        float4 vb = b[i];
        float4 r;
        r.x = silu_mul(va.x, vb.x);
        r.y = silu_mul(va.y, vb.y);
        r.z = silu_mul(va.z, vb.z);
        r.w = silu_mul(va.w, vb.w);
        out[i] = r;
    }
}

__global__ void silu_mul_scalar_kernel(const float* __restrict__ a, const float* __restrict__ b,
                                       float* __restrict__ out, int64_t start, int64_t n) {
    int64_t i = start + (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        out[i] = silu_mul(a[i], b[i]);
    }
}

torch::Tensor silu_mul_cuda(torch::Tensor a, torch::Tensor b) {
    auto out = torch::empty_like(a);
    int64_t n = a.numel();
    const float* pa = a.data_ptr<float>();
    const float* pb = b.data_ptr<float>();
    float* po = out.data_ptr<float>();
    const int threads = 256;
    bool aligned = (reinterpret_cast<uintptr_t>(pa) % 16 == 0) && (reinterpret_cast<uintptr_t>(pb) % 16 == 0) &&
                   (reinterpret_cast<uintptr_t>(po) % 16 == 0);
    int64_t n4 = aligned ? n / 4 : 0;
    if (n4 > 0) {
        int blocks = (int)((n4 + threads - 1) / threads);
        silu_mul_vec4_kernel<<<blocks, threads>>>(reinterpret_cast<const float4*>(pa),
                                                  reinterpret_cast<const float4*>(pb),
                                                  reinterpret_cast<float4*>(po), n4);
    }
    int64_t done = n4 * 4;
    if (done < n) {
        int blocks = (int)((n - done + threads - 1) / threads);
        silu_mul_scalar_kernel<<<blocks, threads>>>(pa, pb, po, done, n);
    }
    return out;
}
"""

silu_mul_cpp_source = "torch::Tensor silu_mul_cuda(torch::Tensor a, torch::Tensor b);"

silu_mul = load_inline(
    name="silu_mul_vec4",
    cpp_sources=silu_mul_cpp_source,
    cuda_sources=silu_mul_source,
    functions=["silu_mul_cuda"],
    verbose=True,
    extra_cflags=["-O3"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()
        self.silu_mul = silu_mul

    def forward(self, a, b):
        return self.silu_mul.silu_mul_cuda(a.contiguous(), b.contiguous())
