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

One GPU count per command fits a device call (10 minutes): `--append EARLIER.json`
carries the batches of earlier commands into this one's record; `--cores-per-gpu 16`
pins the batch to 16 cores per GPU (a 16-core, one-GPU host on a 64-core, 4-GPU one:
builds are most of a cold batch's cost); `--deadline-s S` ends a batch that runs past
S seconds and records what finished by then (marked cut: kernels per hour over the
time it ran, latencies only of what finished), so the record is written before the
call's limit.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import statistics
import sys
import time
from collections import Counter
from concurrent.futures import TimeoutError as FuturesTimeout, as_completed
from pathlib import Path

import rl_candidates

sys.path.insert(0, str(rl_candidates.ROOT))  # this checkout's harness


def run_batch(candidates: list, device: str, gpus: int, cache: Path, options: dict,
              deadline_s: float | None = None, build_jobs: int = 0) -> dict:
    import harness

    problems = {c.problem_path: Path(c.problem_path).read_text() for c in candidates}
    t0 = time.monotonic()
    session = harness.Session("local", device=device, gpus=tuple(range(gpus)) if device == "cuda" else (),
                              cache_dir=cache, build_jobs=build_jobs, **options)
    cut = False
    done_at: list[float] = []
    results: list = [None] * len(candidates)
    try:
        futures = session.evaluate_many([(problems[c.problem_path], c.source) for c in candidates])
        index = {f: i for i, f in enumerate(futures)}
        try:
            for f in as_completed(futures, timeout=deadline_s):
                results[index[f]] = f.result()
                done_at.append(time.monotonic() - t0)
        except FuturesTimeout:
            cut = True  # past --deadline-s: what finished is the record, the rest is cancelled
    finally:
        session.executor.close(cancel=cut)
    wall = time.monotonic() - t0 if not cut else deadline_s
    return _summary(candidates, results, sorted(done_at), wall, gpus if device == "cuda" else 1, cut)


def _summary(candidates: list, results: list, done_at: list[float], wall: float, gpus: int, cut: bool = False) -> dict:
    """Per batch; a batch cut at its deadline counts what finished, over the time it ran."""
    pairs = [(c, r) for c, r in zip(candidates, results) if r is not None]
    timing = sum(r.spent_seconds.get("timing", 0.0) for _, r in pairs)
    statuses = Counter(r.status.value for _, r in pairs)
    unexpected = [{"index": c.index, "template": c.template, "outcome": c.outcome, "status": r.status.value,
                   "message": r.message[:200]} for c, r in pairs if r.status.value not in c.expected]
    n, done = len(candidates), len(done_at)

    def at(share: float) -> float | None:  # when that share of the whole batch had its reward
        k = max(1, -(-int(n * share * 1000) // 1000))
        return round(done_at[k - 1], 1) if k <= done else None

    return {"candidates": n, "finished": done, "cut": cut, "gpus": gpus, "wall_s": round(wall, 1),
            "kernels_per_hour": round(done / wall * 3600), "kernels_per_gpu_hour": round(done / wall * 3600 / gpus),
            "latency_s": {"p50": at(0.5), "p90": at(0.9), "last": at(1.0)},
            "half_within_third": (at(0.5) is not None and at(0.5) <= wall / 3) if not cut else None,
            "timing_share": round(timing / (wall * gpus), 4), "timing_s": round(timing, 1),
            "statuses": dict(statuses), "unexpected": unexpected,
            "outcomes": dict(Counter(c.outcome for c in candidates))}


def render(runs: list[dict], device: str) -> str:
    lines = [f"# RL throughput: a batch of model-style candidates through harness.Session ({device})", "",
             "| GPUs | cores | candidates | done | cache | wall s | kernels/hour | per GPU-hour "
             "| latency p50 / p90 / last s | half in a third | GPU time timing | statuses | not as declared |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in runs:
        lat = r["latency_s"]
        done = f"{r.get('finished', r['candidates'])}" + (" (cut)" if r.get("cut") else "")
        half = {True: "yes", False: "no", None: "-"}[r.get("half_within_third")]
        lines.append(f"| {r['gpus']} | {r.get('cores', '-')} | {r['candidates']} | {done} | {r['cache']} | {r['wall_s']} "
                     f"| {r['kernels_per_hour']} | {r['kernels_per_gpu_hour']} | "
                     f"{' / '.join('-' if lat[k] is None else str(lat[k]) for k in ('p50', 'p90', 'last'))} | {half} | {100 * r['timing_share']:.1f}% | "
                     f"{', '.join(f'{k} {v}' for k, v in sorted(r['statuses'].items()))} | {len(r['unexpected'])} |")
    lines += ["", "Commands, dates and cards:", ""]
    lines += [f"- {r['gpus']} GPU(s): `{r.get('command', '?')}` on {r.get('date', '?')}, {r.get('device', device)}"
              for r in runs]
    return "\n".join(lines)


def pin_cores(per_gpu: int, gpus: int) -> int:
    """Keep this process and every process it starts (builds, judges, candidates) on
    per_gpu x gpus cores, as on a host of that size; returns how many it got."""
    cores = sorted(os.sched_getaffinity(0))
    want = per_gpu * gpus
    if want > len(cores):
        raise SystemExit(f"--cores-per-gpu {per_gpu} x {gpus} GPU(s) = {want} cores; this host has {len(cores)}")
    os.sched_setaffinity(0, cores[:want])
    return want


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
    ap.add_argument("--cores-per-gpu", type=int, default=0, help="pin each batch to this many cores per GPU")
    ap.add_argument("--deadline-s", type=float, help="end a batch after this many seconds, recording what finished")
    ap.add_argument("--append", type=Path, metavar="EARLIER.json", help="carry an earlier record's batches over")
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
    command = "python bench/rl_throughput.py " + " ".join(sys.argv[1:])
    runs = json.loads(a.append.read_text())["runs"] if a.append and a.append.is_file() else []
    cache = work / "cache"
    all_cores = sorted(os.sched_getaffinity(0))
    for gpus in counts:
        os.sched_setaffinity(0, all_cores)
        cores = pin_cores(a.cores_per_gpu, gpus) if a.cores_per_gpu else len(all_cores)
        candidates = rl_candidates.candidates(a.candidates, a.device, a.seed + gpus)
        if not a.warm:
            for built in ("builds", "manifests", "locks"):
                shutil.rmtree(cache / built, ignore_errors=True)
        result = run_batch(candidates, a.device, gpus, cache, options, a.deadline_s,
                           build_jobs=cores if a.cores_per_gpu else 0)
        result.update(cache="warm" if a.warm else "cold", cores=cores, device=name, command=command,
                      date=datetime.date.today().isoformat())
        print(f"[rl_throughput] {gpus} GPU(s), {cores} cores: {result['wall_s']} s, {result['finished']} of "
              f"{result['candidates']} done{' (cut)' if result['cut'] else ''}, {result['kernels_per_hour']} "
              f"kernels/hour, {result['statuses']}", flush=True)
        runs.append(result)
    markdown = render(runs, name)
    print(markdown)
    for path, text in ((a.md, markdown + "\n"), (a.json, json.dumps({"device": name, "runs": runs}, indent=1) + "\n")):
        if path:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)


if __name__ == "__main__":
    main()
