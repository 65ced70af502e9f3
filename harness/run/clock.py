"""Where a run's own seconds go, outside its tasks: kbench's start, discovery, the
problems' sizes, the bandwidth probe, the build stage, the wait for the first
judge, the tasks, ... Recorded in results.json's run.phase_seconds; the tasks'
own phases (judge start, reference setup, check, timing) are in each task's
phase_seconds, and bench/run_phases.py puts the two together.

Phases that overlap (the problems' sizes are found in a thread while builds
run) are recorded each with its own seconds, so they may sum to more than the
wall time; `until_reports` is the wall time from the process's start to the
final write of the reports.
"""
from __future__ import annotations

import threading
import time

from ..shared.process_age import seconds_since_process_start


class RunClock:
    """Laps of the run's phases, in seconds; safe to add to from any thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.phases: dict[str, float] = {"start": round(seconds_since_process_start(), 3)}
        self._origin = time.monotonic() - self.phases["start"]
        self._last = time.monotonic()

    def lap(self, name: str) -> float:
        """Seconds since the last lap, added to `name`."""
        now = time.monotonic()
        with self._lock:
            seconds, self._last = now - self._last, now
        self.add(name, seconds)
        return seconds

    def add(self, name: str, seconds: float) -> None:
        with self._lock:
            self.phases[name] = round(self.phases.get(name, 0.0) + seconds, 3)

    def mark(self, name: str) -> None:
        """`name` = the seconds from the process's start until now."""
        with self._lock:
            self.phases[name] = round(time.monotonic() - self._origin, 3)

    def snapshot(self) -> dict[str, float]:
        with self._lock:
            return dict(self.phases)
