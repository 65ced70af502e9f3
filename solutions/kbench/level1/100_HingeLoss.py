"""Mean hinge loss, 32768 x 32768 fp32 predictions, targets broadcast per column.

mean(clamp(1 - pred * targets[col], min=0)) in one kernel launch.

Why it is fast:
- Passes over memory: predictions read once (4 GiB), nothing written but
  the scalar; the 128 KiB target vector is read once per thread into
  registers.
- Layout: a 2-D grid.  blockIdx.x picks 1024 columns (256 threads x one
  float4), blockIdx.y a band of rows; each thread walks down its band with a
  fixed column, so its 4 targets stay in registers and every load is a
  16-byte non-allocating vector load (ld.global.nc.L1::no_allocate.v4), a
  warp reading 512 contiguous bytes.  U = 8 rows are loaded before the first
  use: 128 bytes in flight per thread.
- Occupancy: grid sized from the occupancy calculator to exactly two full
  waves (columns x row bands), 256 threads per block.
- Reduction: per-thread float sum of 32 terms added into a double, double
  block sum, per-block partials, last block (atomic ticket) sums them in a
  fixed order in double: deterministic and accurate for 2^30 terms.
"""
import torch
from torch.utils.cpp_extension import load_inline

_CPP = "torch::Tensor kb_hinge_forward(torch::Tensor pred, torch::Tensor targets, int64_t variant);"

_CUDA = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <math.h>
#include <algorithm>

__device__ unsigned int kb_hinge_ticket = 0;

static __device__ __forceinline__ float4 kb_ld_stream(const float4* p) {
  float4 v;
  asm("ld.global.nc.L1::no_allocate.v4.f32 {%0, %1, %2, %3}, [%4];"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "l"(p));
  return v;
}
// clamp(1 - p*t, min=0); NaN propagates like torch.clamp.
static __device__ __forceinline__ float kb_h1(float p, float t) {
  const float z = fmaf(-p, t, 1.f);
  return z < 0.f ? 0.f : z;
}
static __device__ __forceinline__ float kb_h4(float4 p, float4 t) {
  return (kb_h1(p.x, t.x) + kb_h1(p.y, t.y)) + (kb_h1(p.z, t.z) + kb_h1(p.w, t.w));
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
static __device__ void kb_finalize(double a, unsigned int bid, unsigned int nb, double* partials, float* out, double scale) {
  __shared__ double sh[32];
  __shared__ unsigned int s_last;
  a = kb_block_sum(a, sh);
  if (threadIdx.x == 0) {
    partials[bid] = a;
    __threadfence();
    const unsigned int prev = atomicAdd(&kb_hinge_ticket, 1u);
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
      kb_hinge_ticket = 0u;
    }
  }
}

template <int U>
__global__ void __launch_bounds__(256)
kb_hinge_2d(const float* __restrict__ pred, const float* __restrict__ tgt, int rows, int D4, int rows_per_band,
            double scale, double* __restrict__ partials, float* __restrict__ out) {
  const int col4 = blockIdx.x * blockDim.x + threadIdx.x;
  const int r0 = blockIdx.y * rows_per_band;
  const int r1 = min(rows, r0 + rows_per_band);
  double acc = 0.0;
  if (col4 < D4) {
    const float4 tt = __ldg(reinterpret_cast<const float4*>(tgt) + col4);
    const float4* p = reinterpret_cast<const float4*>(pred) + (size_t)r0 * D4 + col4;
    int r = r0;
    for (; r + U <= r1; r += U) {
      float4 v[U];
#pragma unroll
      for (int u = 0; u < U; ++u) v[u] = kb_ld_stream(p + (size_t)u * D4);
      float s = 0.f;
#pragma unroll
      for (int u = 0; u < U; ++u) s += kb_h4(v[u], tt);
      acc += (double)s;
      p += (size_t)U * D4;
    }
    for (; r < r1; ++r) {
      acc += (double)kb_h4(kb_ld_stream(p), tt);
      p += D4;
    }
  }
  kb_finalize(acc, blockIdx.y * gridDim.x + blockIdx.x, gridDim.x * gridDim.y, partials, out, scale);
}

// Any shape/alignment: flat grid-stride, column = index % D.
__global__ void __launch_bounds__(256)
kb_hinge_flat(const float* __restrict__ pred, const float* __restrict__ tgt, long long n, long long D,
              double scale, double* __restrict__ partials, float* __restrict__ out) {
  const long long stride = (long long)gridDim.x * blockDim.x;
  double acc = 0.0;
  for (long long j = (long long)blockIdx.x * blockDim.x + threadIdx.x; j < n; j += stride)
    acc += (double)kb_h1(pred[j], __ldg(tgt + (j % D)));
  kb_finalize(acc, blockIdx.x, gridDim.x, partials, out, scale);
}

