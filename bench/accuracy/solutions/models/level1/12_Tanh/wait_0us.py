"""Tanh as a model writes it, plus an injected device-side wait (bench/timing_accuracy.py).

WAIT_US = 0 is the plain solution; the bench writes copies with 10, 50 and 2000, and
kbench's time with the wait less its time without must recover the wait.
"""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

WAIT_US = 0

tanh_source = """
#include <torch/extension.h>
#include <cuda_runtime.h>

__global__ void tanh_kernel(const float* x, float* out, int size) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < size) {
        out[idx] = tanhf(x[idx]);
    }
}

__device__ __forceinline__ unsigned long long global_ns() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

// Spins one thread for wait_ns of wall time. %globaltimer counts nanoseconds but may step
// in increments of up to ~1 us; clock64() resolves cycles, at a rate set by the SM clock.
// So times come from the timer's step edges, and between edges from the cycles elapsed at
// the rate measured between this wait's first and latest edge: exact to a few cycles,
// whatever the clock (unlike torch.cuda._sleep, which counts cycles only).
__global__ void spin_wait_kernel(long long wait_ns) {
    long long c0 = clock64();
    unsigned long long g0 = global_ns(), seen = g0;
    long long first_g = -1, first_c = 0, last_g = 0, last_c = 0;
    while (true) {
        unsigned long long g = global_ns();
        long long c = clock64();
        if (g != seen) {  // the timer stepped just now
            seen = g;
            if (first_g < 0) { first_g = (long long)(g - g0); first_c = c; }
            last_g = (long long)(g - g0);
            last_c = c;
        }
        if (first_g >= 0 && last_g > first_g) {
            double cycles_per_ns = (double)(last_c - first_c) / (double)(last_g - first_g);
            double start_ns = first_g - (first_c - c0) / cycles_per_ns;
            double now_ns = last_g + (c - last_c) / cycles_per_ns;
            if (now_ns - start_ns >= (double)wait_ns) break;
        }
    }
}

torch::Tensor tanh_cuda(torch::Tensor x, int64_t wait_ns) {
    auto out = torch::empty_like(x);
    int size = x.numel();

    const int block_size = 256;
    const int num_blocks = (size + block_size - 1) / block_size;
    tanh_kernel<<<num_blocks, block_size>>>(x.data_ptr<float>(), out.data_ptr<float>(), size);
    if (wait_ns > 0) {
        spin_wait_kernel<<<1, 1>>>(wait_ns);  // same (legacy default) stream: part of the call's device time
    }
    return out;
}
"""

tanh_cpp_source = "torch::Tensor tanh_cuda(torch::Tensor x, int64_t wait_ns);"

tanh_ext = load_inline(
    name="tanh_wait",
    cpp_sources=tanh_cpp_source,
    cuda_sources=tanh_source,
    functions=["tanh_cuda"],
    verbose=True,
)


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()
        self.tanh = tanh_ext

    def forward(self, x):
        return self.tanh.tanh_cuda(x.contiguous(), int(WAIT_US * 1000))
