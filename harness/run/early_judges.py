"""The first judges of each GPU lane, started as kbench starts.

A warm run's first task waited seconds for its judge's `import torch` and CUDA
context. One judge per GPU starts before kbench itself imports torch or looks for
tasks (the GPU's name and capability come from NVML, harness/run/gpus.py), told at
once that it is next, so that its start-up overlaps kbench's own. Once the tasks are
known, each GPU gets its share of the judges a lane keeps ahead (top_up), so that
every GPU's second and third tasks find a judge that has imported torch already: a
lane that started them only as it took its first task made each of its next tasks
wait, once per GPU, so handoff grew with the number of GPUs. The local executor's
lanes take them (executors.LocalExecutor, `early`); those no lane takes end with the
run.
"""
from __future__ import annotations

import threading
from pathlib import Path

from . import cores, gpus, launch
from .executors import prestart_depth


class EarlyJudges:
    """Judges started ahead per GPU lane (module docstring); kept only if torch then
    finds the capability NVML gave."""

    def __init__(self, options=None, judges: dict | None = None, arch: str = "", builds_dir: Path | None = None,
                 split: cores.CoreSplit | None = None, lanes: dict | None = None):
        self.options, self.arch, self.builds_dir = options, arch, builds_dir
        # cores.py: they wait off the lanes' reserved cores until their task moves them onto their lane's.
        self.split, self.lanes = split or cores.CoreSplit(), lanes or {}  # lanes: GPU index -> lane number
        self.judges: dict = {g: list(c) for g, c in (judges or {}).items()}  # GPU index -> [judge], first prepared
        self.dask = None  # under --executor dask, the cluster kbench starts (dask_cluster.EarlyCluster)
        self._lock = threading.Lock()

    @classmethod
    def start(cls, options, gpu_indices: tuple[int, ...], builds_dir: Path, wanted: bool = True,
              split: cores.CoreSplit | None = None) -> "EarlyJudges":
        if not wanted or options.device != "cuda" or prestart_depth("cuda") == 0:
            return cls()
        indices = list(gpu_indices) or [None]
        found = [gpus.capability(g) for g in indices]
        if any(f is None for f in found) or len({arch for _, arch in found}) != 1:
            return cls()
        early = cls(options, {}, found[0][1], builds_dir, split, {g: n for n, g in enumerate(indices)})
        for g in indices:
            child = early._start(g)
            launch.prepare(child)  # it is its lane's next judge: make its CUDA context as soon as torch is in
            early.judges[g] = [child]
        return early

    def _start(self, gpu_index: int | None):
        return launch.start_worker(launch.EvalConfig(options=self.options, arch=self.arch, gpu_index=gpu_index,
                                                     builds_dir=str(self.builds_dir.resolve()),
                                                     cpus=self.split.lane(self.lanes.get(gpu_index, 0)),
                                                     spare_cpus=self.split.spare()))

    def top_up(self, tasks: int) -> None:
        """Each GPU's share of `tasks` judges, up to the depth a lane keeps ahead (only
        the first of each GPU makes its CUDA context before its task: GPU memory)."""
        with self._lock:
            lanes = list(self.judges)
        if not lanes:
            return
        want = min(prestart_depth("cuda"), -(-tasks // len(lanes)))
        for g in lanes:
            with self._lock:
                have = self.judges.get(g)
                missing = want - len(have) if have is not None else 0
            started = [self._start(g) for _ in range(max(0, missing))]
            with self._lock:
                if g in self.judges:
                    self.judges[g].extend(started)
                    started = []
            for child in started:  # taken or discarded meanwhile: not wanted any more
                child.discard()

    def keep_if(self, arch: str) -> None:
        """End them if torch names another capability than NVML did (a judge's arch list
        must be the device's)."""
        if arch != self.arch:
            self.discard()

    def take(self, gpu_index: int | None) -> list:
        """[(options, judge)] for a lane's `ready` list (empty if none was started for it)."""
        with self._lock:
            children = self.judges.pop(gpu_index, [])
        return [(self.options, child) for child in children]

    def discard(self) -> None:
        with self._lock:
            left, self.judges = [c for cs in self.judges.values() for c in cs], {}
        for child in left:
            child.discard()
