"""Calm under load: honest kernels timed while their own run builds beside them, with and without reserved cores.

Issue 30 item 3: on 4 H100s, 65 honest kernels cold with builds alongside got a `timeout` (a Triton JIT past 30 s
beside 60 builds), `timing_mismatch` + `untimed_work` and `contended`. kbench now gives each GPU lane's judge and
candidate cores of their own (harness/run/cores.py; `--no-reserve-cores` turns it off). This bench runs the same
cold set both ways and shows what changes.

The set: bench/accuracy's honest model-style kernels (bench/timing_tasks.py: load_inline on the legacy default
stream, two Triton kernels, the 12_Tanh copies with injected waits), in solution set `models`, plus `--copies - 1`
more sets (`copy2`, ...) of the same files, each with one distinct first line: a distinct build of the same kernel,
so that the run builds `--copies` times as much while its lanes time (the build stage starts them all at once, longest
first, and a lane takes each task as its build ends). Every run is cold: a build cache of its own.

Per mode (`reserve`: kbench's default; `no-reserve`: --no-reserve-cores) and run: the run-level cores line, wall
time, statuses and flags. Per task (a problem and its candidate, over its copies and runs): the statuses and flags
seen, the median speedup and its spread (max/min - 1) and the reference's spread; an alarm is any status but ok or a
gate-failing flag. While each run goes, the processes kbench started are sampled once a second for the CPUs they may
use (/proc/<pid>/status), by role: builds and their compilers, judges, candidates.

    python bench/calm_under_load.py --work DIR [--copies 3] [--runs 1] [--gpus LIST] --md OUT.md --json OUT.json
    python bench/calm_under_load.py --dry-run --work DIR      # write the set and check its files on the CPU

A device call lasts 10 minutes at most and a cold run of the set takes minutes: `--modes reserve` (or `no-reserve`)
runs one mode, and `--append EARLIER.json` carries an earlier command's runs into this one's record, so two commands
make the record of both.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from datetime import datetime, timezone
from pathlib import Path

import timing_tasks as tt

ROOT = tt.ROOT
KBENCH_ARGS = ("--time-budget", "3", "--timeout", "300")
GATE_FLAGS = ("below_roofline", "input_mutation", "tampering", "timing_mismatch", "untimed_work", "contended")
MODES = {"reserve": ("--reserve-cores",), "no-reserve": ("--no-reserve-cores",)}
COPY_LINE = "# calm_under_load: copy {n} of this kernel, a build of its own\n"


def write_set(work: Path, copies: int) -> tuple[Path, Path]:
    """bench/accuracy's set (tt.write_work) as set `models`, and copies 2..`copies` of it as sets copy2, ..."""
    problems, solutions = tt.write_work(work)
    original = solutions / tt.SET
    for n in range(2, copies + 1):
        target = solutions / f"copy{n}"
        for path in sorted(original.rglob("*.py")):
            out = target / path.relative_to(original)
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(COPY_LINE.format(n=n) + path.read_text())
    return problems, solutions


def check_copies(solutions: Path, copies: int) -> list[str]:
    """Each copy is its original with one first line more."""
    original = solutions / tt.SET
    lines = []
    for n in range(2, copies + 1):
        files = sorted(original.rglob("*.py"))
        for path in files:
            copy = solutions / f"copy{n}" / path.relative_to(original)
            assert copy.read_text() == COPY_LINE.format(n=n) + path.read_text(), f"{copy}: not a copy of {path}"
        lines.append(f"set copy{n}: {len(files)} copies of {tt.SET}, one distinct first line each")
    return lines


# -- who runs where, sampled while a run goes ---------------------------------------------------

MODULES = {b"harness.build": "build", b"harness.judge": "judge", b"harness.candidate": "candidate"}
COMPILERS = (b"cc1plus", b"nvcc", b"cicc", b"ptxas", b"ninja", b"c++", b"g++", b"gcc")


def _role(cmdline: bytes) -> str | None:
    """`python -m harness.X`'s role, or "compiler" for a compiler a build runs; None for anything else."""
    args = cmdline.split(b"\0")
    for flag, module in zip(args, args[1:]):
        if flag == b"-m" and module in MODULES:
            return MODULES[module]
    return "compiler" if args and Path(args[0].decode(errors="replace")).name.encode() in COMPILERS else None


