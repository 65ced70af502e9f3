"""Clocks: how one call is timed, the same way on both sides.

Rules (see README, "How kbench times"): CUDA events on the stream the call
runs on, queued with the call behind a held stream so that they time the
device's work and not the host's dispatch; L2 flushed before every timed call,
outside the events; every sample also carries the wall time from the release
to a device-wide synchronize, so work that escapes the events shows up. The judge times the reference with these clocks
in its process and the candidate times the solution with the same code in its
own (judge/timing.py interleaves them and bounds what the candidate reports).

The clock functions are captured when this module is imported, before any
solution code runs, so a solution that patches torch.cuda.Event or
time.perf_counter in its process is reported as tampering rather than obeyed.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Optional

import torch

from . import blocking, stats
from .records import TimingConfig  # noqa: F401 - defined with the other options

# Captured before any solution is imported. The C-level methods cannot be
# reassigned from Python, unlike torch.cuda.Event's Python-level wrappers.
_perf_counter = time.perf_counter
_EventBase = getattr(torch._C, "_CudaEventBase", None)
_event_record = getattr(_EventBase, "record", None)  # absent in CPU-only builds of torch
_event_elapsed = getattr(_EventBase, "elapsed_time", None)
_device_synchronize = getattr(torch._C, "_cuda_synchronize", None)
_current_stream = torch.cuda.current_stream
_gpu_sleep = getattr(torch.cuda, "_sleep", None)  # spins the GPU for a number of cycles

# Where no stream can be held (blocking.py), the GPU is kept busy for ~50 us before
# the start event instead, so that short dispatches are queued while it spins.
# Host overhead beyond the spin then still shows in the events.
LAUNCH_SHADOW_CYCLES = 100_000
# How long a held stream waits for the host to queue a call before it gives up
# (and the side is timed around a synchronize instead): far beyond any honest
# dispatch, short enough that finding out costs one second once.
HOLD_TIMEOUT_MS = 1000.0


@dataclass
class Sample:
    """One timed call. `ms` is the clock's reading; `wall_ms` the host's wall time
    from the release of the held stream (or the call's start) to a device-wide
    synchronize; `host_ms` how long the host took to queue the call while the GPU
    was held (None where the clock cannot tell it apart); `clock` names the clock."""

    ms: float
    wall_ms: float
    host_ms: Optional[float]
    clock: str


class _Clock:
    """One timed call in two steps: `queue(fn)` prepares (flushes caches) and, on a
    GPU, queues the call behind a held stream; `finish()` lets it run and reads the
    times. The judge asks a candidate for the two steps separately, so it measures
    the wall time of each from outside (judge/timing.py)."""

    name = ""
    why: Optional[str] = None  # why this clock left its first choice, for the task's note

    def queue(self, fn: Callable[[], object]) -> None:
        raise NotImplementedError

    def finish(self) -> Sample:
        raise NotImplementedError

    def sample(self, fn: Callable[[], object]) -> tuple[float, float]:
        self.queue(fn)
        s = self.finish()
        return s.ms, s.wall_ms


class CudaClock(_Clock):
    """Events on the current stream (the legacy default stream unless the caller
    chose another), behind a held stream (blocking.py): they time the device's
    work alone, however long the host takes to queue it. Where the hold is not
    available, a ~50 us GPU spin before the start event hides short dispatches
    only ("cuda_events_shadow"). A side whose call synchronizes inside cannot be
    queued behind a hold: it is timed by host wall time around a device-wide
    synchronize ("host_wall") from then on, and `why` says so."""

    HELD, SHADOW, HOST_WALL = "cuda_events", "cuda_events_shadow", "host_wall"
    HOLDS = ("flush_buf", "start", "end", "gate")  # guard.held: never replaced after __init__

    def __init__(self, device: torch.device):
        self.device = device
        props = torch.cuda.get_device_properties(device)
        l2 = getattr(props, "L2_cache_size", 50 * 2**20) or 50 * 2**20
        # Reading twice the L2 size evicts whatever the previous call left there.
        # A read, not a write: a written flush buffer leaves L2 full of dirty lines
        # whose write-back to HBM would then overlap (and slow) the timed call.
        self.flush_buf = torch.ones(2 * l2 // 4, dtype=torch.int32, device=device)
        self.start = _EventBase(enable_timing=True)
        self.end = _EventBase(enable_timing=True)
        self.gate = None
        self.why = None
        try:
            with torch.cuda.device(device):
                self.gate = blocking.Gate()
            self.name = self.HELD
        except blocking.Unavailable as e:
            self.name = self.SHADOW
            self.why = f"no held stream ({e}): a ~50 us GPU spin hides only short dispatches"
        self.calls = 0
        self._fn: Optional[Callable] = None
        self._held = False
        self._host_ms: Optional[float] = None

    def _sync(self) -> None:
        with torch.cuda.device(self.device):
            _device_synchronize()

    def queue(self, fn):
        self.flush_buf.sum()
        self._sync()
        self._fn, self._host_ms = fn, None
        if self.name == self.HOST_WALL:
            return
        stream = _current_stream(self.device)
        # The very first call is never held: a first call may autotune or compile,
        # synchronizing as it goes, which says nothing about the calls after it.
        self._held = self.gate is not None and self.calls > 0
        if self._held:
            self.gate.hold(stream.cuda_stream, HOLD_TIMEOUT_MS)
        elif _gpu_sleep is not None:
            _gpu_sleep(LAUNCH_SHADOW_CYCLES)
        _event_record(self.start, stream)
        t0 = _perf_counter()
        fn()
        self._host_ms = (_perf_counter() - t0) * 1e3
        _event_record(self.end, stream)

    def finish(self) -> Sample:
        fn, self._fn = self._fn, None
        self.calls += 1
        if self.name == self.HOST_WALL:
            return self._host_wall(fn)
        t0 = _perf_counter()
        if self._held:
            self.gate.release()
        self._sync()  # device-wide: waits for side streams the events never saw
        wall = (_perf_counter() - t0) * 1e3
        if self._held and self.gate.timed_out():
            # The call waited for the stream that waited for it: time it again, and
            # from now on, around a synchronize. Its output is the second call's.
            self.name = self.HOST_WALL
            self.why = (f"its call did not finish queuing while the GPU was held ({HOLD_TIMEOUT_MS:.0f} ms): it "
                        "synchronizes inside (.item(), a copy to the host, a device synchronize) or queues more "
                        "launches than the queue holds; timed by host wall time around a device synchronize")
            return self._host_wall(fn)
        return Sample(_event_elapsed(self.start, self.end), wall, self._host_ms, self.name)

    def _host_wall(self, fn) -> Sample:
        t0 = _perf_counter()
        fn()
        self._sync()
        ms = (_perf_counter() - t0) * 1e3
        return Sample(ms, ms, None, self.HOST_WALL)

    def empty_pair_ms(self, n: int = 50) -> float:
        stream = _current_stream(self.device)
        out = []
        for _ in range(n):
            _event_record(self.start, stream)
            _event_record(self.end, stream)
            self._sync()
            out.append(_event_elapsed(self.start, self.end))
        return stats.median(out)


class CpuClock(_Clock):
    name = "cpu_clock"
    HOLDS = ("flush_buf",)  # guard.held: never replaced after __init__

    def __init__(self):
        self.flush_buf = torch.empty(8 * 2**20, dtype=torch.int32)  # 32 MB, past a typical LLC
        self._fn: Optional[Callable] = None

    def _sync(self) -> None:
        """Nothing is queued on the CPU: a call has finished when it returns."""

    def queue(self, fn):
        self.flush_buf.zero_()
        self._fn = fn

    def finish(self) -> Sample:
        fn, self._fn = self._fn, None
        t0 = _perf_counter()
        fn()
        ms = (_perf_counter() - t0) * 1e3
        return Sample(ms, ms, None, self.name)

    def empty_pair_ms(self, n: int = 50) -> float:
        out = []
        for _ in range(n):
            t0 = _perf_counter()
            out.append((_perf_counter() - t0) * 1e3)
        return stats.median(out)


_prepared: dict[str, _Clock] = {}


def prepare(device: torch.device) -> bool:
    """Make the clock a process will time with before its task arrives: on a GPU
    that creates the CUDA context, the flush buffer and the hold kernel's module
    (tenths of a second), which a judge or candidate started ahead then does
    while it waits rather than inside its task. A failure here is met again, and
    reported, where the task makes its clock. True if a clock is ready."""
    if device.type == "cuda" and str(device) not in _prepared:
        try:
            _prepared[str(device)] = CudaClock(device)
        except Exception:  # noqa: BLE001
            pass
    return str(device) in _prepared


def make_clock(device: torch.device) -> _Clock:
    """A fresh clock, or the one prepare() made (each is used by one timing run)."""
    ready = _prepared.pop(str(device), None)
    if ready is not None:
        return ready
    return CudaClock(device) if device.type == "cuda" else CpuClock()
