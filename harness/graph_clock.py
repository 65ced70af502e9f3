"""CUDA-graph timing for kernels of a few microseconds.

With plain events each timed call pays a launch and the events' own cost
(~2 us on an H100), which is a third of a 5 us kernel. Here each side's calls
are captured once into a CUDA graph, `block` calls deep, each call bracketed by
its own timing events recorded *inside* the graph and preceded by the same L2
flush as in events mode. One replay then yields `block` samples whose events
see only the GPU work of the call: cold L2, no host launch in between.

A graph replays the kernels it captured and nothing else, so a solution that
does work on the host, on an unjoined stream, or only when not being captured
would be timed wrongly. Such graphs are caught before any sample is taken: the
caller's validator replays them on fresh inputs and compares with the eager
reference, and any failure means plain events for the whole task (with a note).
"""
from __future__ import annotations

from typing import Callable

import torch

from . import load, stats, timer

NAME = "cuda_graph"

# Captured before any solution is imported, as in timer.py: a solution that
# patches torch.cuda.graph or CUDAGraph.replay cannot change what is replayed.
_graph_ctx = torch.cuda.graph
_Graph = torch.cuda.CUDAGraph
# The C++ method where torch has one (CPU-only builds have a stand-in class).
_replay = getattr(torch._C._CUDAGraph, "replay", None) or torch.cuda.CUDAGraph.replay


class Unavailable(Exception):
    """Graph timing cannot be used for this task; the message says why."""


def _timing_event():
    try:  # external=True: the record becomes a node of the graph, replayed each time
        return timer._EventBase(enable_timing=True, external=True)
    except TypeError:
        raise Unavailable(f"torch {torch.__version__} cannot record events inside a CUDA graph") from None


class GraphSampler:
    """`calls` timed calls of fn, captured once, replayed per block of samples."""

    def __init__(self, fn: Callable, clock: timer.CudaClock, calls: int):
        self.clock = clock
        self.starts = [_timing_event() for _ in range(calls)]
        self.ends = [_timing_event() for _ in range(calls)]
        self.graph = _Graph()
        out = None
        with _graph_ctx(self.graph):
            stream = timer._current_stream(clock.device)
            for start, end in zip(self.starts, self.ends):
                out = None  # let the previous call's output memory be reused inside the graph
                clock.flush_buf.sum()
                timer._event_record(start, stream)
                out = fn()
                timer._event_record(end, stream)
        # The last call's output stays alive, so its memory is never reused;
        # every replay rewrites it.
        self.out = out

    def replay(self) -> None:
        _replay(self.graph)
        self.clock._sync()

    def block(self, n: int) -> tuple[list[float], list[float]]:
        if n != len(self.starts):
            raise ValueError(f"graph captured {len(self.starts)} calls, asked for {n}")
        t0 = timer._perf_counter()
        self.replay()
        wall = (timer._perf_counter() - t0) * 1e3 / n  # includes the flushes: not comparable to events
        return [timer._event_elapsed(s, e) for s, e in zip(self.starts, self.ends)], [wall] * n


def capture_all(
    fns: list[Callable], clock: timer.CudaClock, calls: int, validate: Callable | None
) -> tuple[list[GraphSampler], float]:
    """One sampler per fn, validated and warmed up, and the cost of an empty
    timed call inside a graph. Raises Unavailable with the reason otherwise."""
    try:
        samplers = [GraphSampler(fn, clock, calls) for fn in fns]
        empty = GraphSampler(lambda: None, clock, calls)
        for s in samplers + [empty]:
            s.replay()  # the first replay uploads the graph
    except Exception as e:  # noqa: BLE001 - capture rejects syncs, host copies, unjoined streams...
        _settle(clock)
        raise Unavailable(f"capture failed: {load.last_line(e)[:200]}") from None
    if validate is not None:
        try:
            validate(samplers)
        except Exception as e:  # noqa: BLE001
            _settle(clock)
            raise Unavailable(f"the graph does not recompute the output from new inputs: {load.last_line(e)[:200]}") from None
    overhead = stats.median(empty.block(calls)[0] + empty.block(calls)[0])
    return samplers, overhead


def _settle(clock: timer.CudaClock) -> None:
    """After a failed capture: wait for whatever was queued; a capture error is not sticky."""
    try:
        clock._sync()
    except Exception:  # noqa: BLE001
        pass