def _parents() -> dict[int, int]:
    found = {}
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                found[int(proc.name)] = int((proc / "stat").read_bytes().rsplit(b")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    return found


class Affinities:
    """Once a second: each process under this one whose command line names a kbench role, and the CPUs it may use."""

    def __init__(self):
        self.seen: dict[str, Counter] = defaultdict(Counter)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(5)

    def _loop(self) -> None:
        me = os.getpid()
        while not self._stop.wait(1.0):
            parents = _parents()
            for pid in parents:
                p, hops = parents[pid], 0
                while p not in (me, 0, 1) and hops < 64:  # only what this bench's kbench started
                    p, hops = parents.get(p, 0), hops + 1
                if p != me:
                    continue
                try:
                    role = _role(Path(f"/proc/{pid}/cmdline").read_bytes())
                    if role is None:
                        continue
                    status = Path(f"/proc/{pid}/status").read_text()
                except OSError:
                    continue
                cpus = next((line.split(":", 1)[1].strip() for line in status.splitlines()
                             if line.startswith("Cpus_allowed_list:")), "?")
                self.seen[role][cpus] += 1

    def summary(self) -> dict[str, dict[str, int]]:
        return {role: dict(c.most_common()) for role, c in sorted(self.seen.items())}


# -- one run, and the table --------------------------------------------------------------------

def run_mode(problems: Path, solutions: Path, work: Path, mode: str, k: int, gpus: str | None) -> dict:
    """One cold `kbench run` in `mode`; its results, the log's cores and GPU lines, its wall time and affinities."""
    name = f"{mode}-run{k}"
    cache = work / f"cache-{name}"
    shutil.rmtree(cache, ignore_errors=True)  # cold: every build, the PCH and the task times made anew
    extra = [*KBENCH_ARGS, *MODES[mode], *(("--gpus", gpus) if gpus else ())]
    started = time.monotonic()
    with Affinities() as seen:
        results = tt.run_kbench(problems, solutions, work / name, cache, *extra)
    wall = time.monotonic() - started
    log = (work / f"{name}.log").read_text(errors="replace")
    lines = [line.strip() for line in log.splitlines() if line.strip().startswith(("using ", "cores:"))]
    return {"mode": mode, "run": k, "wall_s": round(wall, 1), "lines": lines, "affinities": seen.summary(),
            "results": results["results"]}


def task_name(row: dict) -> str:
    """The problem, and the candidate's file where the problem has several (12_Tanh's waits)."""
    path = Path(row["solution_path"])
    return f"{row['problem']} [{path.stem}]" if path.parent.name == row["problem"].split("/")[-1] else row["problem"]


def _spread(xs: list[float]) -> float | None:
    xs = [x for x in xs if x]
    return 100 * (max(xs) / min(xs) - 1) if len(xs) > 1 else None


def summarize(runs: list[dict]) -> dict:
    """Per mode: each task's verdicts, speedups and reference times over its copies and runs."""
    out: dict = {}
    for mode in MODES:
        tasks: dict[str, dict] = {}
        for r in (r for r in runs if r["mode"] == mode):
            for row in r["results"]:
                t = tasks.setdefault(task_name(row), {"statuses": Counter(), "flags": Counter(), "speedups": [],
                                                      "ref_ms": [], "alarms": []})
                t["statuses"][row["status"]] += 1
                t["flags"].update(row.get("flags") or [])
                if row.get("speedup"):
                    t["speedups"].append(row["speedup"])
                if row.get("ref_ms"):
                    t["ref_ms"].append(row["ref_ms"])
                gate = sorted(f for f in row.get("flags") or [] if f in GATE_FLAGS)
                if row["status"] != "ok" or gate:
                    t["alarms"].append(f"run {r['run']} {row['solution_set']}: {row['status']}"
                                       f"{' +' + ','.join(gate) if gate else ''}: {(row.get('message') or '')[:240]}")
        for t in tasks.values():
            t["speedup"] = statistics.median(t["speedups"]) if t["speedups"] else None
            t["spread_pct"] = _spread(t["speedups"])
            t["ref_spread_pct"] = _spread(t["ref_ms"])
            t["ref_ms_median"] = statistics.median(t["ref_ms"]) if t["ref_ms"] else None
        out[mode] = tasks
    return out


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.1f}%"


def _verdicts(t: dict | None) -> str:
    if t is None:
        return "missing"
    statuses = " ".join(f"{s} {n}" for s, n in sorted(t["statuses"].items()))
    flags = ",".join(f"{f} {n}" for f, n in sorted(t["flags"].items())) or "-"
    return f"{statuses}; {flags}"


def render(runs: list[dict], summary: dict, device: str, command: str, copies: int) -> str:
    names = sorted({n for tasks in summary.values() for n in tasks},
                   key=lambda n: summary["reserve"].get(n, summary["no-reserve"].get(n, {})).get("ref_ms_median") or 0)
    header = ["task"]
    for mode in MODES:
        header += [f"{mode}: statuses; flags", f"{mode}: speedup (spread)", f"{mode}: ref spread"]
    rows = []
    for n in names:
        cells = [n]
        for mode in MODES:
            t = summary[mode].get(n)
            speed = "-" if not t or t["speedup"] is None else f"{t['speedup']:.3f}x ({_pct(t['spread_pct'])})"
            cells += [_verdicts(t), speed, _pct(t["ref_spread_pct"]) if t else "-"]
        rows.append(cells)
    per_run = []
    for r in runs:
        statuses = Counter(x["status"] for x in r["results"])
        gate = Counter(f for x in r["results"] for f in x.get("flags") or [] if f in GATE_FLAGS)
        per_run.append([f"{r['mode']} {r['run']}", f"{r['wall_s']:.0f} s", len(r["results"]),
                        " ".join(f"{s} {c}" for s, c in sorted(statuses.items())),
                        " ".join(f"{f} {c}" for f, c in sorted(gate.items())) or "-", " / ".join(r["lines"])])
    alarms = {mode: [f"- {n}: {a}" for n, t in sorted(summary[mode].items()) for a in t["alarms"]] for mode in MODES}
    parts = [
        "# Calm under load: reserved cores against none, cold, builds alongside",
        "",
        f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC, {device}; `{command}`; kbench {' '.join(KBENCH_ARGS)}, "
        f"{copies} copies of the set (distinct builds), each run with a cold cache of its own.",
        "",
        tt.md_table(["run", "wall", "tasks", "statuses", "gate flags", "run-level lines"], per_run),
        "",
        "Per task over its copies and runs: the statuses and flags seen (with counts), the median speedup and its "
        "spread (max/min - 1), the reference's spread.",
        "",
        tt.md_table(header, rows),
    ]
    for mode in MODES:
        parts += ["", f"Alarms, {mode} ({len(alarms[mode])}):", *(alarms[mode] or ["- none"])]
    parts += ["", "CPUs the processes kbench started could use, sampled once a second (CPU list: samples):"]
    for r in runs:
        seen = "; ".join(f"{role} " + ", ".join(f"{cpus}: {n}" for cpus, n in c.items())
                         for role, c in r["affinities"].items())
        parts.append(f"- {r['mode']} {r['run']}: {seen or 'none seen'}")
    return "\n".join(parts)


def _device() -> str:
    import torch

    if not torch.cuda.is_available():
        return f"no GPU, torch {torch.__version__}"
    return (f"{torch.cuda.device_count()} x {torch.cuda.get_device_name(0)}, torch {torch.__version__}, "
            f"CUDA {torch.version.cuda}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", type=Path, help="work folder: the set, kbench's runs and build caches "
                                              "[default: a new temporary one]")
    ap.add_argument("--copies", type=int, default=3, help="copies of the set, each a build of its own [3]")
    ap.add_argument("--runs", type=int, default=1, help="cold runs per mode, alternating the modes' order [1]")
    ap.add_argument("--gpus", help="kbench's --gpus [default: every visible GPU]")
    ap.add_argument("--md", type=Path, help="also write the Markdown record here")
    ap.add_argument("--json", type=Path, help="write the raw numbers here")
    ap.add_argument("--modes", default=",".join(MODES), help=f"modes to run, of {', '.join(MODES)} [both]")
    ap.add_argument("--append", type=Path, metavar="EARLIER.json", help="an earlier --json: its runs join this record")
    ap.add_argument("--dry-run", action="store_true", help="write the set and check its files on the CPU; no GPU")
    a = ap.parse_args()
    if a.copies < 1 or a.runs < 1:
        ap.error("--copies and --runs must be at least 1")
    modes = [m.strip() for m in a.modes.split(",") if m.strip()]
    if not modes or set(modes) - set(MODES):
        ap.error(f"--modes: one or more of {', '.join(MODES)}")
    work = (a.work or Path(tempfile.mkdtemp(prefix="kbench-calm-"))).resolve()
    problems, solutions = write_set(work, a.copies)
    if a.dry_run:
        print("\n".join(tt.validate(problems, solutions) + check_copies(solutions, a.copies)))
        tasks = sum(1 for _ in solutions.rglob("*.py"))
        print(f"dry run ok: {tasks} tasks per run in {work}; modes {', '.join(MODES)}")
        return
    earlier = json.loads(a.append.read_text()) if a.append else {}
    runs, commands = earlier.get("runs", []), earlier.get("commands", [])
    for i in range(a.runs):
        for mode in (modes if i % 2 == 0 else list(reversed(modes))):  # neither mode always first
            k = 1 + sum(1 for r in runs if r["mode"] == mode)  # an appended record's runs counted too
            runs.append(run_mode(problems, solutions, work, mode, k, a.gpus))
            print(f"{mode} run {k}: {runs[-1]['wall_s']:.0f} s; {' / '.join(runs[-1]['lines'])}", flush=True)
    summary = summarize(runs)
    commands = [*commands, "python bench/calm_under_load.py " + " ".join(sys.argv[1:])]
    data = {"kbench_args": KBENCH_ARGS, "copies": a.copies, "commands": commands,
            "runs": [{k: v for k, v in r.items() if k != "results"} | {"results": r["results"]} for r in runs],
            "tasks": {mode: {n: {k: (dict(v) if isinstance(v, Counter) else v) for k, v in t.items()}
                             for n, t in tasks.items()} for mode, tasks in summary.items()}}
    tt.write_outputs(render(runs, summary, _device(), "`, then `".join(commands), a.copies), data, a.md, a.json)


if __name__ == "__main__":
    main()
