"""Time reference and candidate under identical conditions.

Rules (see README, "How kbench times"): CUDA events on the stream the call
runs on; L2 flushed before every timed call, outside the events; warm-up by
time; reference and candidate interleaved in blocks on the same inputs; at
least `min_samples` each, then until both medians are known to about 1% or
the budget runs out. Every sample also carries the wall time around a
device-wide synchronize, so work that escapes the events shows up.

Kernels of a few microseconds are timed inside a CUDA graph instead
(graph_clock.py), where launch gaps no longer swamp them; `TimingConfig.mode`
picks, and the result records which clock timed the task.

The clock functions are captured when this module is imported, before any
solution code runs, so a solution that patches torch.cuda.Event or
time.perf_counter does not change what kbench measures.
"""
from __future__ import annotations

import gc
import time
from dataclasses import dataclass
from typing import Any, Callable

import torch

from . import stats

# Captured before any solution is imported. The C-level methods cannot be
# reassigned from Python, unlike torch.cuda.Event's Python-level wrappers.
_perf_counter = time.perf_counter
_EventBase = getattr(torch._C, "_CudaEventBase", None)
_event_record = getattr(_EventBase, "record", None)  # absent in CPU-only builds of torch
_event_elapsed = getattr(_EventBase, "elapsed_time", None)
_device_synchronize = getattr(torch._C, "_cuda_synchronize", None)
_current_stream = torch.cuda.current_stream
_gpu_sleep = getattr(torch.cuda, "_sleep", None)  # spins the GPU for a number of cycles

# Before the start event the GPU is kept busy for ~50 us, so that the start event,
# the call's kernels and the end event are all queued while it spins: the events
# then measure GPU work without the host's own dispatch time (~10-20 us of Python
# per call, 8% of a 0.2 ms kernel). Host overhead beyond the spin still shows.
LAUNCH_SHADOW_CYCLES = 100_000


@dataclass(frozen=True)
class TimingConfig:
    min_samples: int = 10
    max_samples: int = 500
    budget_s: float = 10.0  # per task, both sides together
    target_rel_ci: float = 0.01  # stop when each median's 95% interval is within +-1%
    block: int = 5  # samples per side before switching: drift hits both
    warmup_s: float = 0.2
    # "auto": CUDA graphs when either side's warm-up median is under graph_below_ms
    # (there an event pair's own cost, ~2 us, is several percent) and every call
    # moves less than twice the L2 size (graph_clock.capture_all); "events"; "graph".
    mode: str = "auto"
    graph_below_ms: float = 0.05


@dataclass(frozen=True)
class Samples:
    event_ms: list[float]
    wall_ms: list[float]


@dataclass(frozen=True)
class PairResult:
    ref: Samples
    sol: Samples
    stop_reason: str
    clock: str
    event_overhead_ms: float | None
    baseline: Samples | None = None
    note: str | None = None  # why CUDA graphs were wanted but not used


class _Clock:
    """One timed call: flush caches, time fn, return (timed ms, wall ms)."""

    name = ""

    def sample(self, fn: Callable[[], object]) -> tuple[float, float]:
        raise NotImplementedError


class CudaClock(_Clock):
    name = "cuda_events"

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

    def _sync(self) -> None:
        with torch.cuda.device(self.device):
            _device_synchronize()

    def sample(self, fn):
        stream = _current_stream(self.device)
        self.flush_buf.sum()
        self._sync()
        t0 = _perf_counter()
        if _gpu_sleep is not None:
            _gpu_sleep(LAUNCH_SHADOW_CYCLES)
        _event_record(self.start, stream)
        fn()
        _event_record(self.end, stream)
        self._sync()  # device-wide: waits for side streams the events never saw
        wall = (_perf_counter() - t0) * 1e3
        return _event_elapsed(self.start, self.end), wall

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

    def __init__(self):
        self.flush_buf = torch.empty(8 * 2**20, dtype=torch.int32)  # 32 MB, past a typical LLC

    def sample(self, fn):
        self.flush_buf.zero_()
        t0 = _perf_counter()
        fn()
        ms = (_perf_counter() - t0) * 1e3
        return ms, ms

    def empty_pair_ms(self, n: int = 50) -> float:
        out = []
        for _ in range(n):
            t0 = _perf_counter()
            out.append((_perf_counter() - t0) * 1e3)
        return stats.median(out)


