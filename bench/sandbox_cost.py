"""What confining a build costs (issue 31: at most 1 s per build).

A build process now confines itself before it imports torch (harness/shared/sandbox.confine:
Landlock rules for its own folder and the device files, every capability dropped), and
kbench hashes every file of each build's extensions folder when it records the build and
again before each use (harness/build/stage.py, intact). This measures both:

- confine: seconds inside a fresh child from before confine() to after it, median of 20
  children (the child's start is not counted: it is the same with or without);
- record and check: intact() on a real build of each --solutions file (built once here
  through kbench's own build stage, confined), median of 20, with the folder's size;
- the build itself, wall seconds, as the build stage reports it.

    python bench/sandbox_cost.py --device cpu --solutions tests/fixtures/doors/solutions/victims/level1/1_Softmax/honest_cpp.py
    python bench/sandbox_cost.py --device cuda --solutions FILE [FILE ...] --json OUT.json
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

CHILD = """
import sys, time
from harness.shared import sandbox  # imported by every build process with or without the sandbox
t0 = time.perf_counter()
desc = sandbox.confine([sys.argv[1]], "bench")
print(time.perf_counter() - t0, bool(desc))
"""


def confine_seconds(runs: int) -> tuple[float, bool]:
    times, confined = [], True
    with tempfile.TemporaryDirectory() as d:
        for _ in range(runs):
            out = subprocess.run([sys.executable, "-c", CHILD, d], capture_output=True, text=True, check=True,
                                 env={**os.environ, "PYTHONPATH": str(ROOT)}).stdout.split()
            times.append(float(out[-2]))
            confined &= out[-1] == "True"
    return statistics.median(times), confined


def build_and_check(solution: Path, device: str, cache: Path, runs: int) -> dict:
    from harness.build import BuildConfig, build_all, intact
    from harness.records import Task

    arch = ""
    if device == "cuda":
        import torch

        arch = "{}.{}".format(*torch.cuda.get_device_capability(0))
    task = Task("bench", str(ROOT / "tests/fixtures/doors/problems/level1/1_Softmax.py"), "bench", str(solution))
    t0 = time.monotonic()
    result = build_all([task], BuildConfig(device, arch, cache / "builds", 16, 900.0))[task.key]
    wall = time.monotonic() - t0
    ext = Path(result.ext_dir)
    files = [p for p in ext.rglob("*") if p.is_file()]
    checks = []
    for _ in range(runs):
        c0 = time.perf_counter()
        ok = intact(str(ext))
        checks.append(time.perf_counter() - c0)
    return {"solution": str(solution.relative_to(ROOT)) if solution.is_relative_to(ROOT) else str(solution),
            "status": "ok" if result.ok else result.status.value, "build_wall_s": round(wall, 1),
            "files": len(files), "mb": round(sum(p.stat().st_size for p in files) / 1e6, 2),
            "intact": ok, "check_ms": round(statistics.median(checks) * 1e3, 2)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument("--solutions", nargs="+", type=Path, required=True)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--json", type=Path)
    a = ap.parse_args()
    confine_s, confined = confine_seconds(a.runs)
    print(f"confine: {confine_s * 1e3:.2f} ms median of {a.runs} children (confined: {confined})", flush=True)
    rows = []
    with tempfile.TemporaryDirectory() as cache:
        for solution in a.solutions:
            row = build_and_check(solution.resolve(), a.device, Path(cache), a.runs)
            rows.append(row)
            print(f"{row['solution']}: {row['status']}, built in {row['build_wall_s']} s; {row['files']} files, "
                  f"{row['mb']} MB; record check {row['check_ms']} ms (intact: {row['intact']})", flush=True)
    result = {"confine_ms": round(confine_s * 1e3, 3), "confined": confined, "device": a.device, "rows": rows,
              "command": " ".join(sys.argv)}
    if a.json:
        a.json.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
