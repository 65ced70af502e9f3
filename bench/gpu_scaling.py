"""Warm reruns of a 20-task set on 1, 2 and 4 GPUs of one host, and under --executor dask.

The set: bench/cold_set.py's 20 model-style candidates less one injected-wait copy
(wait_10us), plus one that builds its kernel and then exits at import (os._exit(3)
after its load_inline; declared crashed): 20 tasks over 12 problems, of which one
hangs, one crashes at run time, one does not compile, one is incorrect.

A first run on every GPU given fills the build cache; then, --repeats times, one
run per GPU count and one under --executor dask (a cluster kbench starts: one
worker per GPU), all on the filled cache. Reported per run: wall time, the run's
own phases and its tasks' phases summed (bench/run_phases.py), tasks per GPU;
then each GPU count's median wall against one GPU's, and whether every task's
status and flags agree across all runs.

    python bench/gpu_scaling.py --work DIR [--gpus 1,2,4] [--repeats 3] [--no-dask] --md OUT.md --json OUT.json
    python bench/gpu_scaling.py --work DIR --keep-cache ...   # more repeats on DIR's filled cache, no fill run
    python bench/gpu_scaling.py --work DIR --dry-run     # write the set and check it on the CPU
"""
from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import cold_set
import run_phases
import timing_tasks as tt

KBENCH_ARGS = cold_set.KBENCH_ARGS
DROP = f"models/{tt.WAIT_PROBLEM}/{tt.wait_name(10)}.py"
EXITS = "extra/level1/11_MSELoss.py"  # the set's MSE kernel (load_inline), then os._exit(3) at import


def write_set(work: Path) -> tuple[Path, Path]:
    problems, solutions = cold_set.write_set(work)
    (solutions / DROP).unlink()
    mse = (solutions / "models" / "level1" / "11_MSELoss.py").read_text()
    exits = solutions / EXITS
    exits.write_text("# Expected: crashed (exits with code 3 at import, after its kernel is built).\n" + mse
                     + "\n\nimport os\n\nos._exit(3)  # after the build: a rerun must not build it again\n")
    return problems, solutions


def run(problems: Path, solutions: Path, work: Path, name: str, *extra: str) -> dict:
    out = work / "runs" / name
    shutil.rmtree(out, ignore_errors=True)
    cmd = [sys.executable, str(tt.ROOT / "cli.py"), "run", "--problems", str(problems), "--solutions", str(solutions),
           "--out", str(out), "--cache-dir", str(work / "cache"), *KBENCH_ARGS, *extra]
    t0 = time.monotonic()
    with open(out.with_suffix(".log"), "w") as log:
        done = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=tt.ROOT)
    wall = time.monotonic() - t0
    if done.returncode != 0 or not (out / "results.json").is_file():
        raise SystemExit(f"{name}: kbench run failed (exit {done.returncode}); see {out.with_suffix('.log')}")
    data = json.loads((out / "results.json").read_text())
    verdicts = {Path(r["solution_path"]).resolve().relative_to(solutions.resolve()).as_posix():
                [r["status"], sorted(r["flags"])] for r in data["results"]}
    gpus = Counter(f"{r.get('gpu')} {r.get('gpu_name') or ''}".strip() for r in data["results"])
    print(f"[gpu_scaling] {name}: {wall:.1f} s wall, {len(verdicts)} tasks, {dict(gpus)}", flush=True)
    return {"name": name, "args": list(extra), "wall_s": round(wall, 2), "verdicts": verdicts, "gpus": dict(gpus),
            "phases": run_phases.summarize(data, wall), "device": data["run"]["device"]}


def render(runs: list[dict], counts: list[int], command: str) -> str:
    warm = [r for r in runs if r["name"] != "fill"]
    by_count = {n: [r["wall_s"] for r in warm if r["name"].startswith(f"{n}gpu-")] for n in counts}
    dask = [r["wall_s"] for r in warm if r["name"].startswith("dask-")]
    lines = [f"# Warm reruns on {'/'.join(map(str, counts))} GPUs ({runs[0]['device']})", "", f"`{command}`; kbench options "
             f"`{' '.join(KBENCH_ARGS)}`; the first run (fill) builds, every other run finds every build cached.", ""]
    rows = [[r["name"], f"{r['wall_s']:.1f}", ", ".join(f"GPU {k}: {v}" for k, v in sorted(r["gpus"].items()))]
            for r in runs]
    lines += [tt.md_table(["run", "wall s", "tasks per GPU"], rows), ""]
    one = statistics.median(by_count[counts[0]]) if by_count.get(counts[0]) else None
    for n in counts:
        if by_count[n]:
            med = statistics.median(by_count[n])
            ratio = f", {one / med:.2f}x the {counts[0]}-GPU median" if one and n != counts[0] else ""
            lines.append(f"- {n} GPU(s): median {med:.1f} s over {len(by_count[n])} runs{ratio}")
    if dask:
        lines.append(f"- --executor dask, {max(counts)} workers: median {statistics.median(dask):.1f} s over {len(dask)} runs")
    keys = sorted({k for r in warm for k in r["verdicts"]})
    differ = [k for k in keys if len({json.dumps(r["verdicts"].get(k)) for r in warm}) > 1]
    lines += ["", f"Tasks whose status or flags differ between the warm runs: {len(differ)}"]
    if differ:
        lines.append(tt.md_table(["candidate", *[r["name"] for r in warm]],
                                 [[k, *(" ".join([v[0], *v[1]]) if (v := r["verdicts"].get(k)) else "-" for r in warm)]
                                  for k in differ]))
    lines += ["", "Where the time went (run phases, then the tasks' phases summed):", "",
              run_phases.render({r["name"]: r["phases"] for r in runs})]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--gpus", default="1,2,4", help="GPU counts to run (each uses GPUs 0..N-1)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--no-dask", action="store_true")
    ap.add_argument("--keep-cache", action="store_true", help="DIR's cache is filled already: no fill run")
    ap.add_argument("--md", type=Path)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--dry-run", action="store_true", help="write the set and check it on the CPU; no GPU")
    a = ap.parse_args()
    work = a.work.resolve()
    problems, solutions = write_set(work)
    if a.dry_run:
        lines = tt.validate(problems, solutions)
        count = sum(1 for _ in solutions.rglob("*.py"))
        assert count == 20, f"{count} candidates, not 20"
        assert "os._exit(3)" in (solutions / EXITS).read_text()
        print("\n".join(lines) + f"\n{count} candidates; dry run ok: files in {work}")
        return
    import torch

    have = torch.cuda.device_count()
    counts = [n for n in (int(x) for x in a.gpus.split(",")) if n <= have]
    if not counts:
        raise SystemExit(f"--gpus {a.gpus}: this host has {have} GPU(s)")
    gpu_list = lambda n: ",".join(map(str, range(n)))  # noqa: E731
    runs = []
    if not (a.keep_cache and (work / "cache").is_dir()):
        shutil.rmtree(work / "cache", ignore_errors=True)
        runs.append(run(problems, solutions, work, "fill", "--gpus", gpu_list(max(counts))))
    for i in range(a.repeats):
        for n in counts:
            runs.append(run(problems, solutions, work, f"{n}gpu-{i + 1}", "--gpus", gpu_list(n)))
        if not a.no_dask:
            runs.append(run(problems, solutions, work, f"dask-{i + 1}", "--executor", "dask",
                            "--dask-workers", str(max(counts))))
    command = "python bench/gpu_scaling.py " + " ".join(sys.argv[1:])
    tt.write_outputs(render(runs, counts, command), {"command": command, "runs": runs}, a.md, a.json)


if __name__ == "__main__":
    main()
