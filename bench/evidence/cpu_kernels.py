"""Run this folder's candidates on the CPU, at small and awkward shapes, against their problems' references.

Nothing here can run them on a GPU, and a wrong honest kernel would make the evidence run useless, so before a GPU
run every candidate of problems 13-35 (but 13's model.py and in_place.py, checked on the H100 already) is run here:
- Triton kernels through Triton's interpreter (TRITON_INTERPRET=1), each autotune config in turn; skipped, and said
  so, where Triton is not installed (`pip install triton` brings it; no GPU needed);
- CUDA kernels compiled by g++ against cuda_emu.h: one std::thread per CUDA thread, __syncthreads a block barrier,
  warp shuffles through a per-warp slot array, shared memory one copy per kernel (blocks run one at a time),
  dynamic shared memory filled with NaN bytes, a shuffle from an absent lane returns NaN bytes. `<<<grid, block,
  smem>>>` launches are rewritten into calls; cuBLAS calls (torch::matmul, torch::bmm) run on the CPU.
Shapes are not multiples of the blocks, rows span several chunks, and a few problems get inputs with structure (ties
for argmax, a non-square transpose, an unaligned float4 input). The comparison is the judge's elementwise rule:
|sol - ref| <= rtol |ref| + atol x RMS(ref) (fp32 1e-4, fp16 1e-2, bf16 2e-2), exact for integers.

    python bench/evidence/cpu_kernels.py [NAME ...]        # or: run.py --dry-run --kernels
"""
from __future__ import annotations

import hashlib
import importlib.util
import os
import re
import sys
import time
from pathlib import Path

os.environ["TRITON_INTERPRET"] = "1"  # before anything imports triton
HERE = Path(__file__).resolve().parent
SHAPES = {  # problem -> module-level sizes for the CPU run
    "13_Softmax_Small": dict(batch_size=5, dim=3000),
    "14_RowSum_Small": dict(batch_size=5, dim=3000),
    "16_GELU_Small": dict(batch_size=3, dim=1000),
    "17_LeakyReLU_Small": dict(batch_size=7, dim=333),
    "18_Max_Dim_Small": dict(batch_size=13, dim=333),
    "19_Argmax_Dim": dict(batch_size=5, dim=3001),
    "20_GELU": dict(batch_size=5, dim=999),
    "21_LayerNorm": dict(batch_size=6, features=1500),
    "22_RMSNorm": dict(batch_size=6, features=1500),
    "23_RMSNorm_BF16": dict(batch_size=6, features=1500),
    "24_Softmax_Wide": dict(batch_size=5, dim=5000),
    "25_LogSoftmax": dict(batch_size=5, dim=3000),
    "26_GroupNorm": dict(batch_size=2, channels=12, height=5, width=7, num_groups=4),
    "27_CumSum": dict(batch_size=5, dim=3000),
    "28_Linear_Bias_ReLU": dict(batch_size=37, in_features=70, out_features=45),
    "29_Matmul_FP16": dict(N=100),
    "30_VarMean": dict(batch_size=5, dim=3000),
    "31_Transpose": dict(N=70),
    "32_Attention_Scores": dict(batch_size=2, seq_len=100, head_dim=16),
    "33_L2Norm": dict(batch_size=5, dim=1000),
    "34_Batched_Matmul": dict(batch_size=2, M=50, K=70, N=40),
    "35_SiLU_Mul": dict(batch_size=7, dim=333),
}
SKIP = {"13_Softmax_Small/model.py", "13_Softmax_Small/in_place.py", "15_Matmul_Square.py"}  # run on the H100


def extra_inputs(name: str):
    """Inputs with structure that iid ones hide, or None."""
    import torch

    return {
        "19_Argmax_Dim": lambda: [torch.randint(0, 4, (5, 3001)).float()],  # ties: the first index must win
        "31_Transpose": lambda: [torch.randn(45, 70)],  # not square
        "35_SiLU_Mul": lambda: [torch.randn(2332)[1:].view(7, 333), torch.randn(7, 333)],  # `a` not 16-byte aligned
    }.get(name, lambda: None)()


