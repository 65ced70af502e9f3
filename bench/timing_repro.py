"""Timing reproducibility: the same solutions measured in separate kbench runs.

For each task, the spread of its speedup over the runs, max/min - 1. Targets
(issue: timing that holds up): at most 2% for tasks of 100 us or more, at most
5% for 10-100 us.

    python bench/timing_repro.py --runs 3 -- --solutions solutions --set kbench
"""
import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("kbench_args", nargs=argparse.REMAINDER, help="arguments after -- go to kbench run")
    a = ap.parse_args()
    args = [x for x in a.kbench_args if x != "--"]
    speedups: dict[str, list[float]] = {}
    sol_ms: dict[str, float] = {}
    for i in range(a.runs):
        out = Path(tempfile.mkdtemp()) / f"run{i}"
        subprocess.run([sys.executable, str(ROOT / "cli.py"), "run", *args, "--out", str(out), "--exit-zero"],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for r in json.loads((out / "results.json").read_text())["results"]:
            if r["speedup"] is not None:
                key = f"{r['problem']} [{r['solution_set']}/{Path(r['solution_path']).name}]"
                speedups.setdefault(key, []).append(r["speedup"])
                sol_ms[key] = r["sol_ms"]
    print(f"| task | sol ms | speedups over {a.runs} runs | max/min - 1 | target | met |")
    print("|---|---|---|---|---|---|")
    for key, s in speedups.items():
        spread = max(s) / min(s) - 1
        target = 0.02 if sol_ms[key] >= 0.1 else 0.05
        print(f"| {key} | {sol_ms[key]:.4f} | {', '.join(f'{x:.3f}' for x in s)} | {spread:.2%} | {target:.0%} | "
              f"{'yes' if spread <= target and len(s) == a.runs else 'NO'} |")


if __name__ == "__main__":
    main()
