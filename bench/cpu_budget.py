"""One C++ task on the CPU path at --time-budget 1: how long a warm rerun takes, by phase.

The task of issue 30: a row softmax over 256 x 65536 float32 written as a C++ loop (the
25_judge_evidence honest twin, at this size), against torch.softmax. The first run builds
it (cold), the rest reuse the build (warm); each prints the whole command's wall time, the
task's phase_seconds and its timing's stop rule and sample count.

    python bench/cpu_budget.py [--runs 3] [--budget 1] [--work /tmp/kbench-cpu-budget]

Record in bench/cpu_budget.md: command, date, host, load.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures" / "adversarial"


def write_task(work: Path) -> None:
    problem = (FIXTURES / "problems" / "level1" / "1_Softmax.py").read_text()
    problem = problem.replace("rows, cols = 16, 393216", "rows, cols = 256, 65536")
    assert "256, 65536" in problem
    (work / "problems" / "level1").mkdir(parents=True, exist_ok=True)
    (work / "problems" / "level1" / "1_Softmax.py").write_text(problem)
    solution = (FIXTURES / "cpu" / "25_judge_evidence" / "level1" / "1_Softmax" / "honest.py").read_text()
    (work / "solutions" / "cpp" / "level1").mkdir(parents=True, exist_ok=True)
    (work / "solutions" / "cpp" / "level1" / "1_Softmax.py").write_text(solution)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--budget", type=float, default=1.0)
    ap.add_argument("--work", type=Path, default=Path("/tmp/kbench-cpu-budget"))
    args = ap.parse_args()
    write_task(args.work)
    for k in range(args.runs):
        out = args.work / f"run{k}"
        t0 = time.monotonic()
        subprocess.run([sys.executable, str(ROOT / "cli.py"), "run", "--device", "cpu",
                        "--problems", str(args.work / "problems"), "--solutions", str(args.work / "solutions"),
                        "--cache-dir", str(args.work / "cache"), "--out", str(out),
                        "--time-budget", str(args.budget), "--exit-zero"],
                       check=True, capture_output=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
        wall = time.monotonic() - t0
        r = json.loads((out / "results.json").read_text())["results"][0]
        t = r.get("timing") or {}
        print(f"run {k} ({'cold' if k == 0 else 'warm'}): wall {wall:.1f} s, task {r['seconds']:.1f} s, "
              f"status {r['status']}, stop {t.get('stop_reason')}, pairs {(t.get('sol') or {}).get('n')}, "
              f"speedup {t.get('speedup')}; load {os.getloadavg()[0]:.1f}", flush=True)
        print(f"  phase_seconds {r.get('phase_seconds')}", flush=True)


if __name__ == "__main__":
    main()
