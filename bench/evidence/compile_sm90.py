"""Compile this folder's candidates for the H100 (sm_90) on a machine without a GPU, and time each compile.

- Triton: each candidate's wrapper runs on CPU tensors at its problem's full size; every kernel launch, and every
  config of an autotuned one, becomes a triton.compile for sm_90 instead (no launch, so outputs are garbage and
  unchecked: cpu_kernels.py checks the numbers). The times are JIT times, 33_L2Norm's slow first call among them.
- CUDA: each load_inline candidate's CUDA source through `nvcc -c -arch=sm_90` against the installed torch's
  headers, as load_inline's device step would compile it (the host side and the link are not tried). A minute or
  more per file on 2 cores.

    python bench/evidence/compile_sm90.py [--triton | --cuda] [NAME ...]
"""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SOLUTIONS = HERE / "solutions" / "models" / "level1"
PROBLEMS = HERE / "problems" / "level1"


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _problem_of(solution: Path) -> Path:
    return PROBLEMS / f"{solution.parent.name if solution.parent != SOLUTIONS else solution.stem}.py"


def compile_triton(solutions: list[Path]) -> None:
    os.environ.setdefault("TRITON_CACHE_DIR", tempfile.mkdtemp(prefix="triton-sm90-"))  # cold: every compile runs
    import torch
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.runtime.autotuner import Autotuner
    from triton.runtime.jit import JITFunction

    dtypes = {torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16", torch.int64: "i64",
              torch.int32: "i32"}
    compiled: list[str] = []

    def run(self, *args, grid=None, warmup=False, **kwargs):
        options = {k: kwargs.pop(k) for k in ("num_warps", "num_stages", "num_ctas", "maxnreg") if k in kwargs}
        bound = self.signature.bind(*args, **kwargs)
        bound.apply_defaults()
        signature, constexprs = {}, {}
        for p in self.params:
            v = bound.arguments[p.name]
            if p.is_constexpr:
                signature[p.name], constexprs[p.name] = "constexpr", v
            elif isinstance(v, torch.Tensor):
                signature[p.name] = "*" + dtypes[v.dtype]
            elif isinstance(v, bool):
                signature[p.name] = "i1"
            elif isinstance(v, int):
                signature[p.name] = "i32" if -2 ** 31 <= v < 2 ** 31 else "i64"
            else:
                signature[p.name] = "fp32"
        started = time.monotonic()
        triton.compile(triton.compiler.ASTSource(fn=self, signature=signature, constexprs=constexprs),
                       target=GPUTarget("cuda", 90, 32), options=options)
        compiled.append(f"    {self.fn.__name__} {constexprs} {options}: {time.monotonic() - started:.1f} s")

    def run_every_config(self, *args, **kwargs):
        for config in self.configs:
            self.fn.run(*args, **{**kwargs, **config.all_kwargs()})

    JITFunction.run, Autotuner.run = run, run_every_config
    for sol in solutions:
        problem = _load(_problem_of(sol), f"sm90_problem_{sol.stem}")
        module = _load(sol, f"sm90_solution_{sol.parent.name}_{sol.stem}")
        compiled.clear()
        started = time.monotonic()
        torch.manual_seed(0)
        try:
            module.ModelNew(*problem.get_init_inputs())(*problem.get_inputs())
            print(f"ok   {sol.relative_to(SOLUTIONS)}: {len(compiled)} compile(s), {time.monotonic() - started:.1f} s")
        except Exception as e:  # noqa: BLE001 - one line per failing candidate
            print(f"FAIL {sol.relative_to(SOLUTIONS)}: {type(e).__name__}: {str(e)[:1000]}")
        print("\n".join(compiled), flush=True)


def compile_cuda(solutions: list[Path]) -> None:
    import torch
    import torch.utils.cpp_extension as cpp

    include = Path(torch.__file__).parent / "include"
    captured: dict = {}

    def load_inline(name, cpp_sources, cuda_sources=None, functions=None, **kwargs):
        captured.update(cuda=cuda_sources, flags=kwargs.get("extra_cuda_cflags") or [])
        raise SystemExit  # stop the import at the build: nothing after it is needed

    cpp.load_inline = load_inline
    out = Path(tempfile.mkdtemp(prefix="nvcc-sm90-"))
    for sol in solutions:
        captured.clear()
        try:
            module = _load(sol, f"nvcc_solution_{sol.parent.name}_{sol.stem}")
            # A build in ModelNew.__init__ (kbench builds it in the build process the same way)
            problem = _load(_problem_of(sol), f"nvcc_problem_{sol.stem}")
            module.ModelNew(*problem.get_init_inputs())
        except SystemExit:
            pass
        cu = out / f"{sol.parent.name}_{sol.stem}.cu"
        src = captured["cuda"]
        cu.write_text(src if isinstance(src, str) else "\n".join(src))
        cmd = ["nvcc", "-c", "-arch=sm_90", "-std=c++20", *[f for f in captured["flags"] if f], f"-I{include}",
               f"-I{include}/torch/csrc/api/include", f"-I{sysconfig.get_paths()['include']}",
               "-DTORCH_EXTENSION_NAME=sm90_check", "-D__CUDA_NO_HALF_OPERATORS__", "-D__CUDA_NO_HALF_CONVERSIONS__",
               "-D__CUDA_NO_BFLOAT16_CONVERSIONS__", "-D__CUDA_NO_HALF2_OPERATORS__", "--expt-relaxed-constexpr",
               "-Xcompiler", "-fPIC", "-w", str(cu), "-o", str(cu.with_suffix(".o"))]
        started = time.monotonic()
        done = subprocess.run(cmd, capture_output=True, text=True)
        errors = [line for line in (done.stdout + done.stderr).splitlines() if "error" in line.lower()]
        print(f"{'ok  ' if done.returncode == 0 else 'FAIL'} {sol.relative_to(SOLUTIONS)}: nvcc "
              f"{time.monotonic() - started:.0f} s", *errors[:5], sep="\n    " if errors else "", flush=True)


def main() -> None:
    args = sys.argv[1:]
    kinds = {a for a in args if a in ("--triton", "--cuda")} or {"--triton", "--cuda"}
    only = [a for a in args if not a.startswith("--")]
    chosen = [p for p in sorted(SOLUTIONS.rglob("*.py")) if not only or any(w in str(p) for w in only)]
    if "--triton" in kinds:
        compile_triton([p for p in chosen if "@triton.jit" in p.read_text()])
    if "--cuda" in kinds:
        compile_cuda([p for p in chosen if "load_inline" in p.read_text()])


if __name__ == "__main__":
    main()