# ---- CUDA through the shim ---------------------------------------------------------------

def _close(s: str, i: int) -> int:
    depth = 0
    for j in range(i, len(s)):
        depth += {"(": 1, ")": -1}.get(s[j], 0)
        if depth == 0:
            return j
    raise ValueError("unbalanced parentheses after a launch")


def _split_top(s: str) -> list[str]:
    parts, depth, cur = [], 0, ""
    for ch in s:
        depth += 1 if ch in "([{<" else -1 if ch in ")]}>" else 0
        if ch == "," and depth == 0:
            parts, cur = parts + [cur.strip()], ""
        else:
            cur += ch
    return parts + [cur.strip()]


def to_cpu_source(src: str) -> str:
    """A load_inline CUDA source as C++ for cuda_emu.h: CUDA includes dropped, extern shared arrays pointed at the
    dynamic buffer, each `kernel<<<g, b, smem>>>(args)` turned into emu::launch(g, b, smem, [&]{ kernel(args); })."""
    src = re.sub(r"#include\s*<(cuda_runtime|cuda|cuda_fp16|cuda_bf16)\.h>", "", src)
    src = re.sub(r"#include\s*<(c10/cuda|ATen/cuda)/[^>]*>", "", src)
    src = re.sub(r"extern\s+__shared__\s+(?:__align__\(\d+\)\s+)?([\w:]+)\s+(\w+)\s*\[\s*\]\s*;",
                 r"\1* \2 = reinterpret_cast<\1*>(emu::dyn_smem.data());", src)
    out, pos = "", 0
    launch = re.compile(r"([\w:]+(?:<[\w:, ]*>)?)\s*<<<(.*?)>>>\s*\(", re.S)
    while m := launch.search(src, pos):
        end = _close(src, m.end() - 1)
        cfg = _split_top(m.group(2)) + ["0"]
        out += (src[pos:m.start()] + f"emu::launch(dim3({cfg[0]}), dim3({cfg[1]}), (size_t)({cfg[2]}), "
                f"[&] {{ {m.group(1)}({src[m.end():end]}); }})")
        pos = end + 1
    return out + src[pos:]


def _install_shim() -> None:
    import torch.utils.cpp_extension as cpp

    real, shim = cpp.load_inline, (HERE / "cuda_emu.h").read_text()

    def load_inline(name, cpp_sources, cuda_sources=None, functions=None, **_):
        cpps = [cpp_sources] if isinstance(cpp_sources, str) else list(cpp_sources)
        cudas = [cuda_sources] if isinstance(cuda_sources, str) else list(cuda_sources or [])
        text = "\n".join(cpps) + "\n" + shim + "\n" + "\n".join(to_cpu_source(s) for s in cudas)
        tag = hashlib.sha1(text.encode()).hexdigest()[:10]
        return real(name=f"{name}_cpu_{tag}", cpp_sources=[text], functions=functions,
                    extra_cflags=["-O1", "-std=c++20", "-pthread", "-w"], extra_ldflags=["-pthread"])

    cpp.load_inline = load_inline


# ---- Triton: every autotune config in turn -----------------------------------------------

CONFIG = {"index": 0, "count": 1}


def _install_config_walk() -> bool:
    try:
        from triton.runtime.autotuner import Autotuner
    except ImportError:
        return False

    def run(self, *args, **kwargs):  # no benchmarking on the interpreter: the config CONFIG["index"] picks
        CONFIG["count"] = max(CONFIG["count"], len(self.configs))
        cfg = self.configs[CONFIG["index"] % len(self.configs)]
        return self.fn.run(*args, **{**kwargs, **cfg.all_kwargs()})

    Autotuner.run = run
    return True


# ---- the check --------------------------------------------------------------------------

