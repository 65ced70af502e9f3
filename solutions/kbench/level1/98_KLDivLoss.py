"""KL divergence, batchmean, 2 x (16384 x 16384) fp32, fused in one kernel.

kl_div(log(p), t, 'batchmean') = sum t * (log t - log p) / rows, with t == 0
contributing 0 (PyTorch: xlogy(t, t) - t * log p).  Computed as t*log(t/p):
one division (approximate, <= 2 ulp) and one accurate logf per element:
taking the log of the ratio, not the difference of two logs of ~-9.7, keeps
the near-uniform default inputs (terms that nearly cancel) accurate to ~1e-7.

Why it is fast:
- Passes over memory: each input read once, nothing written but the scalar;
  log, product and reduction fused (eager runs log, kl_div and sum as
  separate passes).
- Access width: 16-byte non-allocating loads (ld.global.nc.L1::no_allocate
  .v4), U = 4 float4 of each input issued before the first use, so 128 bytes
  per thread are in flight; grid-stride over float4 so a warp reads 512
  contiguous bytes per instruction.
- Occupancy: a persistent grid sized from the occupancy calculator
  (blocks per SM x SMs), 256 threads per block.
- Reduction: per-thread float sum of 16 terms added into a double, double
  block sum, per-block partials, last block (atomic ticket) sums them in a
  fixed order in double: deterministic and accurate.
"""
import torch
from torch.utils.cpp_extension import load_inline

_CPP = "torch::Tensor kb_kl_forward(torch::Tensor p, torch::Tensor t, int64_t variant);"

_CUDA = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <math.h>
#include <algorithm>

__device__ unsigned int kb_kl_ticket = 0;

static __device__ __forceinline__ float4 kb_ld_stream(const float4* p) {
  float4 v;
  asm("ld.global.nc.L1::no_allocate.v4.f32 {%0, %1, %2, %3}, [%4];"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "l"(p));
  return v;
}

// Exact PyTorch semantics, any input (slow path).
static __device__ __noinline__ float kb_kl_slow1(float p, float t) {
  if (t > 0.f) return t * logf(t / p);
  if (t == 0.f) return -(t * logf(p));  // 0, or NaN where log p is -inf/NaN
  return NAN;                           // xlogy(t, t) with t < 0 or NaN
}
// Fast path (all t > 0): ratio by the approximate divide (<= 2 ulp, unbiased),
// accurate logf of a value near 1.
static __device__ __forceinline__ float kb_kl_fast1(float p, float t) {
  return t * logf(__fdividef(t, p));
}
static __device__ __forceinline__ float kb_kl_fast4(float4 p, float4 t) {
  return (kb_kl_fast1(p.x, t.x) + kb_kl_fast1(p.y, t.y)) + (kb_kl_fast1(p.z, t.z) + kb_kl_fast1(p.w, t.w));
}
static __device__ __forceinline__ float kb_kl_slow4(float4 p, float4 t) {
  return (kb_kl_slow1(p.x, t.x) + kb_kl_slow1(p.y, t.y)) + (kb_kl_slow1(p.z, t.z) + kb_kl_slow1(p.w, t.w));
}
static __device__ __forceinline__ bool kb_pos4(float4 t) {
  return (t.x > 0.f) & (t.y > 0.f) & (t.z > 0.f) & (t.w > 0.f);
}

static __device__ __forceinline__ double kb_block_sum(double a, double* sh) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) a += __shfl_xor_sync(0xffffffffu, a, o);
  __syncthreads();
  if (lane == 0) sh[warp] = a;
  __syncthreads();
  if (warp == 0) {
    a = lane < nw ? sh[lane] : 0.0;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) a += __shfl_xor_sync(0xffffffffu, a, o);
  }
  return a;
}

// Per-block partials then last-block-done: out = total * scale.
static __device__ void kb_finalize(double a, double* partials, float* out, double scale) {
  __shared__ double sh[32];
  __shared__ unsigned int s_last;
  a = kb_block_sum(a, sh);
  const unsigned int nb = gridDim.x;
  if (threadIdx.x == 0) {
    partials[blockIdx.x] = a;
    __threadfence();
    const unsigned int prev = atomicAdd(&kb_kl_ticket, 1u);
    s_last = (prev == nb - 1) ? 1u : 0u;
  }
  __syncthreads();
  if (s_last) {
    __threadfence();
    double s = 0.0;
    for (unsigned int i = threadIdx.x; i < nb; i += blockDim.x) s += __ldcg(partials + i);
    s = kb_block_sum(s, sh);
    if (threadIdx.x == 0) {
      out[0] = (float)(s * scale);
      kb_kl_ticket = 0u;
    }
  }
}

