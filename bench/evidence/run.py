"""False alarms on honest kernels: `kbench run` K times over kernels written the way models write them, one table.

Issue 24's acceptance, and issue 30's: zero non-ok statuses and zero gate-failing flags in three runs on the H100,
one GPU and `--gpus all`, over honest kernels from ~2 us to ~30 ms. The set is bench/timing_tasks.py's
(bench/accuracy: ReLU over 16 x 16384, the 12_Tanh copies with injected device waits of 0, 10, 50 and 2000 us (a
clock64/globaltimer spin after a tanh of random inputs), two Triton kernels, a 4096 x 2048 x 4096 tiled matmul, ...)
and this folder's problems 13-35 with their candidates (solutions/models/level1/<problem>.py, or one file per
candidate in a folder named after the problem):
- microseconds: 13_Softmax_Small (64 x 4096: CUDA, Triton, and `in_place.py`, the CUDA kernel writing into its
  input, whose verdict must be ok with exactly input_mutation), 14_RowSum_Small (Triton), 16_GELU_Small (CUDA,
  zeros_like), 17_LeakyReLU_Small (Triton), 18_Max_Dim_Small (a warp per row);
- 45 us - 1 ms: 19_Argmax_Dim (int64 out; CUDA and Triton), 20_GELU (Triton autotuned; CUDA with
  AT_DISPATCH_FLOATING_TYPES; CUDA built by load_inline in ModelNew.__init__), 21_LayerNorm (a four-kernel Triton pipeline: mean, variance, rstd, normalize; a
  Welford CUDA kernel), 22_RMSNorm (Triton autotuned; CUDA), 23_RMSNorm_BF16 (bf16 in and out), 24_Softmax_Wide
  (4096 x 16384: a three-kernel Triton pipeline, max, exp-sum, divide; a CUDA online softmax), 25_LogSoftmax,
  26_GroupNorm (two CUDA kernels), 27_CumSum (Triton tl.cumsum with a carry; a CUDA warp scan), 29_Matmul_FP16
  (Triton tl.dot, autotuned), 30_VarMean (returns a tuple; Welford), 31_Transpose (1 GB, shared-memory tiles),
  32_Attention_Scores (cuBLAS bmm inside the extension, then a scale-softmax kernel), 33_L2Norm, 35_SiLU_Mul
  (float4 loads);
- milliseconds: 15_Matmul_Square (a naive 4096^3 kernel, torch::zeros_like output: ~25 ms), 28_Linear_Bias_ReLU
  (8192 x 4096 x 4096: cuBLAS via torch::matmul plus a bias-ReLU epilogue kernel, ~6 ms; a Triton fp32 matmul with
  the epilogue fused, autotuned, ~10 ms), 34_Batched_Matmul (32 x 32 shared-memory tiles, ~10 ms).
33_L2Norm's Triton kernel is the slow JIT: its column loops are unrolled (tl.static_range) and it autotunes over
eight configs; compiling them for sm_90 took 39 s on a 2-core CPU box, so its first call is a compile of 20 s or
more on the H100 host, longer with builds beside it.

No GPU is needed to check the set before a GPU run: `--dry-run --kernels` also runs this folder's candidates on the
CPU against their references (cpu_kernels.py: Triton's interpreter, CUDA through a g++ shim), and compile_sm90.py
compiles them for sm_90 (triton.compile, nvcc) and times each Triton JIT.

Every candidate is honest: any status but ok, or any flag that fails the default gate, is an alarm (in_place.py:
exactly input_mutation). Per task and run: status, flags, speedup, reference and solution ms; then each task's
speedup spread over the runs (max/min - 1). Arguments after `--` go to `kbench run` (e.g. `-- --gpus all`).

    python bench/evidence/run.py --work DIR --runs 3 --md bench/evidence/record.md --json OUT.json
    python bench/evidence/run.py --work DIR --runs 3 --md OUT.md --json OUT.json -- --gpus all
    python bench/evidence/run.py --dry-run --work DIR          # write the files and check them on the CPU
    python bench/evidence/run.py --from R1.json R2.json R3.json --md OUT.md   # one table of runs made apart
"""
from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # bench/: timing_tasks
import timing_tasks as tt  # noqa: E402

