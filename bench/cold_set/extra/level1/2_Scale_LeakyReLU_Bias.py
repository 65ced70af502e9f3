# Expected: incorrect. The bias is added before the LeakyReLU instead of after it.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

fused_source = """
#include <torch/extension.h>
#include <cuda_runtime.h>

__global__ void scale_leaky_bias_kernel(const float* x, const float* scale, const float* bias, float* out,
                                        int size, int features, float slope) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < size) {
        int f = idx % features;
        float v = x[idx] * scale[f] + bias[f];
        out[idx] = v > 0.0f ? v : v * slope;
    }
}

torch::Tensor scale_leaky_bias_cuda(torch::Tensor x, torch::Tensor scale, torch::Tensor bias, double slope) {
    auto size = x.numel();
    auto out = torch::zeros_like(x);
    const int block_size = 256;
    const int num_blocks = (size + block_size - 1) / block_size;
    scale_leaky_bias_kernel<<<num_blocks, block_size>>>(x.data_ptr<float>(), scale.data_ptr<float>(),
        bias.data_ptr<float>(), out.data_ptr<float>(), size, x.size(1), (float)slope);
    return out;
}
"""

fused_cpp_source = "torch::Tensor scale_leaky_bias_cuda(torch::Tensor x, torch::Tensor scale, torch::Tensor bias, double slope);"

fused = load_inline(
    name="scale_leaky_bias_early",
    cpp_sources=fused_cpp_source,
    cuda_sources=fused_source,
    functions=["scale_leaky_bias_cuda"],
    verbose=True,
)


class ModelNew(nn.Module):
    def __init__(self, features: int, negative_slope: float):
        super(ModelNew, self).__init__()
        self.scale = nn.Parameter(torch.rand(features) + 0.5)
        self.bias = nn.Parameter(0.1 * torch.randn(features))
        self.negative_slope = negative_slope

    def forward(self, x):
        return fused.scale_leaky_bias_cuda(x, self.scale, self.bias, self.negative_slope)
