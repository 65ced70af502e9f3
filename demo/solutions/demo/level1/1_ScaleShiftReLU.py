"""One pass instead of three: each element is scaled, shifted and clamped in a C++
loop, with no temporaries. The loop over a row is plain enough for the compiler to
vectorize at -O3."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

SOURCE = r"""
#include <torch/extension.h>

torch::Tensor scale_shift_relu(torch::Tensor x, torch::Tensor scale, torch::Tensor shift) {
    TORCH_CHECK(x.dim() == 2 && x.scalar_type() == torch::kFloat, "a 2-D float tensor expected");
    x = x.contiguous();
    scale = scale.contiguous();
    shift = shift.contiguous();
    auto out = torch::empty_like(x);
    const int64_t rows = x.size(0), cols = x.size(1);
    const float* in = x.data_ptr<float>();
    const float* a = scale.data_ptr<float>();
    const float* b = shift.data_ptr<float>();
    float* o = out.data_ptr<float>();
    for (int64_t r = 0; r < rows; ++r) {
        const float* row = in + r * cols;
        float* dst = o + r * cols;
        for (int64_t c = 0; c < cols; ++c) {
            const float y = row[c] * a[c] + b[c];
            dst[c] = y > 0.0f ? y : 0.0f;
        }
    }
    return out;
}
"""

ext = load_inline(name="demo_scale_shift_relu", cpp_sources=SOURCE, functions=["scale_shift_relu"],
                  extra_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self, cols: int):
        super().__init__()
        # Same names and shapes as the reference's, so kbench hands over its weights.
        self.scale = nn.Parameter(torch.randn(cols))
        self.shift = nn.Parameter(torch.randn(cols))

    def forward(self, x):
        return ext.scale_shift_relu(x, self.scale.detach(), self.shift.detach())
