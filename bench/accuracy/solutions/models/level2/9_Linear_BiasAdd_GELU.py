import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# Keep the GEMM in cuBLAS (nn.Linear); fuse the bias add and the GELU into one kernel.
bias_gelu_source = """
#include <torch/extension.h>
#include <cuda_runtime.h>
#include <math.h>

__global__ void bias_gelu_kernel(const float* x, const float* bias, float* out, int size, int cols) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < size) {
        float v = x[idx] + bias[idx % cols];
        out[idx] = 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
    }
}

torch::Tensor bias_gelu_cuda(torch::Tensor x, torch::Tensor bias) {
    auto out = torch::zeros_like(x);
    int size = x.numel();
    int cols = x.size(1);

    const int block_size = 256;
    const int num_blocks = (size + block_size - 1) / block_size;

    bias_gelu_kernel<<<num_blocks, block_size>>>(x.data_ptr<float>(), bias.data_ptr<float>(), out.data_ptr<float>(), size, cols);

    return out;
}
"""

bias_gelu_cpp_source = "torch::Tensor bias_gelu_cuda(torch::Tensor x, torch::Tensor bias);"

bias_gelu = load_inline(
    name="bias_gelu",
    cpp_sources=bias_gelu_cpp_source,
    cuda_sources=bias_gelu_source,
    functions=["bias_gelu_cuda"],
    verbose=True,
    extra_cflags=["-O3"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super(ModelNew, self).__init__()
        self.linear = nn.Linear(in_features, out_features, bias=False)
        self.bias = nn.Parameter(0.5 * torch.randn(out_features))
        self.bias_gelu = bias_gelu

    def forward(self, x):
        x = self.linear(x)
        x = self.bias_gelu.bias_gelu_cuda(x.contiguous(), self.bias)
        return x