KBENCH_ARGS = ("--time-budget", "4", "--timeout", "300")
GATE_FLAGS = ("below_roofline", "input_mutation", "tampering", "timing_mismatch", "untimed_work", "contended")
# Candidates whose honest verdict carries a flag: the flags they must get, exactly.
EXPECTED_FLAGS = {"13_Softmax_Small/in_place.py": {"input_mutation"}}


def write_work(work: Path) -> tuple[Path, Path]:
    """bench/accuracy's set (with its injected waits) and this folder's problems and solutions, under `work`."""
    problems, solutions = tt.write_work(work)
    shutil.copytree(HERE / "problems", problems, dirs_exist_ok=True)
    shutil.copytree(HERE / "solutions", solutions, dirs_exist_ok=True)
    return problems, solutions


def label(row: dict) -> str:
    path = Path(row["solution_path"])
    name = row["problem"]
    return f"{name} [{path.stem}]" if path.parent.name == name.split("/")[-1] else name


def expected_flags(row: dict) -> set[str]:
    path = Path(row["solution_path"])
    return EXPECTED_FLAGS.get(f"{path.parent.name}/{path.name}", set())


def alarms(row: dict) -> list[str]:
    """Why an honest candidate's verdict is wrong, or []."""
    out = []
    if row["status"] != "ok":
        out.append(f"{row['status']}: {row.get('message', '')[:200]}")
    want = expected_flags(row)
    gate = {f for f in row.get("flags") or [] if f in GATE_FLAGS}
    if gate - want:
        out.append(f"flagged {', '.join(sorted(gate - want))}: {row.get('message', '')[:300]}")
    if want - gate:
        out.append(f"lacks {', '.join(sorted(want - gate))}")
    return out


def summarize(runs: list[dict]) -> list[dict]:
    """One row per task: each run's verdict and times, the alarms, the speedup spread."""
    tasks: dict[str, dict] = {}
    for k, results in enumerate(runs):
        for r in results["results"]:
            t = tasks.setdefault(label(r), {"task": label(r), "runs": [None] * len(runs), "alarms": []})
            ref, sol = tt.side(r, "ref"), tt.side(r, "sol")
            t["runs"][k] = {"status": r["status"], "flags": r.get("flags") or [], "speedup": r.get("speedup"),
                            "ref_us": ref["us"], "sol_us": sol["us"], "clock": sol["clock"],
                            "message": (r.get("message") or "")[:300]}
            t["alarms"] += [f"run {k + 1}: {a}" for a in alarms(r)]
    for t in tasks.values():
        speedups = [r["speedup"] for r in t["runs"] if r and r["speedup"]]
        t["spread_pct"] = 100 * (max(speedups) / min(speedups) - 1) if len(speedups) > 1 else None
        t["ref_us"] = statistics.median([r["ref_us"] for r in t["runs"] if r and r["ref_us"]] or [0]) or None
    return sorted(tasks.values(), key=lambda t: t["ref_us"] or 0)


def _ms(us: float | None) -> str:
    return "-" if us is None else f"{us / 1e3:.4f}"


