"""Each row in two passes of a C++ loop: its sum of squares, then the scaled copy. No
temporaries. The sum runs in 8 independent float lanes, which the compiler turns into
one vector register (a single running sum would wait on each add), and the lanes are
added in double at the end."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

SOURCE = r"""
#include <torch/extension.h>
#include <algorithm>
#include <cmath>

torch::Tensor row_normalize(torch::Tensor x) {
    TORCH_CHECK(x.dim() == 2 && x.scalar_type() == torch::kFloat, "a 2-D float tensor expected");
    x = x.contiguous();
    auto out = torch::empty_like(x);
    const int64_t rows = x.size(0), cols = x.size(1);
    const float* in = x.data_ptr<float>();
    float* o = out.data_ptr<float>();
    for (int64_t r = 0; r < rows; ++r) {
        const float* row = in + r * cols;
        float lanes[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
        int64_t c = 0;
        for (; c + 8 <= cols; c += 8)
            for (int k = 0; k < 8; ++k) lanes[k] += row[c + k] * row[c + k];
        double sum = 0.0;
        for (int k = 0; k < 8; ++k) sum += lanes[k];
        for (; c < cols; ++c) sum += double(row[c]) * double(row[c]);
        const float inv = float(1.0 / std::max(std::sqrt(sum), 1e-12));
        float* dst = o + r * cols;
        for (int64_t c = 0; c < cols; ++c) dst[c] = row[c] * inv;
    }
    return out;
}
"""

ext = load_inline(name="demo_row_normalize", cpp_sources=SOURCE, functions=["row_normalize"], extra_cflags=["-O3"])


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.row_normalize(x)
