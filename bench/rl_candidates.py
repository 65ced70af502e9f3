"""Model-style candidates for bench/rl_throughput.py, made from a few templates the way
a policy's samples come: mostly distinct kernels (each its own launch size and a
line of its own, so each is a distinct build), about half of them failing the way
generations fail.

A template is a correct solution with one `@@THREADS@@` and one `@@SAMPLE@@` slot
(a constant in the compiled code, not a comment: ccache compares sources after the
preprocessor, which drops comments), and its own `wrong` edit (an indexing or formula bug that still compiles). Every
candidate takes one outcome:

    ok            the template as is
    compile_error an undeclared name in the kernel (build_error)
    wrong         the template's own bug (incorrect)
    raise         raises at import after its build (load_error)
    exit          exits at import after its build (crashed)
    illegal       writes far out of bounds (crashed or runtime_error)
    hang          a kernel that never ends (timeout); 1 in 100

On CUDA the templates are load_inline kernels over the shipped problems; on the
CPU (a smoke test's scale) pure-PyTorch solutions and C functions built with
torch's `load` (no torch headers, so they build in a second) over the CPU
fixture problems.
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUTCOMES = (("ok", 50), ("compile_error", 14), ("wrong", 20), ("raise", 5), ("exit", 5), ("illegal", 5), ("hang", 1))
EXPECTED = {"ok": ("ok",), "compile_error": ("build_error",), "wrong": ("incorrect",), "raise": ("load_error",),
            "exit": ("crashed",), "illegal": ("crashed", "runtime_error"), "hang": ("timeout",)}


@dataclass(frozen=True)
class Template:
    name: str
    problem: str  # a path under the repository
    source: str
    wrong: tuple[str, str]  # (text, its buggy replacement)
    undeclared: tuple[str, str]  # (text, the same with an undeclared name)
    illegal: tuple[str, str]
    hang: tuple[str, str]


@dataclass(frozen=True)
class Candidate:
    index: int
    template: str
    outcome: str
    problem_path: str
    source: str
    expected: tuple[str, ...]  # the statuses it may get


_ELEMENTWISE = r'''import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = """
#include <torch/extension.h>
#include <cuda_runtime.h>

static const int sample_id = @@SAMPLE@@;  // this sample's own line
__global__ void @@NAME@@_kernel(const float* x, float* out, float arg, long n) {
    long idx = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < n) {
        float v = x[idx];
        out[idx] = @@EXPR@@;
    }
}

torch::Tensor @@NAME@@_cuda(torch::Tensor x, double arg) {
    auto out = torch::zeros_like(x);
    long n = x.numel();
    const int threads = @@THREADS@@;
    const long blocks = (n + threads - 1) / threads;
    @@NAME@@_kernel<<<blocks, threads>>>(x.data_ptr<float>(), out.data_ptr<float>(), (float)arg, n);
    return out;
}
"""

cpp_source = "torch::Tensor @@NAME@@_cuda(torch::Tensor x, double arg);"

ext = load_inline(name="@@NAME@@_ext", cpp_sources=cpp_source, cuda_sources=cuda_source,
                  functions=["@@NAME@@_cuda"], verbose=True, extra_cuda_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self, *args):
        super().__init__()
        self.arg = float(args[0]) if args else 0.0

    def forward(self, x):
        return ext.@@NAME@@_cuda(x.contiguous(), self.arg)
'''

_LOSS = r'''import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = """
#include <torch/extension.h>
#include <cuda_runtime.h>

static const int sample_id = @@SAMPLE@@;  // this sample's own line
__global__ void @@NAME@@_kernel(const float* p, const float* t, double* sum, long n, long m) {
    __shared__ float partial[1024];
    int tid = threadIdx.x;
    float local = 0.0f;
    for (long i = (long)blockIdx.x * blockDim.x + tid; i < n; i += (long)gridDim.x * blockDim.x) {
        float a = p[i], b = t[i % m];  // targets may be one row, broadcast
        local += @@EXPR@@;
    }
    partial[tid] = local;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (tid < s) partial[tid] += partial[tid + s];
        __syncthreads();
    }
    if (tid == 0) atomicAdd(sum, (double)partial[0]);
}