def render(rows: list[dict], device: str, command: str, wall_s: float, n_runs: int,
           kbench_args: tuple = KBENCH_ARGS) -> str:
    header = ["task"] + [f"run {k + 1}: status, flags, speedup, ref/sol ms" for k in range(n_runs)] + ["spread"]
    table = []
    for t in rows:
        cells = []
        for r in t["runs"]:
            if r is None:
                cells.append("missing")
                continue
            flags = ",".join(r["flags"]) or "-"
            speed = "-" if r["speedup"] is None else f"{r['speedup']:.3f}x"
            cells.append(f"{r['status']}, {flags}, {speed}, {_ms(r['ref_us'])}/{_ms(r['sol_us'])}")
        spread = "-" if t["spread_pct"] is None else f"{t['spread_pct']:.1f}%"
        table.append([t["task"], *cells, spread])
    found = [f"- {t['task']}: {a}" for t in rows for a in t["alarms"]]
    return "\n".join([
        "# Judge-owned evidence: false alarms on honest kernels",
        "",
        f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC, {device}; `{command}` ({wall_s:.0f} s, {n_runs} runs, "
        f"kbench {' '.join(kbench_args)}).",
        "",
        f"**{len(found)} alarms over {len(rows)} honest tasks x {n_runs} runs** (an alarm: a status other than ok, or "
        f"a flag of {', '.join(GATE_FLAGS)}; `13_Softmax_Small [in_place]` must get exactly input_mutation).",
        "",
        tt.md_table(header, table),
        *(["", "Alarms:", *found] if found else []),
    ])


def _device() -> str:
    import torch

    if not torch.cuda.is_available():
        return f"no GPU, torch {torch.__version__}"
    return f"{torch.cuda.get_device_name(0)}, torch {torch.__version__}, CUDA {torch.version.cuda}"


def _recorded(runs: list[dict]) -> tuple[str, float, tuple]:
    """What earlier runs' results.json say of themselves: the card and torch of the first,
    their kbench time summed, and the first's time budget and timeout as kbench arguments."""
    info = [r.get("run") or {} for r in runs]
    first = info[0]
    device = (f"{first.get('device', '?')}, torch {first.get('torch_version', '?')}, "
              f"CUDA {first.get('cuda_version', '?')}")
    wall = sum((datetime.fromisoformat(i["finished"]) - datetime.fromisoformat(i["started"])).total_seconds()
               for i in info if i.get("started") and i.get("finished"))
    options = first.get("options") or {}
    budget = (options.get("timing") or {}).get("budget_s")
    args = tuple(a for pair in (("--time-budget", f"{budget:g}") if budget else (),
                                ("--timeout", f"{options['timeout']:g}") if options.get("timeout") else ())
                 for a in pair)
    return device, wall, args or KBENCH_ARGS


def check_problem(path: Path) -> str:
    """tt.check_problem's checks (full-size shapes on the meta device, the reference at small sizes on the CPU), for
    references that return a tuple (30_VarMean) as well as one tensor."""
    import torch

    module = tt._import(path, f"dry_problem_{path.stem}")
    with torch.device("meta"):
        inputs = list(module.get_inputs())
        full = module.Model(*module.get_init_inputs())(*inputs)
    gb = sum(x.numel() * x.element_size() for x in inputs if isinstance(x, torch.Tensor)) / 1e9
    for name, value in list(vars(module).items()):
        if type(value) is int and value > 64 and not name.startswith("_"):
            setattr(module, name, tt.SMALL)
    torch.manual_seed(0)
    small_inputs = list(module.get_inputs())
    out = module.Model(*module.get_init_inputs())(*small_inputs)
    outs = list(out) if isinstance(out, tuple) else [out]
    assert isinstance(full, tuple) == isinstance(out, tuple), f"{path.name}: a tuple at one size only"
    for o in outs:
        assert type(o) is torch.Tensor and torch.isfinite(o).all(), f"{path.name}: reference output not finite"
    shape = [list(f.shape) for f in full] if isinstance(full, tuple) else list(full.shape)
    dtypes = sorted({str(o.dtype).replace("torch.", "") for o in outs})
    return f"inputs {tt._shapes(inputs)} ({gb:.3f} GB) -> {shape} {','.join(dtypes)}; CPU at {tt._shapes(small_inputs)} ok"


def validate(problems: Path, solutions: Path) -> list[str]:
    """tt.validate with check_problem above: one line per file; raises AssertionError on the first bad one."""
    lines = []
    for problem in sorted(problems.rglob("*.py"), key=tt._natural):
        rel = problem.relative_to(problems).with_suffix("")
        lines.append(f"problem {rel}: {check_problem(problem)}")
        found = sorted((solutions / tt.SET / rel).glob("*.py"), key=tt._natural) or [solutions / tt.SET / f"{rel}.py"]
        for sol in found:
            assert sol.is_file(), f"no solution for {rel}"
            lines.append(f"  solution {sol.relative_to(solutions)}: {tt.check_solution(sol, problem)}")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 usage="%(prog)s [options] [-- KBENCH_RUN_ARGS ...]")
    ap.add_argument("--work", type=Path, help="work folder: the task files, kbench's runs and build cache "
                                              "[default: a new temporary one]")
    ap.add_argument("--runs", type=int, default=3, help="kbench runs over the set [3]")
    ap.add_argument("--cold", action="store_true", help="a new build cache for every run, so that each run builds "
                                                        "its kernels beside the timing [one cache for all runs]")
    ap.add_argument("--md", type=Path, help="also write the Markdown record here")
    ap.add_argument("--json", type=Path, help="write the raw numbers here")
    ap.add_argument("--from", dest="merge", type=Path, nargs="+", metavar="RESULTS_JSON",
                    help="no run: the table of these earlier runs' results.json files, one run each, in order "
                         "(runs made in separate device calls)")
    ap.add_argument("--dry-run", action="store_true", help="write the task files and check them on the CPU; no GPU")
    ap.add_argument("--kernels", action="store_true", help="with --dry-run: also run this folder's candidates on the "
                                                           "CPU (cpu_kernels.py: Triton's interpreter, CUDA through "
                                                           "a g++ shim; minutes)")
    argv = sys.argv[1:]
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    a = ap.parse_args(argv[:argv.index("--")] if "--" in argv else argv)
    if a.merge:
        runs = [json.loads(path.read_text()) for path in a.merge]
        device, wall_s, args = _recorded(runs)
        command = "python bench/evidence/run.py " + " ".join(sys.argv[1:])
        tt.write_outputs(render(summarize(runs), device, command, wall_s, len(runs), args),
                         {"from": [str(p) for p in a.merge], "runs": [r.get("run", {}) for r in runs],
                          "tasks": summarize(runs)}, a.md, a.json)
        return
    work = (a.work or Path(tempfile.mkdtemp(prefix="kbench-evidence-"))).resolve()
    problems, solutions = write_work(work)
    if a.dry_run:
        print("\n".join(validate(problems, solutions)))
        if a.kernels:  # a process of its own: TRITON_INTERPRET must be set before anything imports Triton
            if subprocess.run([sys.executable, str(HERE / "cpu_kernels.py")]).returncode != 0:
                raise SystemExit("candidates failed on the CPU (cpu_kernels.py)")
        print(f"dry run ok: files in {work}")
        return
    kbench_args = (*KBENCH_ARGS, *extra)
    started = time.monotonic()
    runs = []
    for k in range(a.runs):
        cache = work / (f"cache-run{k + 1}" if a.cold else "cache")
        if a.cold:
            shutil.rmtree(cache, ignore_errors=True)
        runs.append(tt.run_kbench(problems, solutions, work / f"run{k + 1}", cache, *kbench_args))
    rows = summarize(runs)
    command = "python bench/evidence/run.py " + " ".join(sys.argv[1:])
    tt.write_outputs(render(rows, _device(), command, time.monotonic() - started, a.runs, kbench_args),
                     {"kbench_args": kbench_args, "cold": a.cold, "runs": [r.get("run", {}) for r in runs],
                      "tasks": rows},
                     a.md, a.json)


if __name__ == "__main__":
    main()
