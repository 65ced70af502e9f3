// CPU stand-in for the CUDA features the evidence kernels use: one std::thread per CUDA thread,
// blocks run one after another, __syncthreads is a block barrier, warp shuffles exchange through
// a per-warp slot array between two warp barriers. Shared memory is `static` (one copy, blocks are
// sequential); dynamic shared memory is one buffer, filled with NaN bytes before each launch.
#pragma once
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>
#include <algorithm>
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

struct dim3 {
  unsigned x, y, z;
  dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};
struct float4 { float x, y, z, w; };

namespace emu {
struct Warp {
  std::unique_ptr<std::barrier<>> bar;
  uint64_t slot[32];
  int n;
};
inline thread_local dim3 tIdx, bIdx;
inline dim3 bDim, gDim;
inline thread_local Warp* warp = nullptr;
inline thread_local int lane = 0;
inline std::barrier<>* block_bar = nullptr;
inline std::vector<char> dyn_smem;
inline std::mutex atomic_mu;

template <class F>
void launch(dim3 g, dim3 b, size_t smem, F&& f) {
  gDim = g; bDim = b;
  dyn_smem.assign(smem + 64, (char)0xff);
  int nt = b.x * b.y * b.z;
  int nw = (nt + 31) / 32;
  for (unsigned bz = 0; bz < g.z; ++bz)
    for (unsigned by = 0; by < g.y; ++by)
      for (unsigned bx = 0; bx < g.x; ++bx) {
        std::barrier<> bb(nt);
        block_bar = &bb;
        std::vector<Warp> warps(nw);
        for (int w = 0; w < nw; ++w) {
          warps[w].n = std::min(32, nt - 32 * w);
          warps[w].bar.reset(new std::barrier<>(warps[w].n));
        }
        std::vector<std::thread> ts;
        ts.reserve(nt);
        for (int t = 0; t < nt; ++t) {
          ts.emplace_back([&, t] {
            tIdx = dim3(t % b.x, (t / b.x) % b.y, t / (b.x * b.y));
            bIdx = dim3(bx, by, bz);
            warp = &warps[t / 32];
            lane = t % 32;
            f();
            warp->bar->arrive_and_drop();
            bb.arrive_and_drop();
          });
        }
        for (auto& th : ts) th.join();
      }
}

template <class T>
T shfl(T v, int src, bool valid) {
  static_assert(sizeof(T) <= 8, "shfl of a type wider than 8 bytes");
  Warp* w = warp;
  std::memcpy(&w->slot[lane], &v, sizeof(T));
  w->bar->arrive_and_wait();
  T r = v;
  if (valid) {
    if (src >= w->n) std::memset(&r, 0xff, sizeof(T));  // an absent lane: undefined in CUDA
    else std::memcpy(&r, &w->slot[src], sizeof(T));
  }
  w->bar->arrive_and_wait();
  return r;
}
}  // namespace emu

#define threadIdx emu::tIdx
#define blockIdx emu::bIdx
#define blockDim emu::bDim
#define gridDim emu::gDim
#define __syncthreads() emu::block_bar->arrive_and_wait()
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __restrict__ __restrict
#define __shared__ static

template <class T> T __shfl_down_sync(unsigned, T v, unsigned d, int width = 32) {
  int seg = emu::lane - emu::lane % width; int src = emu::lane + (int)d;
  return emu::shfl(v, src, src < seg + width);
}
template <class T> T __shfl_up_sync(unsigned, T v, unsigned d, int width = 32) {
  int seg = emu::lane - emu::lane % width; int src = emu::lane - (int)d;
  return emu::shfl(v, src, src >= seg);
}
template <class T> T __shfl_xor_sync(unsigned, T v, int m, int width = 32) {
  int seg = emu::lane - emu::lane % width; int src = emu::lane ^ m;
  return emu::shfl(v, src, src >= seg && src < seg + width);
}
template <class T> T __shfl_sync(unsigned, T v, int s, int width = 32) {
  int seg = emu::lane - emu::lane % width;
  return emu::shfl(v, seg + s % width, true);
}
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
inline float __expf(float x) { return std::exp(x); }
inline float __logf(float x) { return std::log(x); }
inline float __fdividef(float a, float b) { return a / b; }
inline float atomicAdd(float* p, float v) { std::lock_guard<std::mutex> g(emu::atomic_mu); float o = *p; *p = o + v; return o; }
using std::max;
using std::min;
typedef c10::BFloat16 __nv_bfloat16;
typedef c10::Half __half;
inline float __bfloat162float(c10::BFloat16 v) { return static_cast<float>(v); }
inline c10::BFloat16 __float2bfloat16(float f) { return c10::BFloat16(f); }
inline float __half2float(c10::Half v) { return static_cast<float>(v); }
inline c10::Half __float2half(float f) { return c10::Half(f); }
typedef int cudaError_t;
inline cudaError_t cudaGetLastError() { return 0; }
inline cudaError_t cudaDeviceSynchronize() { return 0; }
#define cudaSuccess 0
inline const char* cudaGetErrorString(int) { return "no error"; }
#define C10_CUDA_KERNEL_LAUNCH_CHECK()
