import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# bf16 RMSNorm: loads bf16, accumulates and scales in fp32, rounds once to bf16 on the store.
# One block per row; warp shuffles, then one value per warp in shared memory.
rmsnorm_bf16_source = """
#include <torch/extension.h>
#include <cuda_runtime.h>
#include <cuda_bf16.h>

__global__ void rmsnorm_bf16_kernel(const __nv_bfloat16* __restrict__ x, const __nv_bfloat16* __restrict__ w,
                                    __nv_bfloat16* __restrict__ y, int N, float eps) {
    __shared__ float warp_sums[32];
    __shared__ float s_inv_rms;
    int row = blockIdx.x;
    int tid = threadIdx.x;
    int lane = tid % 32;
    int warp = tid / 32;
    int num_warps = blockDim.x / 32;
    const __nv_bfloat16* xr = x + (size_t)row * N;
    __nv_bfloat16* yr = y + (size_t)row * N;

    float ss = 0.0f;
    for (int i = tid; i < N; i += blockDim.x) {
        float v = __bfloat162float(xr[i]);
        ss += v * v;
    }
    for (int offset = 16; offset > 0; offset >>= 1) {
        ss += __shfl_xor_sync(0xffffffff, ss, offset);
    }
    if (lane == 0) warp_sums[warp] = ss;
    __syncthreads();
    if (warp == 0) {
        float t = (lane < num_warps) ? warp_sums[lane] : 0.0f;
        for (int offset = 16; offset > 0; offset >>= 1) {
            t += __shfl_xor_sync(0xffffffff, t, offset);
        }
        if (lane == 0) s_inv_rms = rsqrtf(t / N + eps);
    }
    __syncthreads();
    float inv_rms = s_inv_rms;
    for (int i = tid; i < N; i += blockDim.x) {
        float v = __bfloat162float(xr[i]) * inv_rms * __bfloat162float(w[i]);
        yr[i] = __float2bfloat16(v);
    }
}

torch::Tensor rmsnorm_bf16_cuda(torch::Tensor x, torch::Tensor w, double eps) {
    int N = x.size(-1);
    int rows = x.numel() / N;
    auto y = torch::empty_like(x);
    const int threads = 512;
    rmsnorm_bf16_kernel<<<rows, threads>>>(
        reinterpret_cast<const __nv_bfloat16*>(x.data_ptr<at::BFloat16>()),
        reinterpret_cast<const __nv_bfloat16*>(w.data_ptr<at::BFloat16>()),
        reinterpret_cast<__nv_bfloat16*>(y.data_ptr<at::BFloat16>()),
        N, (float)eps);
    return y;
}
"""

rmsnorm_bf16_cpp_source = "torch::Tensor rmsnorm_bf16_cuda(torch::Tensor x, torch::Tensor w, double eps);"

rmsnorm_bf16 = load_inline(
    name="rmsnorm_bf16",
    cpp_sources=rmsnorm_bf16_cpp_source,
    cuda_sources=rmsnorm_bf16_source,
    functions=["rmsnorm_bf16_cuda"],
    verbose=True,
    extra_cuda_cflags=["-O3", "--use_fast_math"],
)


class ModelNew(nn.Module):
    def __init__(self, features: int, eps: float):
        super(ModelNew, self).__init__()
        self.weight = nn.Parameter(torch.ones(features, dtype=torch.bfloat16))
        self.eps = eps
        self.rmsnorm = rmsnorm_bf16

    def forward(self, x):
        return self.rmsnorm.rmsnorm_bf16_cuda(x.contiguous(), self.weight.contiguous(), self.eps)
