"""Where kbench keeps what outlives a run (builds, precompiled headers, problem facts,
task times, the device's bandwidth): $KBENCH_CACHE, else $XDG_CACHE_HOME/kbench.
Every process that needs the folder asks here; stdlib only."""
from __future__ import annotations

import os
from pathlib import Path


def default_cache_dir() -> Path:
    base = os.environ.get("KBENCH_CACHE") or os.path.join(os.environ.get("XDG_CACHE_HOME", "~/.cache"), "kbench")
    return Path(base).expanduser()
