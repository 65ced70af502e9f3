"""The task set shared by bench/timing_accuracy.py and bench/timing_repro.py.

bench/accuracy/ holds KernelBench-format problems and, under solutions/models/, one
solution each, written as language models write them for KernelBench: load_inline
with verbose=True, kernel<<<grid, block>>> on the legacy default stream,
zeros_like/empty_like outputs, torch ops around the custom op, two Triton kernels
(one autotuned), an eager reference of many small ops (cosine-similarity loss).
Device times span ~2 us to ~10 ms on an H100.

`write_work` copies them into a work folder and adds the injected-wait copies of
12_Tanh (WAIT_US = 10, 50, 2000); `validate` checks the copies on the CPU, which is
what both scripts' --dry-run (and tests/cli/test_bench_files.py) run.
"""
from __future__ import annotations

import ast
import importlib.util
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "bench" / "accuracy"
SET = "models"
WAIT_PROBLEM = "level1/12_Tanh"
WAITS_US = (10, 50, 2000)
SMALL = 48  # --dry-run: module-level sizes above 64 shrink to this, so references run on the CPU at once
sys.path.insert(0, str(ROOT))  # the bench scripts use the checkout's harness (builds, discovery, loading)


def wait_name(us: int) -> str:
    return f"wait_{us}us"


def write_work(work: Path) -> tuple[Path, Path]:
    """The problems and the solution set under `work`, as `kbench run` reads them.
    Byte-identical to the last call's files, so kbench's build cache serves them."""
    problems, solutions = work / "problems", work / "solutions"
    for folder in (problems, solutions):
        shutil.rmtree(folder, ignore_errors=True)
    shutil.copytree(SOURCE / "problems", problems)
    shutil.copytree(SOURCE / "solutions", solutions)
    base = solutions / SET / WAIT_PROBLEM / f"{wait_name(0)}.py"
    text = base.read_text()
    assert "\nWAIT_US = 0\n" in text, base
    for us in WAITS_US:
        base.with_name(f"{wait_name(us)}.py").write_text(text.replace("\nWAIT_US = 0\n", f"\nWAIT_US = {us}\n"))
    return problems, solutions


def label(row: dict) -> str:
    """A task's short name: the problem, and the candidate's name where a problem has several."""
    name = row["problem"]
    return f"{name} [{Path(row['solution_path']).stem}]" if name == WAIT_PROBLEM else name


def run_kbench(problems: Path, solutions: Path, out: Path, cache: Path, *extra: str) -> dict:
    """One `python cli.py run`; its results.json. kbench's own output goes to out.log."""
    shutil.rmtree(out, ignore_errors=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, str(ROOT / "cli.py"), "run", "--problems", str(problems), "--solutions", str(solutions),
           "--out", str(out), "--cache-dir", str(cache), "--exit-zero", *extra]
    log = out.with_suffix(".log")
    with open(log, "w") as f:
        done = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT)
    if done.returncode != 0 or not (out / "results.json").is_file():
        tail = log.read_text(errors="replace")[-3000:]
        raise SystemExit(f"kbench run failed (exit {done.returncode}): {' '.join(cmd)}\n{tail}")
    return json.loads((out / "results.json").read_text())


def side(row: dict, which: str) -> dict:
    """One side's times from a results.json row, read defensively: the clock rewrite adds
    timing.<side>.clock and .host_ms; older results have neither."""
    timing = row.get("timing") or {}
    s = timing.get(which) or {}
    ms = row.get(f"{which}_ms")
    return {"us": None if ms is None else ms * 1e3, "clock": s.get("clock") or timing.get("clock"),
            "host_us": None if s.get("host_ms") is None else s["host_ms"] * 1e3, "n": s.get("n"),
            "iqr_us": None if s.get("iqr_ms") is None else s["iqr_ms"] * 1e3}


def md_table(header: list[str], rows: list[list]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join("" if c is None else str(c).replace("|", "\\|") for c in row) + " |" for row in rows]
    return "\n".join(lines)


def us(x: float | None) -> str:
    return "-" if x is None else (f"{x:.2f}" if x < 100 else f"{x:.1f}")


def write_outputs(markdown: str, data: dict, md: Path | None, js: Path | None) -> None:
    print(markdown)
    for path, text in ((md, markdown + "\n"), (js, json.dumps(data, indent=1, default=str) + "\n")):
        if path:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)


# ---- --dry-run: the files, checked on the CPU --------------------------------------------

def _import(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _shapes(xs) -> list:
    import torch

    return [list(x.shape) if isinstance(x, torch.Tensor) else x for x in xs]


def check_problem(path: Path) -> str:
    """Import it, draw its inputs at full size on the meta device (shapes, no memory) and
    run its reference there, then shrink its sizes and run the reference on the CPU."""
    import torch

    module = _import(path, f"dry_problem_{path.stem}")
    with torch.device("meta"):
        inputs = list(module.get_inputs())
        full = module.Model(*module.get_init_inputs())(*inputs)
    gb = sum(x.numel() * x.element_size() for x in inputs if isinstance(x, torch.Tensor)) / 1e9
    for name, value in list(vars(module).items()):
        if type(value) is int and value > 64 and not name.startswith("_"):
            setattr(module, name, SMALL)
    torch.manual_seed(0)
    small_inputs = list(module.get_inputs())
    out = module.Model(*module.get_init_inputs())(*small_inputs)
    assert isinstance(out, torch.Tensor) and torch.isfinite(out).all(), f"{path.name}: reference output not finite"
    return f"inputs {_shapes(inputs)} ({gb:.3f} GB) -> {list(full.shape)}; CPU at {_shapes(small_inputs)} ok"


def _forward_arity(tree: ast.Module, cls: str) -> int | None:
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == cls:
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == "forward":
                    return len(item.args.args) - 1
    return None


def check_solution(path: Path, problem: Path) -> str:
    """Without a GPU a solution cannot be imported (it compiles CUDA or needs Triton), so:
    it parses, ModelNew.forward takes what Model.forward takes, and it is written the way
    this set claims (load_inline with verbose=True and a <<<grid, block>>> launch, or Triton)."""
    tree = ast.parse(path.read_text(), str(path))
    want, got = _forward_arity(ast.parse(problem.read_text()), "Model"), _forward_arity(tree, "ModelNew")
    assert got is not None, f"{path.name}: no ModelNew.forward"
    assert got == want, f"{path.name}: ModelNew.forward takes {got} inputs, Model.forward {want}"
    text = path.read_text()
    if "load_inline" in text:
        assert "verbose=True" in text, f"{path.name}: load_inline without verbose=True"
        assert "<<<" in text and "getCurrentCUDAStream" not in text, f"{path.name}: not a legacy-stream launch"
        return "load_inline, legacy default stream"
    assert "@triton.jit" in text, f"{path.name}: neither load_inline nor Triton"
    return "Triton" + (", autotuned" if "@triton.autotune" in text else "")


def _natural(path: Path) -> list:
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", str(path))]


def validate(problems: Path, solutions: Path) -> list[str]:
    """One line per file; raises AssertionError on the first bad one."""
    lines = []
    for problem in sorted(problems.rglob("*.py"), key=_natural):
        rel = problem.relative_to(problems).with_suffix("")
        lines.append(f"problem {rel}: {check_problem(problem)}")
        found = sorted((solutions / SET / rel).glob("*.py"), key=_natural) or [solutions / SET / f"{rel}.py"]
        for sol in found:
            assert sol.is_file(), f"no solution for {rel}"
            lines.append(f"  solution {sol.relative_to(solutions)}: {check_solution(sol, problem)}")
    return lines
