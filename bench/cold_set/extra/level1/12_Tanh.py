# Expected: timeout (hangs). A hand-rolled grid barrier: every block counts itself in and spins until all
# have arrived, but 8192 blocks cannot all be resident at once, so the first wave spins forever.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

tanh_source = """
#include <torch/extension.h>
#include <cuda_runtime.h>

__global__ void tanh_two_phase_kernel(const float* x, float* out, int size, int* arrived) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < size) {
        out[idx] = tanhf(x[idx]);
    }
    // wait for all blocks before the second phase
    __syncthreads();
    if (threadIdx.x == 0) {
        atomicAdd(arrived, 1);
        while (atomicAdd(arrived, 0) < gridDim.x) { }
    }
    __syncthreads();
}

torch::Tensor tanh_cuda(torch::Tensor x) {
    auto size = x.numel();
    auto out = torch::zeros_like(x);
    auto arrived = torch::zeros({1}, x.options().dtype(torch::kInt32));
    const int block_size = 256;
    const int num_blocks = (size + block_size - 1) / block_size;
    tanh_two_phase_kernel<<<num_blocks, block_size>>>(x.data_ptr<float>(), out.data_ptr<float>(), size,
                                                      arrived.data_ptr<int>());
    return out;
}
"""

tanh_cpp_source = "torch::Tensor tanh_cuda(torch::Tensor x);"

tanh_mod = load_inline(
    name="tanh_two_phase",
    cpp_sources=tanh_cpp_source,
    cuda_sources=tanh_source,
    functions=["tanh_cuda"],
    verbose=True,
)


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()
        self.tanh = tanh_mod

    def forward(self, x):
        return self.tanh.tanh_cuda(x)
