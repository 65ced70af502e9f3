# Expected: crashed or runtime_error (illegal memory access). The kernel indexes the output by row with the
# row length as the stride of a flat index, so it writes far past the end of the buffer.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

relu_source = """
#include <torch/extension.h>
#include <cuda_runtime.h>

__global__ void relu_rows_kernel(const float* x, float* out, int rows, int cols) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < rows * cols) {
        int row = idx / cols;
        int col = idx % cols;
        float v = x[row * cols + col];
        out[idx * cols + col] = v > 0.0f ? v : 0.0f;
    }
}

torch::Tensor relu_cuda(torch::Tensor x) {
    int rows = x.size(0);
    int cols = x.size(1);
    auto out = torch::empty_like(x);
    const int block_size = 256;
    const int num_blocks = (rows * cols + block_size - 1) / block_size;
    relu_rows_kernel<<<num_blocks, block_size>>>(x.data_ptr<float>(), out.data_ptr<float>(), rows, cols);
    return out;
}
"""

relu_cpp_source = "torch::Tensor relu_cuda(torch::Tensor x);"

relu = load_inline(
    name="relu_rows",
    cpp_sources=relu_cpp_source,
    cuda_sources=relu_source,
    functions=["relu_cuda"],
    verbose=True,
)


class ModelNew(nn.Module):
    def __init__(self):
        super(ModelNew, self).__init__()
        self.relu = relu

    def forward(self, x):
        return self.relu.relu_cuda(x)
