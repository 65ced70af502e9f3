"""Timing reproducibility: the same tasks' speedups over separate kbench runs, on a
quiet host and on a host loaded by 16 concurrent compiles.

Tasks: bench/timing_accuracy.py's set (bench/timing_tasks.py) but for its 2 and 8 ms
matmul, ~3 us to 2 ms per call, 12_Tanh's injected-wait copies included; their builds
come from the shared build cache in <work>/cache (made by timing_accuracy.py with the
same --work, or by the first run here). Spread = max/min - 1 of a task's speedup over
RUNS runs. Targets (issue 30): at most 1% where the faster side's median is 100 us or
more, 3% where it is 3-100 us (the faster side sets the speedup's noise).

The load: LOADERS processes, each compiling a throwaway translation unit that
includes torch/extension.h with g++, over and over, for as long as the loaded runs
last. Compiles, not CPU spinners, because compiles are what loads the host while
kbench times: its own parallel builds, which run beside the timing of tasks built
earlier. A compile takes a core and ~1 GB of memory traffic-heavy work, and a new
process every ~20 s (fork, exec, page faults), which a spinning loop does not.

    python bench/timing_repro.py --work DIR --md OUT.md --json OUT.json
    python bench/timing_repro.py --dry-run --work DIR
"""
from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

import timing_tasks as tt

PROBLEMS = ("level1/1_ReLU_Small", "level1/2_Scale_LeakyReLU_Bias", "level1/3_Sum_Dim", "level1/4_Softmax",
            "level1/5_CosineSimilarityLoss", "level1/6_SiLU", "level1/7_LayerNorm", "level1/8_CrossEntropyLoss",
            "level2/9_Linear_BiasAdd_GELU", "level1/11_MSELoss", tt.WAIT_PROBLEM)
# A row per task as timing_tasks.label names it: 12_Tanh has a candidate per injected wait.
TASKS = tuple(name for name in PROBLEMS if name != tt.WAIT_PROBLEM) + tuple(
    f"{tt.WAIT_PROBLEM} [{tt.wait_name(us)}]" for us in (0, *tt.WAITS_US))
TARGETS = ((100.0, 0.01), (3.0, 0.03))  # (the faster side at least us, spread at most)
RUNS = 3
LOADERS = 16
# Correctness was judged with kbench's defaults by timing_accuracy.py's run of the same files; here one
# trial without the float64 reference keeps six runs well inside one device command. Timing is unchanged.
KBENCH_ARGS = ("--time-budget", "4", "--trials", "1", "--no-fp64")
LOADER_TU = """// bench/timing_repro.py: compiled over and over to load the host as kbench's builds do.
#include <torch/extension.h>
torch::Tensor f(torch::Tensor x) { return torch::relu(x * 2 + 1).sum(0); }
"""


def loader_command(folder: Path) -> list[str]:
    from torch.utils import cpp_extension

    tu = folder / "loader.cpp"
    tu.write_text(LOADER_TU)
    includes = [f"-I{p}" for p in [*cpp_extension.include_paths(), sysconfig.get_paths()["include"]]]
    return ["g++", "-std=c++17", "-O2", "-fPIC", *includes, "-c", str(tu), "-o", str(folder / "loader.o")]


