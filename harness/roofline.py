"""Device copy bandwidth, measured once per device and cached: the HBM floor of
a task is (input bytes + output bytes) / this bandwidth.

Run as a child: python -m harness.roofline OUT.json
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from .isolate import run_child

COPY_BYTES = 1 << 30  # large enough to stream from HBM, far past any L2


def cached_bandwidth(cache_dir: Path, device_name: str, env: dict[str, str]) -> float | None:
    """GB/s (bytes read + bytes written per second) for this device, from the
    cache or measured now in a child process; None if the measurement failed."""
    cache = cache_dir / "bandwidth.json"
    table = json.loads(cache.read_text()) if cache.is_file() else {}
    if device_name in table:
        return float(table[device_name])
    out = cache_dir / "bandwidth.partial.json"
    outcome = run_child(["-m", "harness.roofline", str(out)], cache_dir / "bandwidth.log", 120, env=env)
    if outcome.returncode != 0 or not out.is_file():
        return None
    table[device_name] = json.loads(out.read_text())["gbs"]
    cache.parent.mkdir(parents=True, exist_ok=True)
    cache.write_text(json.dumps(table, indent=1))
    return float(table[device_name])


def _measure() -> float:
    import torch

    src = torch.rand(COPY_BYTES // 4, device="cuda")
    dst = torch.empty_like(src)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for i in range(25):
        start.record()
        dst.copy_(src)
        end.record()
        torch.cuda.synchronize()
        if i >= 5:  # the first copies warm up clocks and the allocator
            times.append(start.elapsed_time(end))
    times.sort()
    ms = times[len(times) // 2]
    return 2 * COPY_BYTES / (ms * 1e-3) / 1e9


if __name__ == "__main__":
    gbs = _measure()
    tmp = sys.argv[1] + ".tmp"
    Path(tmp).write_text(json.dumps({"gbs": gbs}))
    os.replace(tmp, sys.argv[1])
