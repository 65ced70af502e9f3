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

The run on every GPU passes no --gpus (a bare `kbench run` must use them all); its
first line, which names the GPUs, is kept in the record.

    python bench/gpu_scaling.py --work DIR [--gpus 1,2,4] [--repeats 3] [--no-dask] --md OUT.md --json OUT.json
    python bench/gpu_scaling.py --work DIR --keep-cache ...   # more repeats on DIR's filled cache, no fill run
    python bench/gpu_scaling.py --work DIR --dry-run     # write the set and check it on the CPU

A device call lasts 10 minutes at most: `--budget-s S` starts no run that would end
past S seconds (judged by the longest run of its kind so far), and `--append
EARLIER.json` carries an earlier command's runs over and runs only those still
missing, so the same command, repeated, completes the record (each fresh machine
fills its cache first: a run named fill-N).
"""
from __future__ import annotations

import argparse
import datetime
import json
import re
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
    out.parent.mkdir(parents=True, exist_ok=True)  # the log sits beside the run's folder
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
    first = next((line.strip() for line in out.with_suffix(".log").read_text().splitlines() if line.strip()), "")
    print(f"[gpu_scaling] {name}: {wall:.1f} s wall, {len(verdicts)} tasks, {dict(gpus)}", flush=True)
    # Per task, what the next diagnosis needs: its lane, its seconds there, its phases (handoff
    # among them) and the message that gives its flags' reasons (a flag that differs between runs says why here).
    tasks = {Path(r["solution_path"]).resolve().relative_to(solutions.resolve()).as_posix():
             {"gpu": r.get("gpu"), "seconds": r.get("seconds"), "phases": r.get("phase_seconds") or {},
              "message": (r.get("message") or "")[:600], "judge": judge_start(r.get("log_path"))}
             for r in data["results"]}
    return {"name": name, "args": list(extra), "wall_s": round(wall, 2), "verdicts": verdicts, "gpus": dict(gpus),
            "tasks": tasks,
            "phases": run_phases.summarize(data, wall), "device": data["run"]["device"], "first_line": first,
            "date": datetime.date.today().isoformat()}


JUDGE_LINE = re.compile(r"this judge's start: (?:(forked from a template|exec), )?imports done at ([\d.]+) s, (?:told it is next at ([\d.]+) s, "
                        r"ready at ([\d.]+) s \([\d.]+ s\)|not told it is next), its spec read at ([\d.]+) s")


def judge_start(log_path: str | None) -> dict | None:
    """The task's judge's start, from the line it writes in the task's log (judge/main.py):
    seconds from the judge's own start to its imports done, to being told it is next, to
    its GPU context made, and to its spec, and whether it was forked from a template;
    None where the task had no judge."""
    try:
        text = Path(log_path).read_text(errors="replace") if log_path else ""
    except OSError:
        return None
    m = JUDGE_LINE.search(text)
    if not m:
        return None
    how, *times = m.groups()
    names = ("imported", "told_next", "prepared", "spec")
    return {**{k: float(v) for k, v in zip(names, times) if v is not None}, **({"forked": how.startswith("forked")} if how else {})}


def judge_waits(run: dict, over_s: float = 1.0) -> str:
    """One line: the tasks whose spec waited more than `over_s` for its judge, and when
    those judges were ready, from their own start."""
    waited = [t for t in run["tasks"].values() if (t["phases"].get("judge_wait") or 0) > over_s]
    if not waited:
        return f"- {run['name']}: no task waited more than {over_s:g} s for its judge"
    ready = sorted(t["judge"].get("prepared", t["judge"]["spec"]) for t in waited if t.get("judge"))
    imported = sorted(t["judge"]["imported"] for t in waited if t.get("judge"))
    said = (f"; their judges' imports done at {imported[0]:.1f}-{imported[-1]:.1f} s and ready at "
            f"{ready[0]:.1f}-{ready[-1]:.1f} s from their start") if ready else ""
    return (f"- {run['name']}: {len(waited)} tasks waited more than {over_s:g} s for their judge, "
            f"{sum(t['phases']['judge_wait'] for t in waited):.1f} s in all{said}")


def render(runs: list[dict], counts: list[int], command: str) -> str:
    warm = [r for r in runs if not r["name"].startswith("fill")]
    by_count = {n: [r["wall_s"] for r in warm if r["name"].startswith(f"{n}gpu-")] for n in counts}
    dask = [r["wall_s"] for r in warm if r["name"].startswith("dask-")]
    if not runs:
        return "# Warm reruns: no run finished"
    lines = [f"# Warm reruns on {'/'.join(map(str, counts))} GPUs ({runs[0]['device']})", "", f"`{command}`; kbench options "
             f"`{' '.join(KBENCH_ARGS)}`; the first run (fill) builds, every other run finds every build cached.", ""]
    rows = [[r["name"], r.get("date", "?"), f"{r['wall_s']:.1f}",
             ", ".join(f"GPU {k}: {v}" for k, v in sorted(r["gpus"].items()))] for r in runs]
    lines += [tt.md_table(["run", "date", "wall s", "tasks per GPU"], rows), ""]
    bare = [r for r in runs if r.get("first_line") and not r["args"]]
    if bare:
        lines += [f"A bare run's first line: `{bare[-1]['first_line']}`", ""]
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
    lines += ["", "Waits for judges (each judge's start line in its task's log):", "",
              *(judge_waits(r) for r in warm if r.get("tasks"))]
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
    ap.add_argument("--budget-s", type=float, default=float("inf"), help="start no run that would end past this")
    ap.add_argument("--append", type=Path, metavar="EARLIER.json", help="carry an earlier record's runs over")
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
    runs = json.loads(a.append.read_text())["runs"] if a.append and a.append.is_file() else []
    done = {r["name"] for r in runs}
    planned = []
    for i in range(a.repeats):
        planned += [(f"{n}gpu-{i + 1}", gpu_args(n, have)) for n in counts]
        if not a.no_dask:
            planned.append((f"dask-{i + 1}", ("--executor", "dask", "--dask-workers", str(max(counts)))))
    todo = [(name, args) for name, args in planned if name not in done]
    command = "python bench/gpu_scaling.py " + " ".join(sys.argv[1:])

    def save(quiet: bool = True) -> None:  # after every run: a command cut short keeps what it measured
        missing = [name for name, _ in planned if name not in {r["name"] for r in runs}]
        text = render(runs, counts, command) + (f"\n\nNot run yet: {', '.join(missing)}" if missing else "")
        data = {"command": command, "runs": runs, "missing": missing}
        if quiet:
            for path, body in ((a.md, text + "\n"), (a.json, json.dumps(data, indent=1, default=str) + "\n")):
                if path:
                    path.parent.mkdir(parents=True, exist_ok=True)
                    path.write_text(body)
        else:
            tt.write_outputs(text, data, a.md, a.json)

    t0 = time.monotonic()
    try:
        if todo and not (a.keep_cache and (work / "cache").is_dir()):
            shutil.rmtree(work / "cache", ignore_errors=True)
            fills = sum(1 for r in runs if r["name"].startswith("fill"))
            runs.append(run(problems, solutions, work, "fill" if not fills else f"fill-{fills + 1}",
                            *gpu_args(max(counts), have)) | {"command": command})
            save()
        for name, args in todo:
            if time.monotonic() - t0 + expected_wall(name, runs) > a.budget_s:
                print(f"[gpu_scaling] stopping before {name}: it would end past --budget-s {a.budget_s:.0f}; "
                      "run the same command with --append to add it", flush=True)
                break
            runs.append(run(problems, solutions, work, name, *args) | {"command": command})
            save()
    finally:
        save(quiet=False)


def expected_wall(name: str, runs: list[dict]) -> float:
    """A run's wall time to come: the longest of its kind so far, else the longest warm
    run, else most of a fill's (on one H100 the set took 230 s cold and 145 s warm)."""
    kind = name.split("-")[0]
    same = [r["wall_s"] for r in runs if r["name"].split("-")[0] == kind]
    warm = [r["wall_s"] for r in runs if not r["name"].startswith("fill")]
    fills = [r["wall_s"] for r in runs if r["name"].startswith("fill")]
    return max(same or warm or [0.6 * f for f in fills] or [0.0])


def gpu_args(n: int, have: int) -> tuple[str, ...]:
    """Every GPU: no flag (a bare run must use them all); fewer: --gpus 0..n-1."""
    return () if n == have else ("--gpus", ",".join(map(str, range(n))))


if __name__ == "__main__":
    main()