def make_clock(device: torch.device) -> _Clock:
    return CudaClock(device) if device.type == "cuda" else CpuClock()


@dataclass(frozen=True)
class Side:
    """One side of a comparison: `call(inputs)` runs one call and returns its
    output; `inputs` are what it is timed on (graph mode also times it on copies)."""

    call: Callable[[list], Any]
    inputs: list

    def __call__(self) -> Any:
        return self.call(self.inputs)


class _EventSampler:
    """A block of samples = that many separately timed calls."""

    def __init__(self, fn: Callable, clock: _Clock):
        self.fn, self.clock = fn, clock

    def block(self, n: int) -> tuple[list[float], list[float]]:
        pairs = [self.clock.sample(self.fn) for _ in range(n)]
        return [e for e, _ in pairs], [w for _, w in pairs]


def time_pair(
    ref: Side,
    sol: Side,
    clock: _Clock,
    cfg: TimingConfig,
    baseline: Side | None = None,
    validate_graphs: Callable | None = None,
) -> PairResult:
    """Time reference and candidate (and an optional baseline, e.g. the reference
    under torch.compile) interleaved in blocks until every median is known.

    `validate_graphs(samplers)`, given the captured graphs in the same order,
    must raise if they do not compute what the sides compute; graph mode is
    then dropped for plain events."""
    sides = [ref, sol] + ([baseline] if baseline is not None else [])
    overhead = clock.empty_pair_ms()
    warm = [_warm_up(side, clock, cfg.warmup_s) for side in sides]
    samplers: list = [_EventSampler(side, clock) for side in sides]
    clock_name, note = clock.name, None
    if _wants_graphs(cfg, clock, warm):
        from . import graph_clock

        try:
            graphs = graph_clock.capture_all(sides, clock, [stats.median(w) for w in warm], validate_graphs,
                                             auto=cfg.mode == "auto")
            if graphs is not None:
                samplers, overhead = graphs
                clock_name = graph_clock.NAME
        except graph_clock.Unavailable as e:
            note = f"timed with events, not CUDA graphs: {e}"
    out = [Samples([], []) for _ in sides]
    deadline = _perf_counter() + cfg.budget_s
    stop = "max_samples"
    gc.collect()
    gc.disable()  # a collection inside a timed call would be charged to that call
    try:
        while len(out[1].event_ms) < cfg.max_samples:
            for sampler, into in zip(samplers, out):
                events, walls = sampler.block(cfg.block)
                into.event_ms.extend(events)
                into.wall_ms.extend(walls)
            if len(out[1].event_ms) >= cfg.min_samples:
                if all(stats.relative_ci_halfwidth(s.event_ms) <= cfg.target_rel_ci for s in out):
                    stop = "converged"
                    break
                if _perf_counter() > deadline:
                    stop = "budget"
                    break
    finally:
        gc.enable()
    return PairResult(out[0], out[1], stop, clock_name, overhead, out[2] if baseline is not None else None, note)


def _wants_graphs(cfg: TimingConfig, clock: _Clock, warm: list[list[float]]) -> bool:
    if cfg.mode == "events" or not isinstance(clock, CudaClock):
        return False
    return cfg.mode == "graph" or min(stats.median(w) for w in warm) < cfg.graph_below_ms


def _warm_up(fn: Callable, clock: _Clock, seconds: float) -> list[float]:
    """At least 3 calls and `seconds` of them: the first calls may autotune,
    allocate or load modules. Returns the timed ms of the calls after the first."""
    t0 = _perf_counter()
    times: list[float] = []
    while len(times) < 3 or (_perf_counter() - t0 < seconds and len(times) < 1000):
        times.append(clock.sample(fn)[0])
    return times[1:]
