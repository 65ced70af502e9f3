"""Timing reproducibility: the same solutions measured in separate kbench runs.

For each task, the spread of its speedup, max/min - 1. Targets (issue: timing
that holds up): at most 2% for tasks of 100 us or more, at most 5% for 10-100 us.

With --copies N, each run holds N identical copies of the solution set (one
build: same content), so the spread within one run is measured too, and the
table says which side moved: the reference's or the solution's median.

    python bench/timing_repro.py --runs 3 --copies 4
    python bench/timing_repro.py --runs 3 --source tests/fixtures/adversarial/cuda/00_legit \
        -- --problems tests/fixtures/adversarial/problems --time-budget 5
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def make_copies(source: Path, root: Path, copies: int) -> None:
    for k in range(copies):
        for src in sorted(source.rglob("*.py")):
            dst = root / f"copy{k}" / src.relative_to(source)
            dst.parent.mkdir(parents=True, exist_ok=True)
            dst.write_bytes(src.read_bytes())  # byte-identical: one build serves every copy


def spread(values: list[float]) -> float:
    return max(values) / min(values) - 1


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--copies", type=int, default=1, help="identical copies of the set in each run")
    ap.add_argument("--source", type=Path, default=ROOT / "solutions" / "kbench", help="the solution set to measure")
    ap.add_argument("--work", type=Path, help="scratch folder [default: a new temporary one]")
    ap.add_argument("kbench_args", nargs=argparse.REMAINDER, help="arguments after -- go to kbench run")
    a = ap.parse_args()
    args = [x for x in a.kbench_args if x != "--"]
    if "--problems" not in args:
        args += ["--problems", str(ROOT / "problems")]
    work = a.work or Path(tempfile.mkdtemp(prefix="kbench-repro-"))
    make_copies(a.source, work / "solutions", a.copies)
    # task -> run -> [(speedup, ref ms, sol ms) per copy]
    seen: dict[str, list[list[tuple[float, float, float]]]] = {}
    for i in range(a.runs):
        out = work / f"run{i}"
        subprocess.run([sys.executable, str(ROOT / "cli.py"), "run", "--solutions", str(work / "solutions"), *args,
                        "--out", str(out), "--exit-zero"], check=True, stdout=subprocess.DEVNULL)
        for r in json.loads((out / "results.json").read_text())["results"]:
            key = f"{r['problem']} [{Path(r['solution_path']).name}]"
            runs = seen.setdefault(key, [[] for _ in range(a.runs)])
            if r["speedup"] is not None:
                runs[i].append((r["speedup"], r["ref_ms"], r["sol_ms"]))
    prestart = os.environ.get("KBENCH_PRESTART", "default")
    print(f"{a.runs} runs x {a.copies} copies of {os.path.relpath(a.source)}; KBENCH_PRESTART={prestart}; "
          f"kbench run {' '.join(args)}\n")
    print("| task | sol ms | speedups (copies of a run between /) | within a run | across runs | ref ms | sol ms | "
          "target | met |")
    print("|---|---|---|---|---|---|---|---|---|")
    for key, runs in seen.items():
        every = [x for run in runs for x in run]
        if not every:
            print(f"| {key} | - | no speedup | - | - | - | - | - | NO |")
            continue
        sol_ms = sorted(x[2] for x in every)[len(every) // 2]
        within = max((spread([x[0] for x in run]) for run in runs if run), default=0.0)
        # Across runs: one value per run (its copies' median), as a user rerunning kbench would see it.
        per_run = [sorted(x[0] for x in run)[len(run) // 2] for run in runs if run]
        across = spread(per_run)
        target = 0.02 if sol_ms >= 0.1 else 0.05
        met = max(within, across) <= target and all(len(run) == a.copies for run in runs)
        text = " / ".join(", ".join(f"{x[0]:.3f}" for x in run) for run in runs)
        print(f"| {key} | {sol_ms:.4f} | {text} | {within:.2%} | {across:.2%} | {spread([x[1] for x in every]):.2%} | "
              f"{spread([x[2] for x in every]):.2%} | {target:.0%} | {'yes' if met else 'NO'} |")
    print("\n(within a run: the largest max/min - 1 among one run's copies; across runs: max/min - 1 of the runs' "
          "medians; ref ms and sol ms: max/min - 1 of that side's median over every copy of every run)")


if __name__ == "__main__":
    main()
