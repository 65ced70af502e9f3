"""CUDA-graph timing for calls of a few microseconds.

With plain events each timed call pays a launch and the events' own cost
(~2-3 us on an H100), as much as a 5 us kernel itself. So `calls` calls are
captured back to back into one CUDA graph with one event pair around all of
them, and a sample is the replay's time / calls. Each side captures its own
graph in its own process (the reference in the judge, the solution in the
candidate); the judge plans both the same way (plan()).

Cold L2 without a flush between the calls: the calls rotate over enough copies
of the inputs that each copy's data has been evicted (twice the L2 size of
other traffic) before it is read again; L2 is also flushed before each replay.
The judge writes fresh values into every copy before every replay, and checks
every kept output's projection, so a graph cannot replay an old answer.

A graph replays the kernels it captured and nothing else, so a solution that
works on the host, on an unjoined stream, or only when not being captured
would be timed wrongly. The judge replays every graph once on fresh inputs
and compares before any sample.

Where a graph is not valid, both sides are timed in bursts (BurstSampler): the
same calls over the same copies, run eagerly back to back behind the held
stream, one event pair around them. Model-written kernels launched with
`<<<grid, block>>>` on the legacy default stream are the common case: torch
captures on a non-blocking stream, so such a launch runs at capture time and is
missing from the graph. A burst still shares one event pair over its calls; the
gaps between launches stay in it, as they would in a model.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

import torch

from . import timer

NAME = "cuda_graph"
BURST_NAME = "cuda_burst"
# Calls per burst. A burst is queued while the GPU is held, and a launch blocks
# once the stream's queue is full (about a thousand launches): 16 calls of a
# forward with dozens of small ops stay well under it, and the event pair's
# ~2.5 us is shared 16 ways.
BURST_CALLS = 16
REPLAY_MS = 0.2  # calls per graph: enough that the event pair is ~1% of a replay
MAX_CALLS = 200
KEEP_ALL_BYTES = 1 << 30  # keep every call's output (all are checked) while they fit in this

# Captured before any solution is imported, as in timer.py: a solution that
# patches torch.cuda.graph or CUDAGraph.replay cannot change what is replayed.
_graph_ctx = torch.cuda.graph
_Graph = torch.cuda.CUDAGraph
# The C++ method where torch has one (CPU-only builds have a stand-in class).
_replay = getattr(getattr(torch._C, "_CUDAGraph", None), "replay", None) or torch.cuda.CUDAGraph.replay


@dataclass(frozen=True)
class Plan:
    calls: int  # calls captured per graph
    copies: int  # input copies the calls rotate over
    keep_all: bool  # every call's output stays alive (and is checked), not only the last


def plan(warm_ms: float, moved_bytes: int, out_bytes: int, flush_bytes: int, auto: bool) -> Plan | None:
    """None where `auto` finds graphs not worth it: a call that moves more than
    twice the L2 size cannot rotate its inputs out of L2, its back-to-back calls
    would pay each other's write-backs, and it takes >30 us, where events are accurate."""
    if auto and moved_bytes >= flush_bytes:
        return None
    calls = max(5, min(MAX_CALLS, math.ceil(REPLAY_MS / max(warm_ms, 1e-4))))
    # Between two reads of a copy, the other copies' calls move >= 2x L2.
    copies = max(1, min(calls, math.ceil(flush_bytes / max(moved_bytes, 1)) + 1))
    return Plan(calls, copies, calls * out_bytes <= KEEP_ALL_BYTES)


class GraphSampler:
    """`calls` calls of `call` over the input `copies`, captured once; each replay
    is one sample, the mean time of a call."""

    name = NAME

    def __init__(self, call: Callable[[list], Any], copies: list[list], clock: timer.CudaClock, calls: int,
                 keep_all: bool = False):
        self.clock, self.calls = clock, calls
        self.graph = _Graph()
        outs: list = []
        out = None
        with _graph_ctx(self.graph):
            for i in range(calls):
                if not keep_all:
                    out = None  # the previous call's output memory may be reused inside the graph
                out = call(copies[i % len(copies)])
                if keep_all:
                    outs.append(out)
        # The kept outputs stay alive, so their memory is never reused; every replay rewrites them.
        self._outs = outs if keep_all else [out]

    def replay(self) -> None:
        _replay(self.graph)
        self.clock._sync()

    def queue(self) -> None:
        """The replay, queued as events mode queues one call (L2 flush, held stream,
        events on the current stream)."""
        self.clock.queue(lambda: _replay(self.graph))

    def finish(self) -> timer.Sample:
        """The mean call of the replay queued last."""
        return _per_call(self.clock.finish(), self.calls, NAME)

    def outputs(self) -> list:
        return self._outs


class BurstSampler:
    """GraphSampler's calls without a graph: `calls` eager calls back to back over
    the input copies, queued behind the held stream as one sample. Every call runs
    the solution's own code on the values the judge wrote into its copy."""

    name = BURST_NAME

    def __init__(self, call: Callable[[list], Any], copies: list[list], clock: timer.CudaClock, calls: int,
                 keep_all: bool = False):
        self.call, self.copies, self.clock, self.keep_all = call, copies, clock, keep_all
        self.calls = min(calls, BURST_CALLS)
        self._outs: list = []

    def _run(self) -> None:
        self._outs = []  # the previous burst's outputs are freed before this one allocates
        out = None
        for i in range(self.calls):
            if not self.keep_all:
                out = None
            out = self.call(self.copies[i % len(self.copies)])
            if self.keep_all:
                self._outs.append(out)
        if not self.keep_all:
            self._outs = [out]

    def replay(self) -> None:
        self._run()
        self.clock._sync()

    def queue(self) -> None:
        self.clock.queue(self._run)

    def finish(self) -> timer.Sample:
        return _per_call(self.clock.finish(), self.calls, BURST_NAME)

    def outputs(self) -> list:
        return self._outs


def _per_call(s: timer.Sample, calls: int, name: str) -> timer.Sample:
    host = None if s.host_ms is None else s.host_ms / calls
    return timer.Sample(s.ms / calls, s.wall_ms / calls, host, name if s.clock == timer.CudaClock.HELD else s.clock)


def settle(clock: timer.CudaClock) -> None:
    """After a failed capture: wait for whatever was queued; a capture error is not sticky."""
    try:
        clock._sync()
    except Exception:  # noqa: BLE001
        pass
