"""How long this process has run, Python's own start and imports included: kbench's
run clock starts from it, and a judge says from it when its imports and its GPU
context were ready (judge/main.py). Imports nothing of ours."""
from __future__ import annotations

import os


def seconds_since_process_start() -> float:
    """From /proc; 0.0 where that cannot be read."""
    try:
        with open("/proc/self/stat") as f:
            started_ticks = int(f.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 0.0
    return max(0.0, uptime - started_ticks / os.sysconf("SC_CLK_TCK"))
