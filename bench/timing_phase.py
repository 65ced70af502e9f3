"""The timing phase at kbench's default settings: seconds per timed task, and what stopped it.

Issue 30's target: a median of at most 1.5 s per timed task for kernels of 100 us and more,
at the default settings (no --time-budget: 10 s a task at most), and no task more than 1 s
past its budget. bench/gpu_scaling.py times the same 20-task set at --time-budget 2, where
a task that does not converge stops at 2 s whatever it costs; here nothing caps it but the
default budget, so what converges, and how fast, is what the record shows.

A first run fills the build cache (bench/gpu_scaling's fill, --time-budget 2), then
--repeats warm runs on GPU 0 with kbench's defaults. Per run: wall time, the timed tasks'
median timing phase (all, and those whose slower side runs 100 us or more), the longest,
and the stop reasons and clocks; per task, the last run's row (its plan is in its log's
`[kbench] timing:` line).

    python bench/timing_phase.py --work DIR [--repeats 2] [--keep-cache] --md OUT.md --json OUT.json
"""
from __future__ import annotations

import argparse
import datetime
import shutil
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

import gpu_scaling
import timing_tasks as tt

BIG_MS = 0.1  # "kernels of 100 us and more": the slower side's median


def warm_run(problems: Path, solutions: Path, work: Path, name: str) -> dict:
    t0 = time.monotonic()
    data = tt.run_kbench(problems, solutions, work / "runs" / name, work / "cache", "--gpus", "0")
    return summarize(name, time.monotonic() - t0, data, solutions)


def summarize(name: str, wall: float, data: dict, solutions: Path) -> dict:
    tasks = []
    for r in data["results"]:
        t = r.get("timing") or {}
        tasks.append({
            "candidate": Path(r["solution_path"]).resolve().relative_to(solutions.resolve()).as_posix(),
            "status": r["status"], "flags": r.get("flags") or [], "clock": t.get("clock"),
            "stop": t.get("stop_reason"), "calls": t.get("calls_per_batch"),
            "time_s": (r.get("phase_seconds") or {}).get("time"), "ref_ms": r.get("ref_ms"), "sol_ms": r.get("sol_ms")})
    timed = [x for x in tasks if x["time_s"]]
    big = [x["time_s"] for x in timed if max(x["ref_ms"] or 0, x["sol_ms"] or 0) >= BIG_MS]
    row = {"name": name, "wall_s": round(wall, 2), "timed": len(timed),
           "median_time_s": round(statistics.median([x["time_s"] for x in timed]), 2) if timed else None,
           "big": len(big), "median_time_big_s": round(statistics.median(big), 2) if big else None,
           "max_time_s": round(max(x["time_s"] for x in timed), 2) if timed else None,
           "stops": dict(Counter(x["stop"] for x in timed)), "clocks": dict(Counter(x["clock"] for x in timed)),
           "device": data["run"].get("device"), "tasks": tasks}
    print(f"[timing_phase] {name}: {wall:.1f} s wall; timing median {row['median_time_s']} s over {len(timed)} "
          f"timed, {row['median_time_big_s']} s over the {len(big)} of 100 us and more, max {row['max_time_s']} s; "
          f"{row['stops']} {row['clocks']}", flush=True)
    return row


def _ms(v) -> str:
    return "" if v is None else f"{v:.4f}"


def render(runs: list[dict], command: str) -> str:
    warm = [r for r in runs if not r["name"].startswith("fill")]
    lines = [f"# Timing phase at the default settings\n\n{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} "
             f"UTC, {warm[0]['device'] if warm else '?'}; `{command}`\n",
             "| run | wall s | timed | median timing s | of them >= 100 us | their median s | max s | stops | clocks |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in warm:
        lines.append(f"| {r['name']} | {r['wall_s']} | {r['timed']} | {r['median_time_s']} | {r['big']} | "
                     f"{r['median_time_big_s']} | {r['max_time_s']} | {r['stops']} | {r['clocks']} |")
    if warm:
        lines += ["", f"Tasks of {warm[-1]['name']}:", "",
                  "| candidate | status | flags | clock | stop | calls | timing s | ref ms | sol ms |",
                  "|---|---|---|---|---|---|---|---|---|"]
        for x in warm[-1]["tasks"]:
            lines.append(f"| {x['candidate']} | {x['status']} | {' '.join(x['flags'])} | {x['clock'] or ''} | "
                         f"{x['stop'] or ''} | {x['calls'] or ''} | {x['time_s'] or ''} | "
                         f"{_ms(x['ref_ms'])} | {_ms(x['sol_ms'])} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--keep-cache", action="store_true", help="DIR's cache is filled already: no fill run")
    ap.add_argument("--md", type=Path)
    ap.add_argument("--json", type=Path)
    a = ap.parse_args()
    work = a.work.resolve()
    problems, solutions = gpu_scaling.write_set(work)
    command = "python bench/timing_phase.py " + " ".join(sys.argv[1:])
    runs: list[dict] = []

    def save() -> None:  # after every run: a device call cut short keeps what it measured
        tt.write_outputs(render(runs, command), {"command": command, "runs": runs}, a.md, a.json)

    if not (a.keep_cache and (work / "cache").is_dir()):
        shutil.rmtree(work / "cache", ignore_errors=True)
        fill = gpu_scaling.run(problems, solutions, work, "fill", "--gpus", "0")
        runs.append({"name": "fill", "wall_s": fill["wall_s"]})
    for i in range(a.repeats):
        runs.append(warm_run(problems, solutions, work, f"defaults-{i + 1}"))
        save()


if __name__ == "__main__":
    main()
