"""What saving one finished task costs as a run grows: the run folder's store
(results.jsonl, one line appended per task) against rewriting results.json,
results.csv and report.md whole after every task (kbench before the store).

Each task is a timed result as a GPU run writes it (500 raw samples per side, a
check, a log path). No GPU, no kbench run: only the saving is timed.

    python bench/store_cost.py [--tasks 10000] [--work /tmp/store-cost]
"""
from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness.report import write as report, store  # noqa: E402
from harness.report.gate import GatePolicy  # noqa: E402
from harness.records import CheckResult, RunInfo, RunResults, SideTiming, Status, TaskResult, Timing


def timed_result(i: int) -> TaskResult:
    side = lambda ms: SideTiming(ms, ms * 0.01, 500, tuple(ms + k * 1e-6 for k in range(500)))  # noqa: E731
    timing = Timing(ref=side(2.0), sol=side(1.0), speedup=2.0, speedup_ci=(1.98, 2.02), clock="cuda_burst",
                    stop_reason="converged", calls_per_batch=8, fixed_ms=0.11, ref_fixed_ms=0.03, floor_ms=0.5,
                    bytes_moved=10**9)
    return TaskResult(problem="level1/23_Softmax", solution_set="model",
                      solution_path=f"solutions/model/level1/23_Softmax/sample_{i:05d}.py", status=Status.OK, message="",
                      ref_ms=2.0, sol_ms=1.0, speedup=2.0, phase="done", seconds=12.0, log_path=f"logs/{i}.log",
                      check=CheckResult(True, "", 6, 1e-6, 1e-5, 1e-7, 1e-7, 1e-8, 1e-5), timing=timing,
                      fingerprint="0" * 20, problem_sha256="ab" * 32)


def info() -> RunInfo:
    return RunInfo("bench", "0", "NVIDIA H100 80GB HBM3", "2.11", "13.0", {"trials": 5}, "2026-01-01T00:00:00+00:00")


def store_costs(folder: Path, n: int) -> list[float]:
    """Seconds of each append, task 1 to n."""
    results = [timed_result(i) for i in range(n)]
    costs = []
    with store.ResultStore.create(folder, info(), [r.key for r in results], ()) as s:
        for r in results:
            t0 = time.perf_counter()
            s.append(r)
            costs.append(time.perf_counter() - t0)
    return costs


def rewrite_cost(folder: Path, k: int) -> float:
    """Seconds of one save at task k the old way: every file rewritten with k tasks."""
    run = RunResults(info(), tuple(timed_result(i) for i in range(k)))
    t0 = time.perf_counter()
    report.write_all(run, folder, GatePolicy())
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=10_000)
    ap.add_argument("--work", type=Path, default=None)
    args = ap.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="store-cost-"))
    work.mkdir(parents=True, exist_ok=True)
    n = args.tasks
    costs = store_costs(work, n)
    size = (work / store.STORE_NAME).stat().st_size
    t0 = time.perf_counter()
    back = report.load_run(work)
    read_s = time.perf_counter() - t0
    assert len(back.results) == n
    first, last = costs[: min(1000, n)], costs[-min(1000, n):]
    print(f"store: {n} appends, {size / 1e6:.1f} MB; median append {statistics.median(first) * 1e3:.2f} ms "
          f"over tasks 1-{len(first)}, {statistics.median(last) * 1e3:.2f} ms over the last {len(last)}; "
          f"max {max(costs) * 1e3:.1f} ms; read back in {read_s:.1f} s")
    for k in (100, 1000):
        print(f"rewrite: one save at task {k}: {rewrite_cost(work / f'rewrite-{k}', k):.2f} s")
    t0 = time.perf_counter()
    report.write_all(back, work, GatePolicy())
    print(f"end of run: results.json, results.csv and report.md for {n} tasks, written once: "
          f"{time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()
