"""The order builds start in, and how many compilers each may run.

build_all's threads take builds from one BuildQueue; a precompiled-header job
(harness/build/pch.py) goes ahead of the builds still waiting, so that they can use it.
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
    return max(1, min(cores, memory_slots(cores)))


def memory_slots(unknown: int = 1) -> int:
    """Compilers the host's memory holds at once; `unknown` where it cannot be read."""
    try:
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return unknown
    return max(1, memory // (GIB_PER_COMPILE << 30))


# Build processes run below the evaluation lane (nice 0), which times tasks while
# builds run, and in order among themselves: the first started at BASE_NICE, later
# ones up to NICE_STEPS steps of NICE_STEP lower (each step ~1.56x less CPU weight).
BASE_NICE, NICE_STEP, NICE_STEPS = 10, 2, 4


def concurrency(waiting: int, jobs: int) -> int:
    """How many builds start together. With one round of `jobs` builds and then a
    small one, 18 builds on 14 slots of an H100 host ran as 14 and then 4, the last
    round about half of a 189 s build stage (2026-11-23). So when up to twice `jobs`
    wait, all of them start (memory permitting), ranked by build_nice so that they
    still end one after another and the GPU can evaluate the first while the last
    build (started together at one priority, 18 builds ended together at 129 s and
    the GPU then evaluated all 20 tasks after them). Beyond twice `jobs`, rounds of
    `jobs`."""
    if waiting <= 2 * jobs:
        return max(1, min(waiting, max(jobs, memory_slots())))
    return max(1, jobs)


def build_nice(rank: int, at_once: int) -> int:
    """The nice value of the build started `rank`-th (0 first) of `at_once` that run
    together: the first fifth at BASE_NICE, each next fifth NICE_STEP lower; builds of
    later rounds at the lowest. A build's compilers inherit it."""
    if at_once <= 1:
        return BASE_NICE
    return BASE_NICE + NICE_STEP * min(NICE_STEPS, rank * (NICE_STEPS + 1) // at_once)


class BuildQueue:
    """The builds still to start, in order, with precompiled-header jobs put ahead
    of them; and how many run, from which each build's MAX_JOBS follows."""

    def __init__(self, keys: list[str], jobs: int):
        self._lock = threading.Lock()
        self._items: deque = deque(keys)
        self._jobs, self._running, self._closed, self._popped = jobs, 0, False, 0
        self._pch_keys: set[str] = set()

    def pop(self):
        """The next item and its rank among the builds popped (None when none is left)."""
        with self._lock:
            if self._closed or not self._items:
                return None
            self._running += 1
            item = self._items.popleft()
            rank = self._popped
            if not callable(item):
                self._popped += 1
            return item, rank

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
        # Ranked builds (build_nice) share the cores by priority, so the first ones may
        # compile their .cpp and .cu at once even when more builds than slots run.
        ranked = 2 if self._jobs > 1 and memory_slots() >= 2 * self._jobs else 1
        return max(ranked, slots // max(1, active))