torch::Tensor @@NAME@@_cuda(torch::Tensor p, torch::Tensor t) {
    long n = p.numel();
    auto sum = torch::zeros({1}, p.options().dtype(torch::kFloat64));
    const int threads = @@THREADS@@;
    @@NAME@@_kernel<<<132 * 8, threads>>>(p.data_ptr<float>(), t.data_ptr<float>(), sum.data_ptr<double>(), n,
                                          t.numel());
    return (sum / (double)n).to(torch::kFloat32).squeeze();
}
"""

cpp_source = "torch::Tensor @@NAME@@_cuda(torch::Tensor p, torch::Tensor t);"

ext = load_inline(name="@@NAME@@_ext", cpp_sources=cpp_source, cuda_sources=cuda_source,
                  functions=["@@NAME@@_cuda"], verbose=True)


class ModelNew(nn.Module):
    def __init__(self, *args):
        super().__init__()

    def forward(self, predictions, targets):
        return ext.@@NAME@@_cuda(predictions.contiguous(), targets.contiguous())
'''

# A kernel that never ends: a loop on a volatile read (one without side effects the
# compiler may delete) of an input that is never NaN.
_SPIN = "    while (((volatile const float*){x})[0] == ((volatile const float*){x})[0]) {{}}\n"

_SOFTMAX = (ROOT / "bench" / "accuracy" / "solutions" / "models" / "level1" / "4_Softmax.py").read_text().replace(
    "const int threads = 256;", "const int threads = @@THREADS@@;").replace(
    "__global__ void softmax_kernel", "static const int sample_id = @@SAMPLE@@;\n__global__ void softmax_kernel")


def _elementwise(name: str, problem: str, expr: str, wrong_expr: str) -> Template:
    src = _ELEMENTWISE.replace("@@NAME@@", name).replace("@@EXPR@@", expr)
    return Template(name, problem, src, wrong=(f"out[idx] = {expr};", f"out[idx] = {wrong_expr};"),
                    undeclared=("float v = x[idx];", "float v = x[index];"),
                    illegal=("out[idx] = ", "out[idx * 4096] = "),
                    hang=("    if (idx < n) {", _SPIN.format(x="x") + "    if (idx < n) {"))


def _loss(name: str, problem: str, expr: str, wrong_expr: str) -> Template:
    src = _LOSS.replace("@@NAME@@", name).replace("@@EXPR@@", expr)
    return Template(name, problem, src, wrong=(f"local += {expr};", f"local += {wrong_expr};"),
                    undeclared=("float a = p[i], b = t[i % m];", "float a = p[i], b = target[i % m];"),
                    illegal=("float a = p[i], b = t[i % m];", "float a = p[i * 65536], b = t[i % m];"),
                    hang=("    partial[tid] = local;", _SPIN.format(x="p") + "    partial[tid] = local;"))


CUDA_TEMPLATES = (
    _elementwise("relu", "problems/level1/8_ReLU.py", "fmaxf(v, 0.0f)", "fmaxf(v, 0.01f)"),
    _elementwise("leaky", "problems/level1/9_LeakyReLU.py", "v > 0.0f ? v : v * arg", "v > 0.0f ? v : v * 0.1f"),
    _elementwise("tanh", "problems/level1/12_Tanh.py", "tanhf(v)", "tanhf(v * 0.5f)"),
    _loss("mse", "problems/level1/26_MSELoss.py", "(a - b) * (a - b)", "fabsf(a - b)"),
    _loss("hinge", "problems/level1/100_HingeLoss.py", "fmaxf(1.0f - a * b, 0.0f)", "fmaxf(1.0f - a, 0.0f) * b"),
    Template("softmax", "problems/level1/23_Softmax.py", _SOFTMAX,
             wrong=("expf(row_in[i] - row_max) / row_sum", "expf(row_in[i]) / row_sum"),
             undeclared=("float row_sum = sdata[0];", "float row_sum = shared_sum[0];"),
             illegal=("row_out[i] = ", "row_out[i * 65536L] = "),
             hang=("    float row_max = sdata[0];", _SPIN.format(x="input") + "    float row_max = sdata[0];")),
)

# ---- the CPU's: pure PyTorch, and C built with torch's load (a second per build) ------------
_TORCH_ADD_RELU = '''import torch
import torch.nn as nn

# @@SAMPLE@@ (@@THREADS@@)


class ModelNew(nn.Module):
    def forward(self, x, y):
        return torch.relu(x + y - 1.0)
'''

_C_HINGE = r'''import ctypes
import os

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load

SOURCE = """
static const int sample_id = @@SAMPLE@@;
extern "C" double hinge_sum(const float* p, const float* t, long n, long m) {
    double total = 0.0;
    for (long i = 0; i < n; i += 1) {
        double v = 1.0 - (double)p[i] * (double)t[i % m];  // targets: one per column
        total += v > 0.0 ? v : 0.0;
    }
    return total / (double)n + 0 * @@THREADS@@;
}
"""

folder = os.environ.get("TORCH_EXTENSIONS_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "kbench-rl")
os.makedirs(folder, exist_ok=True)
path = os.path.join(folder, "hinge.cpp")
if not os.path.exists(path):  # rewritten, it would be newer than its object: built again
    with open(path, "w") as f:
        f.write(SOURCE)
load(name="rl_hinge", sources=[path], is_python_module=False)
lib = ctypes.CDLL(os.path.join(folder, "rl_hinge", "rl_hinge.so"))
lib.hinge_sum.restype = ctypes.c_double
lib.hinge_sum.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_long, ctypes.c_long]


class ModelNew(nn.Module):
    def forward(self, predictions, targets):
        p, t = predictions.contiguous(), targets.contiguous()
        return torch.tensor(lib.hinge_sum(p.data_ptr(), t.data_ptr(), p.numel(), t.numel()), dtype=torch.float32)
'''

CPU_TEMPLATES = (
    Template("torch_add_relu", "tests/fixtures/cpu/problems/level1/1_AddReLU.py", _TORCH_ADD_RELU,
             wrong=("x + y - 1.0", "x + y - 0.9"), undeclared=("x + y - 1.0)", "x + y - 1.0"),  # a SyntaxError
             illegal=("import torch.nn as nn\n", "import torch.nn as nn\nimport os\nos.kill(os.getpid(), 11)\n"),
             hang=("    def forward(self, x, y):\n", "    def forward(self, x, y):\n        while True:\n            pass\n")),
    Template("c_hinge", "tests/fixtures/cpu/problems/level1/2_Hinge.py", _C_HINGE,
             wrong=("t[i % m]", "t[i / m]"), undeclared=("double total = 0.0;", "double total = start;"),
             illegal=("total += v > 0.0 ? v : 0.0;", "total += v > 0.0 ? v : 0.0; ((volatile float*)0)[i] = 1;"),
             hang=("for (long i = 0; i < n; i += 1) {", "for (long i = 0; i < n; i += 0) {")),
)


def _after_build(source: str, line: str) -> str:
    """`line` at module level right after the template's build call."""
    at = source.index("\n\n\nclass ModelNew")
    return source[:at] + "\n" + line + source[at:]


