"""The order builds start in, and how many compilers each may run.

build_all's threads take builds from one BuildQueue; a precompiled-header job
(harness/pch.py) goes ahead of the builds still waiting, so that they can use it.
Each build's MAX_JOBS (ninja's parallelism: a load_inline build has a .cpp and,
for CUDA, a .cu file) is the host's compile slots shared by the builds that run
at once from its start on.
"""
from __future__ import annotations

import os
import threading
from collections import deque
from typing import Callable

GIB_PER_COMPILE = 3  # nvcc on torch/extension.h peaked at 3.0 GB on a CPU host (cc1plus at 1.5 GB)


def compile_slots() -> int:
    """How many compiler processes this host runs at once: one per core, fewer when
    memory would not hold them."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 2
    try:
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return cores
    return max(1, min(cores, memory // (GIB_PER_COMPILE << 30)))


class BuildQueue:
    """The builds still to start, in order, with precompiled-header jobs put ahead
    of them; and how many run, from which each build's MAX_JOBS follows."""

    def __init__(self, keys: list[str], jobs: int):
        self._lock = threading.Lock()
        self._items: deque = deque(keys)
        self._jobs, self._running, self._closed = jobs, 0, False
        self._pch_keys: set[str] = set()

    def pop(self):
        with self._lock:
            if self._closed or not self._items:
                return None
            self._running += 1
            return self._items.popleft()

    def done(self) -> None:
        with self._lock:
            self._running -= 1

    def close(self) -> None:
        with self._lock:
            self._closed = True

    def waiting(self) -> int:
        with self._lock:
            return sum(1 for item in self._items if not callable(item))

    def put_first(self, pch_key: str, job: Callable[[], None]) -> bool:
        """Run `job` next, once per PCH key in this run."""
        with self._lock:
            if self._closed or pch_key in self._pch_keys:
                return False
            self._pch_keys.add(pch_key)
            self._items.appendleft(job)
            return True

    def max_jobs(self, slots: int) -> int:
        """MAX_JOBS for a build starting now: the host's compile slots shared by the
        builds that run at once from now on (fewer as the queue empties: a build with
        a .cpp and a .cu file then compiles both at once). The running builds took
        their shares when more were left, so together they stay within the slots (one
        each at the least, as before)."""
        with self._lock:
            active = min(self._jobs, len(self._items) + self._running)
        return max(1, slots // max(1, active))
