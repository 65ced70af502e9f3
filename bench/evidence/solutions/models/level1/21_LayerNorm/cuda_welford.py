import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# LayerNorm in one kernel: one block per row, Welford statistics per thread, merged across the
# warp with shuffles and across warps in shared memory (Chan's formula), then normalize.
layernorm_source = """
#include <torch/extension.h>
#include <cuda_runtime.h>

__device__ __forceinline__ void welford_combine(float& mean, float& m2, float& count,
                                                float mean_b, float m2_b, float count_b) {
    float n = count + count_b;
    if (n == 0.0f) return;
    float delta = mean_b - mean;
    float frac = count_b / n;
    mean += delta * frac;
    m2 += m2_b + delta * delta * count * frac;
    count = n;
}

__global__ void layernorm_kernel(const float* __restrict__ x, const float* __restrict__ gamma,
                                 const float* __restrict__ beta, float* __restrict__ y, int N, float eps) {
    __shared__ float s_mean[32];
    __shared__ float s_m2[32];
    __shared__ float s_count[32];
    __shared__ float s_stats[2];

    int row = blockIdx.x;
    int tid = threadIdx.x;
    int lane = tid & 31;
    int warp = tid >> 5;
    const float* xr = x + (int64_t)row * N;
    float* yr = y + (int64_t)row * N;

    float mean = 0.0f, m2 = 0.0f, count = 0.0f;
    for (int i = tid; i < N; i += blockDim.x) {
        float v = xr[i];
        count += 1.0f;
        float delta = v - mean;
        mean += delta / count;
        m2 += delta * (v - mean);
    }
    for (int offset = 16; offset > 0; offset >>= 1) {
        float mean_b = __shfl_down_sync(0xffffffff, mean, offset);
        float m2_b = __shfl_down_sync(0xffffffff, m2, offset);
        float count_b = __shfl_down_sync(0xffffffff, count, offset);
        welford_combine(mean, m2, count, mean_b, m2_b, count_b);
    }
    if (lane == 0) {
        s_mean[warp] = mean;
        s_m2[warp] = m2;
        s_count[warp] = count;
    }
    __syncthreads();
    if (tid == 0) {
        float t_mean = 0.0f, t_m2 = 0.0f, t_count = 0.0f;
        int num_warps = blockDim.x / 32;
        for (int w = 0; w < num_warps; ++w) {
            welford_combine(t_mean, t_m2, t_count, s_mean[w], s_m2[w], s_count[w]);
        }
        s_stats[0] = t_mean;
        s_stats[1] = rsqrtf(t_m2 / t_count + eps);
    }
    __syncthreads();
    float mu = s_stats[0];
    float rstd = s_stats[1];
    for (int i = tid; i < N; i += blockDim.x) {
        yr[i] = (xr[i] - mu) * rstd * gamma[i] + beta[i];
    }
}

torch::Tensor layernorm_cuda(torch::Tensor x, torch::Tensor gamma, torch::Tensor beta, double eps) {
    int N = x.size(-1);
    int rows = x.numel() / N;
    auto y = torch::empty_like(x);
    const int threads = 256;
    layernorm_kernel<<<rows, threads>>>(x.data_ptr<float>(), gamma.data_ptr<float>(), beta.data_ptr<float>(),
                                        y.data_ptr<float>(), N, (float)eps);
    return y;
}
"""

layernorm_cpp_source = "torch::Tensor layernorm_cuda(torch::Tensor x, torch::Tensor gamma, torch::Tensor beta, double eps);"

layernorm = load_inline(
    name="layernorm_welford",
    cpp_sources=layernorm_cpp_source,
    cuda_sources=layernorm_source,
    functions=["layernorm_cuda"],
    verbose=True,
    extra_cflags=["-O3"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self, features: int):
        super(ModelNew, self).__init__()
        self.ln = nn.LayerNorm(features)
        self.layernorm = layernorm

    def forward(self, x):
        return self.layernorm.layernorm_cuda(x.contiguous(), self.ln.weight, self.ln.bias, self.ln.eps)