def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def compare(sol, ref, where: str = "output") -> float:
    """The worst element's share of its tolerance; AssertionError where one is past it."""
    import torch

    if isinstance(ref, (tuple, list)):
        assert type(sol) is type(ref) and len(sol) == len(ref), f"{where}: {type(sol).__name__} vs {type(ref).__name__}"
        return max(compare(s, r, f"{where}[{i}]") for i, (s, r) in enumerate(zip(sol, ref)))
    assert type(sol) is torch.Tensor, f"{where}: {type(sol).__name__}"
    assert (sol.shape, sol.dtype) == (ref.shape, ref.dtype), f"{where}: {sol.shape} {sol.dtype} vs {ref.shape} {ref.dtype}"
    if not ref.is_floating_point():
        assert torch.equal(sol, ref), f"{where}: {int((sol != ref).sum())} of {ref.numel()} values differ"
        return 0.0
    assert torch.isfinite(sol).all(), f"{where}: NaN or Inf"
    rtol = {torch.float16: 1e-2, torch.bfloat16: 2e-2}.get(ref.dtype, 1e-4)
    s, r = sol.double(), ref.double()
    share = ((s - r).abs() / (rtol * r.abs() + rtol * r.pow(2).mean().sqrt())).max().item()
    assert share <= 1.0, f"{where}: {share:.3g}x its tolerance, max abs error {(s - r).abs().max().item():.3g}"
    return share


def check(problem: Path, solution: Path) -> tuple[float, int]:
    """Run one candidate against its problem's reference; (worst share of the tolerance, configs walked)."""
    import torch

    p = _load(problem, f"cpu_problem_{problem.stem}")
    for name, value in SHAPES[problem.stem].items():
        setattr(p, name, value)
    s = _load(solution, f"cpu_solution_{problem.stem}_{solution.stem}")
    torch.manual_seed(0)
    model = p.Model(*p.get_init_inputs())
    new = s.ModelNew(*p.get_init_inputs())
    state = model.state_dict()
    if state and new.state_dict().keys() == state.keys():
        new.load_state_dict(state)  # as the judge shares the reference's weights
    sets = [p.get_inputs(), p.get_inputs()] + [x for x in [extra_inputs(problem.stem)] if x]
    worst, CONFIG["count"], k = 0.0, 1, 0
    while k < CONFIG["count"]:
        CONFIG["index"] = k
        for inputs in sets:
            given = [x.clone() for x in inputs]
            out = new(*given)
            assert all(torch.equal(a, b) for a, b in zip(given, inputs)), "the candidate changed its inputs"
            worst = max(worst, compare(out, model(*inputs), f"config {k}: output"))
        k += 1
    return worst, CONFIG["count"]


def main(problems: Path = HERE / "problems", solutions: Path = HERE / "solutions", only: list[str] = ()) -> int:
    """Check every candidate (or those whose path holds a word of `only`); print a line each; the failures' count."""
    has_triton = _install_config_walk()
    _install_shim()
    failed = 0
    root = solutions / "models" / "level1"
    for problem in sorted((problems / "level1").glob("*.py"), key=lambda q: int(q.stem.split("_")[0])):
        if problem.stem not in SHAPES:
            continue
        for sol in sorted((root / problem.stem).glob("*.py")) or [root / f"{problem.stem}.py"]:
            rel = str(sol.relative_to(root))
            if rel in SKIP or (only and not any(w in rel for w in only)):
                continue
            if "@triton.jit" in sol.read_text() and not has_triton:
                print(f"skip {rel}: Triton is not installed")
                continue
            started = time.monotonic()
            try:
                worst, configs = check(problem, sol)
                print(f"ok   {rel}: worst element {worst:.3f} of its tolerance, {configs} config(s), "
                      f"{time.monotonic() - started:.0f} s", flush=True)
            except Exception as e:  # noqa: BLE001 - a failing candidate is a line, not the end of the check
                failed += 1
                print(f"FAIL {rel}: {type(e).__name__}: {str(e)[-500:]}", flush=True)
    return failed


if __name__ == "__main__":
    sys.exit(1 if main(only=sys.argv[1:]) else 0)
