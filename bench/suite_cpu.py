"""Where the test suite's CPU goes: CPU seconds per test module, kbench's own processes included.

The README's test command is CPU-bound on a 2-core machine (two xdist workers, each
starting kbench runs, builds, judges and candidates), so its wall time falls only with
the CPU work in it. Run as a script, this runs pytest with itself loaded as a plugin:
around each test it adds up the worker's own CPU and that of every child it reaped
(os.times(): kbench runs, their builds, judges and candidates, reaped in turn) into
one JSON line per test, then prints the modules by CPU seconds. Not counted: processes
reaped by init (the detached PCH job) and CPU still running when a test ends.

    python bench/suite_cpu.py [--out /tmp/kbench-suite-cpu] [-- PYTEST ARGS]
    python bench/suite_cpu.py --summary /tmp/kbench-suite-cpu   # the table again

Record in bench/suite_cpu.md: command, date, host, the commit.
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT_ENV = "KBENCH_SUITE_CPU_DIR"


def _cpu() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


try:
    import pytest

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(item, nextitem):
        folder = os.environ.get(OUT_ENV)
        c0, w0 = _cpu(), time.monotonic()
        yield
        if folder:
            with open(Path(folder) / f"{os.getpid()}.jsonl", "a") as f:
                f.write(json.dumps({"id": item.nodeid, "cpu": round(_cpu() - c0, 2),
                                    "wall": round(time.monotonic() - w0, 2)}) + "\n")
except ImportError:  # the summary needs no pytest
    pass


def summary(folder: Path, top: int = 30) -> str:
    """The modules by CPU seconds: CPU, wall (summed over their tests), tests."""
    cpu, wall, count = collections.Counter(), collections.Counter(), collections.Counter()
    for path in sorted(folder.glob("*.jsonl")):
        for line in path.read_text().splitlines():
            row = json.loads(line)
            module = row["id"].split("::")[0]
            cpu[module] += row["cpu"]
            wall[module] += row["wall"]
            count[module] += 1
    lines = [f"{sum(cpu.values()):.0f} CPU-s in {sum(count.values())} tests", "| module | CPU-s | wall s | tests |",
             "|---|---|---|---|"]
    lines += [f"| {m} | {c:.1f} | {wall[m]:.1f} | {count[m]} |" for m, c in cpu.most_common(top)]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=Path("/tmp/kbench-suite-cpu"))
    ap.add_argument("--summary", type=Path)
    ap.add_argument("pytest_args", nargs="*")
    args = ap.parse_args()
    if args.summary:
        print(summary(args.summary))
        return
    args.out.mkdir(parents=True, exist_ok=True)
    for old in args.out.glob("*.jsonl"):
        old.unlink()
    env = {**os.environ, OUT_ENV: str(args.out),
           "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT / "bench"), os.environ.get("PYTHONPATH")) if p)}
    t0 = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "suite_cpu", *args.pytest_args], cwd=ROOT, env=env)
    print(f"[suite_cpu] pytest exited {done.returncode} after {time.monotonic() - t0:.0f} s")
    print(summary(args.out))


if __name__ == "__main__":
    main()
