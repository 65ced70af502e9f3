"""How long each task held its GPU when it last ran, kept in the cache and keyed by
the task's fingerprint (its solution, problem, options and kbench's version), so a
rerun can start its longest tasks first: a hang that takes 6 s, or a 6 GB softmax,
started last keeps the run waiting while the other GPUs idle. A task never run is
estimated from its problem's bytes.
"""
from __future__ import annotations

import json
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


def save(cache_dir: Path, results) -> None:
    """Add each result's GPU-lane seconds (its phases, handoff and teardown included)."""
    table = load(cache_dir)
    for r in results:
        if r.fingerprint and r.phase_seconds:
            table.pop(r.fingerprint, None)  # re-inserted last: the newest stay when the table is cut
            table[r.fingerprint] = round(sum(r.phase_seconds.values()), 3)
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