def make(index: int, template: Template, outcome: str, rng: random.Random, batch: int = 0) -> Candidate:
    threads = rng.choice((128, 256, 512, 1024))
    src = template.source.replace("@@THREADS@@", str(threads)).replace("@@SAMPLE@@", str(batch * 100000 + index))
    edit = {"wrong": template.wrong, "compile_error": template.undeclared, "illegal": template.illegal,
            "hang": template.hang}.get(outcome)
    if edit is not None:
        assert edit[0] in src, (template.name, outcome, edit[0])
        src = src.replace(edit[0], edit[1], 1)
    if outcome == "raise":
        src = _after_build(src, 'raise RuntimeError("the kernel did not pass my own test")')
    elif outcome == "exit":
        src = _after_build(src, "import os\nos._exit(1)")
    expected = EXPECTED[outcome]
    if "cpp_extension" not in src:  # nothing to build: a broken file fails at import, in the candidate
        expected = {"compile_error": ("load_error",), "illegal": ("crashed",)}.get(outcome, expected)
    return Candidate(index, template.name, outcome, str(ROOT / template.problem), src, expected)


def candidates(count: int, device: str, seed: int = 0) -> list[Candidate]:
    """`count` candidates over the templates in turn, outcomes drawn by OUTCOMES' weights
    (on the CPU without hangs or crashes of the C template, which a smoke test need not wait for)."""
    rng = random.Random(seed)
    templates = CUDA_TEMPLATES if device == "cuda" else CPU_TEMPLATES
    names, weights = zip(*OUTCOMES)
    out = []
    for i in range(count):
        template = templates[i % len(templates)]
        outcome = rng.choices(names, weights)[0]
        if device == "cpu" and outcome in ("hang", "illegal") and template.name == "c_hinge":
            outcome = "ok"
        out.append(make(i, template, outcome, rng, seed))
    return out
