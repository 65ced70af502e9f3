"""Where kbench keeps what outlives a run (builds, precompiled headers, problem facts,
task times, the device's bandwidth): $KBENCH_CACHE, else $XDG_CACHE_HOME/kbench.
Every process that needs the folder asks here; stdlib only."""
from __future__ import annotations

import json
import os
from pathlib import Path

from .whole_file import replace_whole


def default_cache_dir() -> Path:
    base = os.environ.get("KBENCH_CACHE") or os.path.join(os.environ.get("XDG_CACHE_HOME", "~/.cache"), "kbench")
    return Path(base).expanduser()


def store_json(path: Path, data) -> None:
    """One cache entry, written whole (a temporary file renamed: a reader, or another
    process writing the same entry, never sees half of it). A cache that cannot be
    written only costs time, so failing to write is not an error."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        replace_whole(path, json.dumps(data))
    except OSError:
        pass
