"""Where a whole run's seconds went: the run's own phases (results.json's
run.phase_seconds: kbench's start, device, discovery, problem sizes, bandwidth,
build cache, the wait for the first judge, the tasks, ...) and its tasks' phases
summed (judge start and handoff, load, check, time, profile, teardown, ...).

    python bench/run_phases.py RESULTS.json [RESULTS.json ...] [--wall S ...]

`--wall`: the wall time of each `kbench run` as measured around it, so that the
part after `until_reports` (writing the reports, exiting) shows too.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

# The run's phases in the order they happen (others, if any, follow in their own order).
RUN_ORDER = ("start", "device", "discovery", "resume", "run_folder", "executor", "dask_cluster", "bandwidth",
             "build_toolchain", "build_cache_check", "problem_sizes", "problem_sizes_wait", "first_task_wait",
             "tasks", "executor_close", "until_reports")


def summarize(data: dict, wall: float | None = None) -> dict:
    """{"run": phases, "tasks": summed task phases, "spent": summed parts of them,
    "n": tasks, "wall": wall, "after_reports": wall less until_reports}."""
    run = dict(data["run"].get("phase_seconds") or {})
    tasks: dict[str, float] = {}
    spent: dict[str, float] = {}
    for r in data["results"]:
        for into, what in ((tasks, r.get("phase_seconds")), (spent, r.get("spent_seconds"))):
            for name, seconds in (what or {}).items():
                if isinstance(seconds, (int, float)):
                    into[name] = into.get(name, 0.0) + seconds
    after = round(wall - run["until_reports"], 3) if wall is not None and "until_reports" in run else None
    return {"run": run, "tasks": {k: round(v, 3) for k, v in tasks.items()},
            "spent": {k: round(v, 3) for k, v in spent.items()}, "n": len(data["results"]), "wall": wall,
            "after_reports": after}


def ordered(phases: dict) -> list[str]:
    return [k for k in RUN_ORDER if k in phases] + sorted(k for k in phases if k not in RUN_ORDER)


def render(summaries: dict[str, dict]) -> str:
    """One markdown table of run phases and one of summed task phases, a column per run."""
    names = list(summaries)
    lines = ["| run phase (s) | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    keys = ordered({k: 0 for s in summaries.values() for k in s["run"]})
    for key in keys:
        lines.append(f"| {key} | " + " | ".join(_s(summaries[n]["run"].get(key)) for n in names) + " |")
    lines.append("| reports and exit (wall less until_reports) | "
                 + " | ".join(_s(summaries[n]["after_reports"]) for n in names) + " |")
    lines.append("| **wall** | " + " | ".join(_s(summaries[n]["wall"]) for n in names) + " |")
    lines += ["", "| tasks' phases, summed (s) | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    for key in sorted({k for s in summaries.values() for k in s["tasks"]}):
        lines.append(f"| {key} | " + " | ".join(_s(summaries[n]["tasks"].get(key)) for n in names) + " |")
    lines.append("| tasks | " + " | ".join(str(summaries[n]["n"]) for n in names) + " |")
    return "\n".join(lines)


def _s(x) -> str:
    return "-" if x is None else f"{x:.2f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results", type=Path, nargs="+")
    ap.add_argument("--wall", type=float, nargs="*", default=[])
    a = ap.parse_args()
    walls = a.wall + [None] * (len(a.results) - len(a.wall))
    summaries = {str(p): summarize(json.loads(p.read_text()), w) for p, w in zip(a.results, walls)}
    print(render(summaries))


if __name__ == "__main__":
    main()