template <int U>
static void kb_hinge_launch2d(const float* p, const float* t, int rows, int D4, double scale, float* out,
                              const torch::Tensor& like, cudaStream_t stream, int waves) {
  static int s_slots = 0;
  if (s_slots == 0) {
    int dev = 0, nsm = 0, bps = 0;
    cudaGetDevice(&dev);
    cudaDeviceGetAttribute(&nsm, cudaDevAttrMultiProcessorCount, dev);
    cudaOccupancyMaxActiveBlocksPerMultiprocessor(&bps, kb_hinge_2d<U>, 256, 0);
    s_slots = std::max(1, nsm * std::max(1, bps));
  }
  const int gx = (D4 + 255) / 256;
  int bands = std::max(1, (s_slots * waves) / gx);
  bands = std::min(bands, rows);
  const int rpb = (rows + bands - 1) / bands;
  bands = (rows + rpb - 1) / rpb;
  auto partials = torch::empty({(long long)gx * bands}, like.options().dtype(torch::kFloat64));
  kb_hinge_2d<U><<<dim3(gx, bands, 1), 256, 0, stream>>>(p, t, rows, D4, rpb, scale, partials.data_ptr<double>(), out);
  const cudaError_t e = cudaGetLastError();
  TORCH_CHECK(e == cudaSuccess, "kb_hinge kernel error: ", cudaGetErrorString(e));
}

torch::Tensor kb_hinge_forward(torch::Tensor pred, torch::Tensor targets, int64_t variant) {
  TORCH_CHECK(pred.is_cuda() && targets.is_cuda(), "inputs must be CUDA tensors");
  TORCH_CHECK(pred.scalar_type() == torch::kFloat32 && targets.scalar_type() == torch::kFloat32, "inputs must be float32");
  TORCH_CHECK(pred.dim() >= 1, "predictions need a last dimension");
  TORCH_CHECK(pred.is_contiguous() && targets.is_contiguous(), "inputs must be contiguous");
  const long long D = pred.size(-1);
  TORCH_CHECK(targets.numel() == D && (targets.dim() == 1 || targets.dim() == 0 || targets.size(-1) == D),
              "targets must broadcast along the last dimension of predictions");
  const c10::cuda::CUDAGuard guard(pred.device());
  auto out = torch::empty({}, pred.options());
  const long long n = pred.numel();
  const double scale = 1.0 / (double)n;
  cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  const float* pp = pred.data_ptr<float>();
  const float* tp = targets.data_ptr<float>();
  float* op = out.data_ptr<float>();
  const long long rows = (D > 0) ? n / D : 0;
  const bool fast = n > 0 && D % 4 == 0 && rows < (1LL << 31) && D / 4 < (1LL << 31) &&
                    ((reinterpret_cast<uintptr_t>(pp) & 15) == 0) && ((reinterpret_cast<uintptr_t>(tp) & 15) == 0);
  if (fast && variant != 3) {
    if (variant == 1) kb_hinge_launch2d<4>(pp, tp, (int)rows, (int)(D / 4), scale, op, pred, stream, 2);
    else if (variant == 2) kb_hinge_launch2d<8>(pp, tp, (int)rows, (int)(D / 4), scale, op, pred, stream, 1);
    else kb_hinge_launch2d<8>(pp, tp, (int)rows, (int)(D / 4), scale, op, pred, stream, 2);
  } else {
    int dev = 0, nsm = 0;
    cudaGetDevice(&dev);
    cudaDeviceGetAttribute(&nsm, cudaDevAttrMultiProcessorCount, dev);
    const int grid = (int)std::max(1LL, std::min<long long>((long long)nsm * 8, (n + 255) / 256));
    auto partials = torch::empty({(long long)grid}, pred.options().dtype(torch::kFloat64));
    kb_hinge_flat<<<grid, 256, 0, stream>>>(pp, tp, n, std::max(1LL, D), scale, partials.data_ptr<double>(), op);
    const cudaError_t e = cudaGetLastError();
    TORCH_CHECK(e == cudaSuccess, "kb_hinge kernel error: ", cudaGetErrorString(e));
  }
  return out;
}
"""

_ext = load_inline(
    name="kb_l1_100_hinge_v1",
    cpp_sources=_CPP,
    cuda_sources=_CUDA,
    functions=["kb_hinge_forward"],
    extra_cuda_cflags=["-O3"],
    verbose=False,
)

DEV_VARIANTS = {"u8w2": 0, "u4w2": 1, "u8w1": 2, "flat": 3}


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.variant = 0

    def forward(self, predictions: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return _ext.kb_hinge_forward(predictions, targets, self.variant)
