"""Evaluations handed to a Dask cluster by expected time, longest first, one per free GPU.

Dask places a task on a worker when it is submitted, by its guess of each worker's
load, which for kbench's evaluations (one task prefix, one mean duration) is a count
of tasks: a 28 s task and a 1 s one weigh the same (on 4 H100s a warm set took 64.3 s
under Dask against 53.5 s on the local executor's lanes). So kbench
keeps the evaluations that are ready (built) itself and submits one only when a GPU
slot is free (the cluster's GPU=1 resources, counted anew each time, so workers that
join or leave count), the longest expected first (task_seconds.Expected), to that
free slot's worker: each free GPU pulls the next task, as the local executor's lanes
do. Dask's own choice among GPU workers is by capacity, not by which one is free: it
prefers the worker holding the task's build result, where the evaluation then queues
behind another while a GPU elsewhere idles (distributed's valid_workers counts a
resource as supplied, not as free). One that arrives while
nothing runs or waits (a run's start) waits `settle_s` for others: cached builds come back
within a fraction of a second in any order, and the longest of them should start
first (the local executor waits for its cache checks the same way). No Dask import.
"""
from __future__ import annotations

import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, Hashable


@dataclass(order=True)
class _Ready:
    rank: tuple  # (-expected seconds, arrival): the longest first, then the first ready
    submit: Callable[[Hashable], object] = field(compare=False)  # sends the evaluation to a slot's worker


class Feeder:
    """`slots()` lists the cluster's evaluation slots by worker (a worker with two GPUs is
    there twice); `ready` queues an evaluation whose build is done; its `submit` is
    called with the worker of a free slot, and `finished(worker)` frees it again.
    Thread-safe: Dask calls back from its own thread."""

    def __init__(self, slots: Callable[[], list], settle_s: float = 0.0):
        self.slots, self.settle_s = slots, settle_s
        self._idle_since: float | None = None  # when the first evaluation arrived to an idle cluster
        self._timer: threading.Timer | None = None
        self._ready: list[_Ready] = []
        self._busy: Counter = Counter()  # worker -> evaluations sent to it and not finished
        self._count = 0
        self._lock = threading.Lock()
        self._closed = False

    def ready(self, expected_seconds: float, submit: Callable[[Hashable], object]) -> None:
        with self._lock:
            if self.settle_s > 0 and not self._busy and not self._ready:  # an idle cluster's first
                self._idle_since = time.monotonic()
            self._ready.append(_Ready((-expected_seconds, self._count), submit))
            self._count += 1
        self._release()

    def finished(self, worker: Hashable = None) -> None:
        with self._lock:
            self._busy[worker] -= 1
            self._busy += Counter()  # drops those at zero (or below: a worker counted anew)
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
            slots = Counter(self.slots())
        except Exception:  # noqa: BLE001 - the scheduler's view is out of reach for a moment
            slots = Counter()
        if not slots:  # a cluster that is (re)starting workers still gets one, placed by Dask
            slots = Counter({None: 1})
        while True:
            with self._lock:
                free = [w for w, n in slots.items() if self._busy[w] < n]
                if self._closed or not self._ready or not free or self._settling():
                    return
                # The least busy first: on a worker of two GPUs, a slot's worker with none running.
                worker = min(free, key=lambda w: self._busy[w] / slots[w])
                self._ready.sort()
                item = self._ready.pop(0)
                self._busy[worker] += 1
            item.submit(worker)  # outside the lock: Dask may call back at once

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
