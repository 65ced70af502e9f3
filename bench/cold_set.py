"""Cold-run wall time of a set of model-style candidates, one kbench checkout against another.

The set: bench/timing_tasks.py's 15 candidates (load_inline with verbose=True,
legacy-stream launches, zeros_like outputs, Triton with autotune, a many-op eager
reference) and the 5 of bench/cold_set/extra, written as models get them wrong
or right: one hangs (a hand-rolled grid barrier that deadlocks), one crashes (an
illegal address), one does not compile, one is incorrect, one is a correct
atomicAdd reduction into a zeros output. 20 candidates over 12 problems.

Each checkout runs the same set with an empty build cache of its own, the same
options, one after the other on the same machine:

    python bench/cold_set.py --work DIR --root old=/path/to/old/checkout --root new=. --md OUT.md --json OUT.json
    python bench/cold_set.py --work DIR --root old=PATH --json old.json   # one checkout per call, then
    python bench/cold_set.py --work DIR --merge old.json new.json --md OUT.md
    python bench/cold_set.py --work DIR --dry-run        # write the set and check it on the CPU

Reported per checkout: the wall time of `kbench run`, its build stage, the seconds
of the hung task, and each task's status; then whether the verdicts agree.
"""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import timing_tasks as tt

EXTRA = Path(__file__).resolve().parent / "cold_set" / "extra"
# A short time budget: the set measures builds, scheduling and hang handling, not timing precision.
KBENCH_ARGS = ("--time-budget", "2", "--timeout", "120", "--exit-zero")


def write_set(work: Path) -> tuple[Path, Path]:
    problems, solutions = tt.write_work(work)
    shutil.copytree(EXTRA, solutions / "extra")
    return problems, solutions


def expected(path: Path) -> str:
    """The first line of an extra candidate says what it should get ('# Expected: ...')."""
    first = path.read_text().splitlines()[0]
    return first.split(":", 1)[1].split(".")[0].split(" (")[0].strip() if first.startswith("# Expected:") else "ok"


def run(root: Path, name: str, problems: Path, solutions: Path, work: Path) -> dict:
    out, cache = work / name / "run", work / name / "cache"
    shutil.rmtree(work / name, ignore_errors=True)
    cache.mkdir(parents=True)
    cmd = [sys.executable, str(root / "cli.py"), "run", "--problems", str(problems), "--solutions", str(solutions),
           "--out", str(out), "--cache-dir", str(cache), *KBENCH_ARGS]
    log = work / name / "kbench.log"
    at = f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC"
    t0 = time.monotonic()
    with open(log, "w") as f:
        done = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, cwd=root)
    wall = time.monotonic() - t0
    if done.returncode != 0 or not (out / "results.json").is_file():
        raise SystemExit(f"{name}: kbench run failed (exit {done.returncode}); see {log}")
    data = json.loads((out / "results.json").read_text())
    tasks = {Path(r["solution_path"]).resolve().relative_to(solutions.resolve()).as_posix():
             {"status": r["status"], "seconds": r.get("seconds"), "message": (r.get("message") or "")[:200]}
             for r in data["results"]}
    hung = [t["seconds"] for t in tasks.values() if t["status"] == "timeout"]
    print(f"[cold_set] {name}: {wall:.1f} s wall, {len(tasks)} tasks", flush=True)
    return {"root": str(root), "at": at, "wall_s": round(wall, 1), "build_s": data["run"].get("build_seconds"),
            "hang_s": hung[0] if hung else None, "tasks": tasks}


def render(runs: dict, solutions: Path, command: str, device: str) -> str:
    names = list(runs)
    keys = sorted({k for r in runs.values() for k in r["tasks"]})
    rows = [[name, r.get("at", "-"), f"{r['wall_s']:.1f}", "-" if r["build_s"] is None else f"{r['build_s']:.1f}",
             "-" if r["build_s"] is None else f"{r['wall_s'] - r['build_s']:.1f}",
             "-" if r["hang_s"] is None else f"{r['hang_s']:.1f}",
             ", ".join(f"{s} {n}" for s, n in sorted(_counts(r).items()))] for name, r in runs.items()]
    lines = [
        "# Cold runs of 20 model-style candidates: one checkout against another",
        "",
        f"{device}; `{command}`.",
        f"Options for every checkout: `{' '.join(KBENCH_ARGS)}`, an empty build cache each.",
        "",
        tt.md_table(["checkout", "started", "wall s", "build stage s", "after the builds s",
                     "hung task s (its build and its run)", "statuses"], rows),
        "",
    ]
    for b in names[1:]:
        a = names[0]
        ratio = runs[b]["wall_s"] / runs[a]["wall_s"]
        lines += [f"**{b} / {a} wall time: {ratio:.2f}** (target: at most 0.5)."]
    lines += [""]
    differ = [k for k in keys if len({r["tasks"].get(k, {}).get("status") for r in runs.values()}) > 1]
    lines += [tt.md_table(["candidate", "declared", *names],
                          [[k, expected(solutions / k), *(r["tasks"].get(k, {}).get("status", "-") for r in runs.values())]
                           for k in keys]), "",
              f"Verdicts that differ between checkouts: {len(differ)}" + (f" ({', '.join(differ)})" if differ else "")]
    return "\n".join(lines)


def _counts(r: dict) -> dict:
    counts: dict[str, int] = {}
    for t in r["tasks"].values():
        counts[t["status"]] = counts.get(t["status"], 0) + 1
    return counts


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--root", action="append", default=[], metavar="NAME=PATH",
                    help="a kbench checkout to run (repeat; in order) [default: new=this checkout]")
    ap.add_argument("--md", type=Path)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--dry-run", action="store_true", help="write the set and check it on the CPU; no GPU")
    ap.add_argument("--merge", type=Path, nargs="+", metavar="JSON",
                    help="render the runs of earlier --json files (one checkout each: a device call may not fit two)")
    a = ap.parse_args()
    work = a.work.resolve()
    problems, solutions = write_set(work)
    if a.merge:
        loaded = [json.loads(p.read_text()) for p in a.merge]
        runs = {name: r for d in loaded for name, r in d["runs"].items()}
        command = " and ".join(d["command"] for d in loaded)
        tt.write_outputs(render(runs, solutions, command, loaded[0]["device"]), {"merged": [str(p) for p in a.merge]},
                         a.md, None)
        return
    if a.dry_run:
        lines = tt.validate(problems, solutions)
        for sol in sorted((solutions / "extra").rglob("*.py")):
            problem = problems / sol.relative_to(solutions / "extra")
            lines.append(f"  extra {sol.relative_to(solutions)}: {tt.check_solution(sol, problem)}; declared {expected(sol)}")
        count = sum(1 for _ in solutions.rglob("*.py"))
        assert count >= 20, f"only {count} candidates"
        print("\n".join(lines) + f"\n{count} candidates; dry run ok: files in {work}")
        return
    roots = [r.split("=", 1) for r in a.root] or [["new", str(tt.ROOT)]]
    runs = {name: run(Path(path).resolve(), name, problems, solutions, work) for name, path in roots}
    import torch

    device = f"{torch.cuda.get_device_name(0)}, torch {torch.__version__}"
    command = "python bench/cold_set.py " + " ".join(sys.argv[1:])
    tt.write_outputs(render(runs, solutions, command, device),
                     {"kbench_args": KBENCH_ARGS, "runs": runs, "command": command, "device": device}, a.md, a.json)


if __name__ == "__main__":
    main()