def start_loaders(n: int, folder: Path) -> list[subprocess.Popen]:
    """n shell loops, each compiling in a folder of its own and counting its compiles."""
    procs = []
    for i in range(n):
        mine = folder / f"loader{i}"
        mine.mkdir(parents=True, exist_ok=True)
        cmd = " ".join(loader_command(mine)) + f" && echo >> {mine / 'done'}"
        procs.append(subprocess.Popen(["bash", "-c", f"while :; do {cmd}; done"], start_new_session=True,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    return procs


def stop_loaders(procs: list[subprocess.Popen], folder: Path) -> int:
    """Ends the loaders' process groups (each started its own); returns the compiles they finished."""
    for p in procs:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        p.wait()
    return sum(len((d / "done").read_text().splitlines()) for d in folder.glob("loader*") if (d / "done").is_file())


def measure(problems: Path, solutions: Path, work: Path, condition: str) -> list[dict]:
    filters = [arg for name in PROBLEMS for arg in ("--problem", name)]
    runs = []
    for i in range(RUNS):
        results = tt.run_kbench(problems, solutions, work / f"repro_{condition}_{i}", work / "cache",
                                *filters, *KBENCH_ARGS)
        runs.append({"run": i, "build_seconds": results["run"].get("build_seconds"),
                     "builds_cached": results["run"].get("builds_cached"),
                     "tasks": {tt.label(r): {"status": r["status"], "speedup": r.get("speedup"),
                                              "ref": tt.side(r, "ref"), "sol": tt.side(r, "sol"),
                                              "flags": r.get("flags") or [],
                                              # why, where a run did not give a speedup: a record must say
                                              "message": r.get("message") if r["status"] != "ok" else ""}
                               for r in results["results"]}})
        print(f"[repro] {condition} run {i + 1}/{RUNS} done", flush=True)
    return runs


def spread(xs: list[float]) -> float | None:
    return max(xs) / min(xs) - 1 if xs and min(xs) > 0 else None


def summarize(runs: list[dict], task: str) -> dict:
    got = [run["tasks"].get(task, {}) for run in runs]
    speedups = [g["speedup"] for g in got if g.get("speedup")]
    ref = [g["ref"]["us"] for g in got if g.get("ref", {}).get("us")]
    sol = [g["sol"]["us"] for g in got if g.get("sol", {}).get("us")]
    faster = min(statistics.median(ref), statistics.median(sol)) if ref and sol else None
    target = next((most for floor, most in TARGETS if faster is not None and faster >= floor), None)
    s = spread(speedups) if len(speedups) == len(runs) else None
    return {"speedups": speedups, "spread": s, "ref_us": ref, "sol_us": sol, "ref_spread": spread(ref),
            "sol_spread": spread(sol), "faster_us": faster, "target": target,
            "met": s is not None and target is not None and s <= target,
            "clocks": sorted({f"{g['ref']['clock']}/{g['sol']['clock']}" for g in got if g.get("ref")}),
            "statuses": [g.get("status") for g in got],
            "failures": [f"run {i + 1}: {g.get('status')}: {g.get('message', '')[:300]}" for i, g in enumerate(got)
                         if g.get("status") not in (None, "ok")]}


def pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.2f}%"


def render(table: dict, load: dict, command: str, device: str, wall_s: float) -> str:
    rows = []
    for task in TASKS:
        quiet, loaded = table["quiet"][task], table["loaded"][task]
        for condition, s in (("quiet", quiet), ("loaded", loaded)):
            rows.append([task, condition, tt.us(s["faster_us"]), " ".join(f"{x:.3f}" for x in s["speedups"]) or "-",
                         pct(s["spread"]), pct(s["ref_spread"]), pct(s["sol_spread"]),
                         "-" if s["target"] is None else f"{s['target']:.0%}",
                         "-" if s["target"] is None else ("yes" if s["met"] else "NO"),
                         ", ".join(s["clocks"])])
        shift = (statistics.median(loaded["speedups"]) / statistics.median(quiet["speedups"]) - 1
                 if loaded["speedups"] and quiet["speedups"] else None)
        rows.append([task, "loaded vs quiet", "", "median speedup moved", pct(shift), "", "", "", "", ""])
    failed = [f"- {t}, {c}, {line}" for c in ("quiet", "loaded") for t in TASKS for line in table[c][t]["failures"]]
    met = [table[c][t]["met"] for c in ("quiet", "loaded") for t in TASKS if table[c][t]["target"] is not None]
    return "\n".join([
        "# Timing reproducibility: speedup spread over separate kbench runs",
        "",
        f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC, {device}; `{command}` ({wall_s:.0f} s).",
        "",
        f"{RUNS} runs per condition, builds cached; spread = max/min - 1. Loaded: {LOADERS} concurrent g++ compiles "
        f"of a TU including torch/extension.h, restarted as each ends ({load['compiles']} compiles finished during "
        f"the loaded runs; load average {load['loadavg_before']:.1f} before, {load['loadavg_after']:.1f} at the end "
        f"of the loaded runs, on {os.cpu_count()} cores).",
        "",
        f"**{sum(met)} of {len(met)} within target** (1% where the faster side is 100 us or more, 3% at 3-100 us).",
        "",
        tt.md_table(["task", "condition", "faster side us", f"speedups ({RUNS} runs)", "spread", "ref spread",
                     "sol spread", "target", "met", "clocks ref/sol"], rows),
        *(["", "Runs that gave no speedup:", "", *failed] if failed else []),
    ])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", type=Path, help="work folder (share it with timing_accuracy.py to reuse its builds) "
                                              "[default: a new temporary one]")
    ap.add_argument("--md", type=Path, help="also write the Markdown table here")
    ap.add_argument("--json", type=Path, help="write the raw numbers here")
    ap.add_argument("--dry-run", action="store_true", help="write the task files and check them on the CPU; no GPU")
    a = ap.parse_args()
    work = (a.work or Path(tempfile.mkdtemp(prefix="kbench-repro-"))).resolve()
    problems, solutions = tt.write_work(work)
    loaders = work / "loaders"
    if a.dry_run:
        lines = tt.validate(problems, solutions)
        missing = [name for name in PROBLEMS if not (problems / f"{name}.py").is_file()]
        assert not missing, f"repro tasks not in the set: {missing}"
        assert shutil.which("g++"), "no g++ for the loaders"
        loaders.mkdir(parents=True, exist_ok=True)
        print("\n".join(lines) + f"\nloader: {' '.join(loader_command(loaders))}\ndry run ok: files in {work}")
        return
    started = time.monotonic()
    runs = {"quiet": measure(problems, solutions, work, "quiet")}
    shutil.rmtree(loaders, ignore_errors=True)
    procs = start_loaders(LOADERS, loaders)
    load = {"loadavg_before": os.getloadavg()[0]}
    try:
        time.sleep(5)  # the compilers are up and parsing before the first loaded run
        runs["loaded"] = measure(problems, solutions, work, "loaded")
        load["loadavg_after"] = os.getloadavg()[0]
    finally:
        load["compiles"] = stop_loaders(procs, loaders)
    table = {c: {t: summarize(runs[c], t) for t in TASKS} for c in runs}
    command = "python bench/timing_repro.py " + " ".join(sys.argv[1:])
    device = f"{_device()}, {os.cpu_count()} cores"
    tt.write_outputs(render(table, load, command, device, time.monotonic() - started),
                     {"kbench_args": KBENCH_ARGS, "runs": runs, "summary": table, "load": load,
                      "loaders": LOADERS}, a.md, a.json)


def _device() -> str:
    import torch

    return f"{torch.cuda.get_device_name(0)}, torch {torch.__version__}, CUDA {torch.version.cuda}"


if __name__ == "__main__":
    main()
