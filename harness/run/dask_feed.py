"""Evaluations handed to a Dask cluster by expected time, longest first, one per free GPU.

Dask places a task on a worker when it is submitted, by its guess of each worker's
load, which for kbench's evaluations (one task prefix, one mean duration) is a count
of tasks: a 28 s task and a 1 s one weigh the same (on 4 H100s a warm set took 64.3 s
under Dask against 53.5 s on the local executor's lanes). So kbench
keeps the evaluations that are ready (built) itself and submits one only when a GPU
slot is free (the cluster's GPU=1 resources, counted anew each time, so workers that
join or leave count), the longest expected first (task_seconds.Expected): each free
GPU pulls the next task, as the local executor's lanes do. One that arrives while
nothing runs or waits (a run's start) waits `settle_s` for others: cached builds come back
within a fraction of a second in any order, and the longest of them should start
first (the local executor waits for its cache checks the same way). No Dask import.
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Callable


@dataclass(order=True)
class _Ready:
    rank: tuple  # (-expected seconds, arrival): the longest first, then the first ready
    submit: Callable[[], object] = field(compare=False)  # sends the evaluation to the cluster


class Feeder:
    """`slots()` says how many evaluations the cluster can run at once; `ready` queues
    one whose build is done; `finished` frees its slot. Thread-safe: Dask calls back
    from its own thread."""

    def __init__(self, slots: Callable[[], int], settle_s: float = 0.0):
        self.slots, self.settle_s = slots, settle_s
        self._idle_since: float | None = None  # when the first evaluation arrived to an idle cluster
        self._timer: threading.Timer | None = None
        self._ready: list[_Ready] = []
        self._running = 0
        self._count = 0
        self._lock = threading.Lock()
        self._closed = False

    def ready(self, expected_seconds: float, submit: Callable[[], object]) -> None:
        with self._lock:
            if self.settle_s > 0 and not self._running and not self._ready:  # an idle cluster's first
                self._idle_since = time.monotonic()
            self._ready.append(_Ready((-expected_seconds, self._count), submit))
            self._count += 1
        self._release()

    def finished(self) -> None:
        with self._lock:
            self._running = max(0, self._running - 1)
        self._release()

    def close(self) -> int:
        """Stop submitting; returns how many ready evaluations were never sent."""
        with self._lock:
            self._closed, left, self._ready = True, len(self._ready), []
            if self._timer is not None:
                self._timer.cancel()
        return left

    def _release(self) -> None:
        try:
            free = max(1, int(self.slots()))  # a cluster that is (re)starting workers still gets one
        except Exception:  # noqa: BLE001 - the scheduler's view is out of reach for a moment
            free = 1
        while True:
            with self._lock:
                if self._closed or not self._ready or self._running >= free:
                    return
                if self._settling():
                    return
                self._ready.sort()
                item = self._ready.pop(0)
                self._running += 1
            item.submit()  # outside the lock: Dask may call back at once

    def _settling(self) -> bool:
        """Under the lock: whether to hold the first evaluations of an idle cluster a
        moment longer (module docstring); a timer releases them. Work that queued while
        the cluster was busy goes as soon as a slot frees."""
        if self._idle_since is None:
            return False
        left = self._idle_since + self.settle_s - time.monotonic()
        if left <= 0:
            self._idle_since = None
            return False
        if self._timer is None or not self._timer.is_alive():
            self._timer = threading.Timer(left, self._release)
            self._timer.daemon = True
            self._timer.start()
        return True