template <int U>
__global__ void __launch_bounds__(256)
kb_kl_kernel(const float* __restrict__ p, const float* __restrict__ t, long long n, long long n4,
             double scale, double* __restrict__ partials, float* __restrict__ out) {
  const float4* p4 = reinterpret_cast<const float4*>(p);
  const float4* t4 = reinterpret_cast<const float4*>(t);
  const long long stride = (long long)gridDim.x * blockDim.x;
  const long long gtid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  double acc = 0.0;
  long long i = gtid;
  for (; i + (long long)(U - 1) * stride < n4; i += (long long)U * stride) {
    float4 a[U], b[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      a[u] = kb_ld_stream(p4 + i + u * stride);
      b[u] = kb_ld_stream(t4 + i + u * stride);
    }
    bool ok = true;
#pragma unroll
    for (int u = 0; u < U; ++u) ok = ok & kb_pos4(b[u]);
    float s = 0.f;
    if (ok) {
#pragma unroll
      for (int u = 0; u < U; ++u) s += kb_kl_fast4(a[u], b[u]);
    } else {
#pragma unroll
      for (int u = 0; u < U; ++u) s += kb_kl_slow4(a[u], b[u]);
    }
    acc += (double)s;
  }
  for (; i < n4; i += stride) acc += (double)kb_kl_slow4(kb_ld_stream(p4 + i), kb_ld_stream(t4 + i));
  for (long long j = n4 * 4 + gtid; j < n; j += stride) acc += (double)kb_kl_slow1(p[j], t[j]);
  kb_finalize(acc, partials, out, scale);
}

template <int U>
static void kb_kl_launch(const float* p, const float* t, long long n, long long n4, double scale,
                         float* out, const torch::Tensor& like, cudaStream_t stream) {
  static int s_slots = 0;
  if (s_slots == 0) {
    int dev = 0, nsm = 0, bps = 0;
    cudaGetDevice(&dev);
    cudaDeviceGetAttribute(&nsm, cudaDevAttrMultiProcessorCount, dev);
    cudaOccupancyMaxActiveBlocksPerMultiprocessor(&bps, kb_kl_kernel<U>, 256, 0);
    s_slots = std::max(1, nsm * std::max(1, bps));
  }
  const long long need = std::max(1LL, (n4 + 255) / 256);
  const int grid = (int)std::min<long long>(s_slots, need);
  auto partials = torch::empty({(long long)grid}, like.options().dtype(torch::kFloat64));
  kb_kl_kernel<U><<<grid, 256, 0, stream>>>(p, t, n, n4, scale, partials.data_ptr<double>(), out);
  const cudaError_t e = cudaGetLastError();
  TORCH_CHECK(e == cudaSuccess, "kb_kl kernel error: ", cudaGetErrorString(e));
}

torch::Tensor kb_kl_forward(torch::Tensor p, torch::Tensor t, int64_t variant) {
  TORCH_CHECK(p.is_cuda() && t.is_cuda(), "inputs must be CUDA tensors");
  TORCH_CHECK(p.scalar_type() == torch::kFloat32 && t.scalar_type() == torch::kFloat32, "inputs must be float32");
  TORCH_CHECK(p.sizes() == t.sizes(), "predictions and targets must have the same shape");
  TORCH_CHECK(p.is_contiguous() && t.is_contiguous(), "inputs must be contiguous");
  TORCH_CHECK(p.dim() >= 1, "batchmean needs at least one dimension");
  const c10::cuda::CUDAGuard guard(p.device());
  auto out = torch::empty({}, p.options());
  const long long n = p.numel();
  const double scale = 1.0 / (double)p.size(0);
  const bool vec_ok = ((reinterpret_cast<uintptr_t>(p.data_ptr<float>()) & 15) == 0) &&
                      ((reinterpret_cast<uintptr_t>(t.data_ptr<float>()) & 15) == 0);
  const long long n4 = vec_ok ? n / 4 : 0;
  cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  const float* pp = p.data_ptr<float>();
  const float* tp = t.data_ptr<float>();
  float* op = out.data_ptr<float>();
  if (variant == 1) kb_kl_launch<2>(pp, tp, n, n4, scale, op, p, stream);
  else if (variant == 2) kb_kl_launch<8>(pp, tp, n, n4, scale, op, p, stream);
  else kb_kl_launch<4>(pp, tp, n, n4, scale, op, p, stream);
  return out;
}
"""

_ext = load_inline(
    name="kb_l1_98_kl_div_v1",
    cpp_sources=_CPP,
    cuda_sources=_CUDA,
    functions=["kb_kl_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)

DEV_VARIANTS = {"u4": 0, "u2": 1, "u8": 2}


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.variant = 0

    def forward(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return _ext.kb_kl_forward(predictions, targets, self.variant)
