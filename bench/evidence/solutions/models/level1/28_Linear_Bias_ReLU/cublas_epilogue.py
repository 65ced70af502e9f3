import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# The GEMM goes to cuBLAS (torch::matmul inside the extension); bias add and ReLU are fused
# into one custom epilogue kernel that works in place on the GEMM's output.
linear_relu_source = """
#include <torch/extension.h>
#include <cuda_runtime.h>

__global__ void bias_relu_kernel(float* __restrict__ out, const float* __restrict__ bias, int total, int cols) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < total) {
        float v = out[idx] + bias[idx % cols];
        out[idx] = v > 0.0f ? v : 0.0f;
    }
}

torch::Tensor linear_bias_relu_cuda(torch::Tensor x, torch::Tensor weight, torch::Tensor bias) {
    auto out = torch::matmul(x, weight.t());
    int rows = out.size(0);
    int cols = out.size(1);
    int total = rows * cols;
    const int block_size = 256;
    const int num_blocks = (total + block_size - 1) / block_size;
    bias_relu_kernel<<<num_blocks, block_size>>>(out.data_ptr<float>(), bias.data_ptr<float>(), total, cols);
    return out;
}
"""

linear_relu_cpp_source = "torch::Tensor linear_bias_relu_cuda(torch::Tensor x, torch::Tensor weight, torch::Tensor bias);"

linear_relu = load_inline(
    name="linear_bias_relu_cublas",
    cpp_sources=linear_relu_cpp_source,
    cuda_sources=linear_relu_source,
    functions=["linear_bias_relu_cuda"],
    verbose=True,
    extra_cflags=[""],
    extra_ldflags=[""],
)


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super(ModelNew, self).__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.linear_relu = linear_relu

    def forward(self, x):
        return self.linear_relu.linear_bias_relu_cuda(x.contiguous(), self.linear.weight, self.linear.bias)
