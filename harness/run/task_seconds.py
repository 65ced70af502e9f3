"""How long each task held its GPU when it last ran, kept in the cache, so that a run
(or a Session's batch) can start its longest tasks first: a hang that takes 6 s, or a
6 GB softmax, started last keeps the run waiting while the other GPUs idle.

Two kinds of entry: a task's own (keyed by its fingerprint: its solution, problem,
options and kbench's version), and its problem's (the median of that problem's judged
tasks under the same options), for a candidate never run before: the reference's own
time and its sizes set how long a new candidate's checks and timing take. A task of
a problem never run is estimated from its problem's bytes.
"""
from __future__ import annotations

import hashlib
import json
import statistics
import threading
from dataclasses import asdict
from pathlib import Path

from ..shared.cache_dir import store_json

FILE = "task-seconds.json"
KEEP = 100_000  # entries; the oldest go first


def load(cache_dir: Path) -> dict[str, float]:
    try:
        data = json.loads((cache_dir / FILE).read_text())
    except (OSError, ValueError):
        return {}
    return {k: float(v) for k, v in data.items() if isinstance(v, (int, float))} if isinstance(data, dict) else {}


def problem_key(problem_sha256: str, options) -> str:
    """One problem under one set of options (a time budget or trial count changes how
    long every one of its tasks takes)."""
    text = json.dumps([problem_sha256, asdict(options)], sort_keys=True, default=str)
    return "problem:" + hashlib.sha256(text.encode()).hexdigest()[:20]


def _lane_seconds(result) -> float | None:
    """A judged task's seconds on its GPU lane (phases, handoff and teardown included);
    None for one that never reached a judge (a failed build holds no GPU)."""
    return round(sum(result.phase_seconds.values()), 3) if result.phase_seconds else None


def save(cache_dir: Path, results, options=None) -> None:
    """Add each result's lane seconds, and with `options` (the run's) each problem's median."""
    table = load(cache_dir)
    per_problem: dict[str, list[float]] = {}
    for r in results:
        seconds = _lane_seconds(r)
        if seconds is None:
            continue
        if r.fingerprint:
            table.pop(r.fingerprint, None)  # re-inserted last: the newest stay when the table is cut
            table[r.fingerprint] = seconds
        if options is not None and r.problem_sha256:
            per_problem.setdefault(problem_key(r.problem_sha256, options), []).append(seconds)
    for key, seconds in per_problem.items():
        table.pop(key, None)
        table[key] = round(statistics.median(seconds), 3)
    if len(table) > KEEP:
        table = dict(list(table.items())[-KEEP:])
    store_json(cache_dir / FILE, table)  # a read-only cache only costs the order


def estimate(seconds: float | None, shape: dict | None) -> float:
    """A task's expected seconds on its GPU: as last time, else about a second plus its
    problem's bytes at a few GB/s (checks and timing pass over them many times)."""
    if seconds is not None:
        return seconds
    size = (shape["input_bytes"] + shape["output_bytes"]) if shape else 0
    return 1.0 + size / 5e9


class Expected:
    """Expected seconds of TaskSpecs: the task's own last time, else its problem's (what
    its tasks took in this run so far, else the cached median), else `fallback` (from
    the problem's bytes). Safe from any thread: lanes learn as their tasks finish."""

    def __init__(self, table: dict[str, float] | None = None):
        self.table = dict(table or {})
        self._seen: dict[str, list[float]] = {}
        self._lock = threading.Lock()

    def seconds(self, spec, fallback: float) -> float:
        if spec.fingerprint and spec.fingerprint in self.table:
            return self.table[spec.fingerprint]
        key = problem_key(spec.problem_source.sha256, spec.options)
        with self._lock:
            seen = list(self._seen.get(key, ()))
        if seen:
            return statistics.median(seen)
        return self.table.get(key, fallback)

    def learn(self, spec, result) -> None:
        seconds = _lane_seconds(result)
        if seconds is not None:
            with self._lock:
                self._seen.setdefault(problem_key(spec.problem_source.sha256, spec.options), []).append(seconds)
