"""The first judge of each GPU lane, started as kbench starts.

A warm run's first task waited seconds for its judge's `import torch` and CUDA
context. These start before kbench itself imports torch or looks for tasks (the
GPU's name and capability come from NVML, harness/run/gpus.py), told at once that
they are next, so that their start-up overlaps kbench's own. The local executor's
lanes take them (executors.LocalExecutor, `early`); those no lane takes end with
the run.
"""
from __future__ import annotations

import threading
from pathlib import Path

from . import gpus, launch
from .executors import prestart_depth


class EarlyJudges:
    """One judge per GPU lane (module docstring); kept only if torch then finds the
    capability NVML gave."""

    def __init__(self, options=None, judges: dict | None = None, arch: str = ""):
        self.options, self.judges, self.arch = options, judges or {}, arch
        self._lock = threading.Lock()

    @classmethod
    def start(cls, options, gpu_indices: tuple[int, ...], builds_dir: Path, wanted: bool = True) -> "EarlyJudges":
        if not wanted or options.device != "cuda" or prestart_depth("cuda") == 0:
            return cls()
        indices = list(gpu_indices) or [None]
        found = [gpus.capability(g) for g in indices]
        if any(f is None for f in found) or len({arch for _, arch in found}) != 1:
            return cls()
        arch = found[0][1]
        judges = {}
        for g in indices:
            child = launch.start_worker(launch.EvalConfig(options=options, arch=arch, gpu_index=g,
                                                          builds_dir=str(builds_dir.resolve())))
            launch.prepare(child)  # it is its lane's next judge: make its CUDA context as soon as torch is in
            judges[g] = child
        return cls(options, judges, arch)

    def keep_if(self, arch: str) -> None:
        """End them if torch names another capability than NVML did (a judge's arch list
        must be the device's)."""
        if arch != self.arch:
            self.discard()

    def take(self, gpu_index: int | None) -> list:
        """[(options, judge)] for a lane's `ready` list (empty if none was started for it)."""
        with self._lock:
            child = self.judges.pop(gpu_index, None)
        return [(self.options, child)] if child is not None else []

    def discard(self) -> None:
        with self._lock:
            left, self.judges = list(self.judges.values()), {}
        for child in left:
            child.discard()
