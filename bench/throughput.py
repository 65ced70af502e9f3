"""Throughput: wall time of kbench over many solution sets, cold and warm.

Solution sets: `--sets` copies of solutions/kbench (four CUDA load_inline
solutions), each file marked with its copy number so that every copy is a
distinct source with its own build; problems: the shipped problems those
solve. Measured, each in a fresh build cache where it says so:

  cold    all sets, empty cache, --build-jobs JOBS (parallel builds)
  warm    the same run again on the cache cold filled
  resume  the warm run again with --resume: nothing changed, nothing re-run
  serial  builds one at a time (--build-jobs 1), empty cache, over the first
          --serial-sets sets; the copies are the same four sources, so the
          time for all sets is that times sets / serial-sets (printed as such)

Per task, the harness's own overhead is the worker's wall time less input
generation, timing and torch.compile (records.TaskResult.overhead_seconds).
Targets (issue: evaluating many solutions fast): cold parallel builds at least
4x faster than one at a time on 16 cores; a warm rerun at least 10x faster
than cold; harness overhead per task under 2 s.

    python bench/throughput.py --stage cold --work DIR   # then --stage warm, --stage serial, --stage report
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = ROOT / "solutions" / "kbench"


def make_sets(work: Path, sets: int) -> Path:
    root = work / "solutions"
    for k in range(sets):
        for src in sorted(SHIPPED.rglob("*.py")):
            dst = root / f"set{k}" / src.relative_to(SHIPPED)
            dst.parent.mkdir(parents=True, exist_ok=True)
            dst.write_text(f"# throughput bench copy {k}: a distinct source, so a distinct build\n" + src.read_text())
    return root


def run(work: Path, name: str, cache: Path, jobs: int, extra: list[str], resume: str | None = None) -> dict:
    out = work / (resume or name)
    where = ["--resume", str(out)] if resume else ["--out", str(out)]
    cmd = [sys.executable, str(ROOT / "cli.py"), "run", "--problems", str(ROOT / "problems"),
           "--solutions", str(work / "solutions"), *where, "--cache-dir", str(cache),
           "--build-jobs", str(jobs), "--exit-zero", *extra]
    t0 = time.monotonic()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    wall = time.monotonic() - t0
    data = json.loads((out / "results.json").read_text())
    summary = {"name": name, "wall_s": round(wall, 1), "build_s": data["run"]["build_seconds"] or 0.0,
               "builds_cached": data["run"]["builds_cached"], "tasks": len(data["results"]),
               "statuses": sorted({r["status"] for r in data["results"]}),
               "overhead_s": [r["overhead_seconds"] for r in data["results"]],
               "per_task": [{"problem": r["problem"], "seconds": round(r["seconds"], 2), "overhead": r["overhead_seconds"],
                             **r["phase_seconds"], **{f"spent:{k}": v for k, v in r["spent_seconds"].items()}}
                            for r in data["results"]]}
    (work / f"{name}.json").write_text(json.dumps(summary, indent=1))
    print(f"{name}: wall {wall:.1f} s, build stage {summary['build_s']:.1f} s "
          f"({summary['builds_cached']} cached), {summary['tasks']} tasks {summary['statuses']}", flush=True)
    return summary


def report(work: Path, sets: int, serial_sets: int) -> None:
    cold, warm, serial, resume = (json.loads((work / f"{n}.json").read_text())
                                  for n in ("cold", "warm", "serial", "resume"))
    serial_all = serial["build_s"] * sets / serial_sets
    over = [x for x in cold["overhead_s"] + warm["overhead_s"] if x is not None]
    print(f"| measure | value | target | met |\n|---|---|---|---|")
    print(f"| cold run, {cold['tasks']} tasks ({sets} sets) | {cold['wall_s']:.1f} s wall, of which builds "
          f"{cold['build_s']:.1f} s | | |")
    print(f"| warm rerun | {warm['wall_s']:.1f} s wall, of which builds {warm['build_s']:.2f} s "
          f"({warm['builds_cached']} cached) | | |")
    print(f"| serial builds, {serial_sets} set(s) measured | {serial['build_s']:.1f} s; x{sets / serial_sets:g} = "
          f"{serial_all:.1f} s for {sets} sets | | |")
    speed = serial_all / cold["build_s"]
    print(f"| parallel vs one-at-a-time builds | {speed:.1f}x | >= 4x | {'yes' if speed >= 4 else 'NO'} |")
    b = cold["build_s"] / max(warm["build_s"], 1e-3)
    print(f"| warm vs cold, build stage | {b:.0f}x | >= 10x | {'yes' if b >= 10 else 'NO'} |")
    w = cold["wall_s"] / warm["wall_s"]
    print(f"| warm vs cold, whole run (every task re-checked and re-timed) | {w:.2f}x | >= 10x | "
          f"{'yes' if w >= 10 else 'NO'} |")
    r = cold["wall_s"] / resume["wall_s"]
    print(f"| warm vs cold, rerun with --resume (nothing changed: {resume['wall_s']:.1f} s) | {r:.0f}x | >= 10x | "
          f"{'yes' if r >= 10 else 'NO'} |")
    print(f"| harness overhead per task | median {statistics.median(over):.2f} s, max {max(over):.2f} s "
          f"(n={len(over)}) | < 2 s | {'yes' if max(over) < 2 else 'NO'} |")
    print("\nWhere a warm task's seconds go (median over the sets, s):\n")
    rows: dict[str, list[dict]] = {}
    for r in warm["per_task"]:
        rows.setdefault(r["problem"], []).append(r)
    keys = sorted({k for r in warm["per_task"] for k in r if k not in ("problem",)})
    print("| problem | " + " | ".join(keys) + " |\n|---|" + "---|" * len(keys))
    for problem, rs in rows.items():
        cells = [statistics.median([r.get(k, 0.0) or 0.0 for r in rs]) for k in keys]
        print(f"| {problem} | " + " | ".join(f"{c:.2f}" for c in cells) + " |")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--stage", choices=["cold", "warm", "resume", "serial", "report", "all"], default="all")
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--sets", type=int, default=8)
    ap.add_argument("--serial-sets", type=int, default=1)
    ap.add_argument("--jobs", type=int, default=16)
    a = ap.parse_args()
    a.work.mkdir(parents=True, exist_ok=True)
    if not (a.work / "solutions").is_dir():
        make_sets(a.work, a.sets)
    if a.stage in ("cold", "all"):
        run(a.work, "cold", a.work / "cache", a.jobs, [])
    if a.stage in ("warm", "all"):
        run(a.work, "warm", a.work / "cache", a.jobs, [])
    if a.stage in ("resume", "all"):
        run(a.work, "resume", a.work / "cache", a.jobs, [], resume="warm")
    if a.stage in ("serial", "all"):
        filters = [x for k in range(a.serial_sets) for x in ("--set", f"set{k}")]
        run(a.work, "serial", a.work / "cache-serial", 1, filters + ["--no-timing"])
    if a.stage in ("report", "all"):
        report(a.work, a.sets, a.serial_sets)


if __name__ == "__main__":
    main()
