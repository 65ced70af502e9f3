import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# Custom CUDA kernel for sum reduction over a dimension
sum_reduction_source = """
#include <torch/extension.h>
#include <cuda_runtime.h>

__global__ void sum_reduction_kernel(const float* input, float* output, int outer_size, int reduce_size, int inner_size) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    int total = outer_size * inner_size;
    if (idx < total) {
        int outer = idx / inner_size;
        int inner = idx % inner_size;
        const float* base = input + (long)outer * reduce_size * inner_size + inner;
        float sum = 0.0f;
        for (int r = 0; r < reduce_size; ++r) {
            sum += base[(long)r * inner_size];
        }
        output[idx] = sum;
    }
}

torch::Tensor sum_reduction_cuda(torch::Tensor input, int dim) {
    auto sizes = input.sizes().vec();
    int outer_size = 1;
    for (int i = 0; i < dim; ++i) outer_size *= sizes[i];
    int reduce_size = sizes[dim];
    int inner_size = 1;
    for (int i = dim + 1; i < (int)sizes.size(); ++i) inner_size *= sizes[i];

    std::vector<int64_t> out_sizes;
    for (int i = 0; i < (int)sizes.size(); ++i) {
        if (i != dim) out_sizes.push_back(sizes[i]);
    }
    auto output = torch::zeros(out_sizes, input.options());

    const int block_size = 256;
    const int num_blocks = (outer_size * inner_size + block_size - 1) / block_size;
    sum_reduction_kernel<<<num_blocks, block_size>>>(
        input.data_ptr<float>(), output.data_ptr<float>(), outer_size, reduce_size, inner_size);

    return output;
}
"""

sum_reduction_cpp_source = "torch::Tensor sum_reduction_cuda(torch::Tensor input, int dim);"

sum_reduction = load_inline(
    name="sum_reduction",
    cpp_sources=sum_reduction_cpp_source,
    cuda_sources=sum_reduction_source,
    functions=["sum_reduction_cuda"],
    verbose=True,
    extra_cflags=[""],
    extra_ldflags=[""],
)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super(ModelNew, self).__init__()
        self.dim = dim
        self.sum_reduction = sum_reduction

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.sum_reduction.sum_reduction_cuda(x.contiguous(), self.dim)
