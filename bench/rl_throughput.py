"""Throughput for the RL use: a batch of model-style candidates through `harness.Session`.

A training step hands kbench a batch of sampled kernels and waits for their rewards.
This feeds a Session (README, "From Python: a reward function") `--candidates`
candidates from bench/rl_candidates.py (about half fail to build, fail at import,
crash, hang or are wrong, as generations do) in one `evaluate_many` call, on each
GPU count given, each with an empty build cache (new kernels: every build is
compiled: the cache's builds are emptied, and each GPU count gets samples of its own,
so nothing is reused across them but what a host keeps for every build: the device's
bandwidth, the precompiled header, ccache's objects of shared host files), and
reports per GPU count:

- kernels per hour (candidates / batch wall time) and per GPU-hour;
- batch latency: submit to the last reward, and when half and 90% had theirs;
- the share of GPU time spent timing (the tasks' `timing` seconds over wall x GPUs);
- statuses, and candidates whose status is not the one their outcome declares.

    python bench/rl_throughput.py --work DIR [--gpus 1,2,4] [--candidates 200] --md OUT.md --json OUT.json
    python bench/rl_throughput.py --work DIR --device cpu --candidates 10    # a smoke test's scale
    python bench/rl_throughput.py --work DIR --gpus 1 --warm                 # again on the filled cache
"""
from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import time
from collections import Counter
from concurrent.futures import as_completed
from pathlib import Path

import rl_candidates

sys.path.insert(0, str(rl_candidates.ROOT))  # this checkout's harness


def run_batch(candidates: list, device: str, gpus: int, cache: Path, options: dict) -> dict:
    import harness

    problems = {c.problem_path: Path(c.problem_path).read_text() for c in candidates}
    t0 = time.monotonic()
    with harness.Session("local", device=device, gpus=tuple(range(gpus)) if device == "cuda" else (),
                         cache_dir=cache, **options) as session:
        futures = session.evaluate_many([(problems[c.problem_path], c.source) for c in candidates])
        index = {f: i for i, f in enumerate(futures)}
        done_at: list[float] = []
        results: list = [None] * len(candidates)
        for f in as_completed(futures):
            results[index[f]] = f.result()
            done_at.append(time.monotonic() - t0)
    wall = time.monotonic() - t0
    return _summary(candidates, results, sorted(done_at), wall, gpus if device == "cuda" else 1)


def _summary(candidates: list, results: list, done_at: list[float], wall: float, gpus: int) -> dict:
    timing = sum(r.spent_seconds.get("timing", 0.0) for r in results)
    statuses = Counter(r.status.value for r in results)
    unexpected = [{"index": c.index, "template": c.template, "outcome": c.outcome, "status": r.status.value,
                   "message": r.message[:200]} for c, r in zip(candidates, results) if r.status.value not in c.expected]
    n = len(candidates)
    return {"candidates": n, "gpus": gpus, "wall_s": round(wall, 1),
            "kernels_per_hour": round(n / wall * 3600), "kernels_per_gpu_hour": round(n / wall * 3600 / gpus),
            "latency_s": {"p50": round(done_at[n // 2], 1), "p90": round(done_at[min(n - 1, int(n * 0.9))], 1),
                          "last": round(done_at[-1], 1)},
            "timing_share": round(timing / (wall * gpus), 4), "timing_s": round(timing, 1),
            "statuses": dict(statuses), "unexpected": unexpected,
            "outcomes": dict(Counter(c.outcome for c in candidates))}


def render(runs: list[dict], command: str, device: str) -> str:
    lines = [f"# RL throughput: a batch of model-style candidates through harness.Session ({device})", "",
             f"`{command}`", "",
             "| GPUs | candidates | cache | wall s | kernels/hour | per GPU-hour | latency p50 / p90 / last s "
             "| GPU time timing | statuses | not as declared |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in runs:
        lat = r["latency_s"]
        lines.append(f"| {r['gpus']} | {r['candidates']} | {r['cache']} | {r['wall_s']} | {r['kernels_per_hour']} | "
                     f"{r['kernels_per_gpu_hour']} | {lat['p50']} / {lat['p90']} / {lat['last']} | "
                     f"{100 * r['timing_share']:.1f}% | "
                     f"{', '.join(f'{k} {v}' for k, v in sorted(r['statuses'].items()))} | {len(r['unexpected'])} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    ap.add_argument("--gpus", default="1,2,4", help="GPU counts, one batch each (GPUs 0..N-1)")
    ap.add_argument("--candidates", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--warm", action="store_true", help="keep the build cache of an earlier run (builds cached)")
    ap.add_argument("--time-budget", type=float, default=2.0, help="timing seconds per task at most")
    ap.add_argument("--timeout", type=float, default=120.0)
    ap.add_argument("--md", type=Path)
    ap.add_argument("--json", type=Path)
    a = ap.parse_args()
    if a.candidates < 1:
        raise SystemExit("--candidates must be at least 1")
    work = a.work.resolve()
    options = {"time_budget": a.time_budget, "timeout": a.timeout, "trials": 3 if a.device == "cuda" else 2}
    if a.device == "cuda":
        import torch

        have = torch.cuda.device_count()
        counts = [int(x) for x in a.gpus.split(",")]
        if not have or max(counts) > have:
            raise SystemExit(f"--gpus {a.gpus}: this host has {have} GPU(s)")
        name = torch.cuda.get_device_name(0)
    else:
        counts, name = [1], "cpu"
    runs = []
    cache = work / "cache"
    for gpus in counts:
        candidates = rl_candidates.candidates(a.candidates, a.device, a.seed + gpus)
        if not a.warm:
            for built in ("builds", "manifests", "locks"):
                shutil.rmtree(cache / built, ignore_errors=True)
        result = run_batch(candidates, a.device, gpus, cache, options)
        result["cache"] = "warm" if a.warm else "cold"
        print(f"[rl_throughput] {gpus} GPU(s): {result['wall_s']} s, {result['kernels_per_hour']} kernels/hour, "
              f"{result['statuses']}", flush=True)
        runs.append(result)
    command = "python bench/rl_throughput.py " + " ".join(sys.argv[1:])
    markdown = render(runs, command, name)
    print(markdown)
    for path, text in ((a.md, markdown + "\n"), (a.json, json.dumps({"command": command, "device": name, "runs": runs},
                                                                   indent=1) + "\n")):
        if path:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)


if __name__ == "__main__":
    main()
