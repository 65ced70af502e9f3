"""CUDA-graph timing for calls of a few microseconds.

With plain events each timed call pays a launch and the events' own cost
(~2-3 us on an H100), as much as a 5 us kernel itself; events recorded around
each call inside a graph still cost ~2.4 us (measured: bench/timing_accuracy.md).
So here `calls` calls are captured back to back into one CUDA graph with one
event pair around all of them, and a sample is the replay's time / calls.

Cold L2 without a flush between the calls: the calls rotate over enough copies
of the inputs that each copy's data has been evicted (twice the L2 size of
other traffic) before it is read again. L2 is also flushed before each replay,
outside the events.

A graph replays the kernels it captured and nothing else, so a solution that
does work on the host, on an unjoined stream, or only when not being captured
would be timed wrongly. Such graphs are caught before any sample is taken: the
caller's validator writes fresh inputs into every copy, replays, and compares
with the eager reference; any failure means plain events for the whole task,
with a note.
"""
from __future__ import annotations

import math
from typing import Callable

import torch

from . import check, load, shapes, timer

NAME = "cuda_graph"
REPLAY_MS = 0.2  # calls per graph: enough that the event pair is ~1% of a replay
MAX_CALLS = 200

# Captured before any solution is imported, as in timer.py: a solution that
# patches torch.cuda.graph or CUDAGraph.replay cannot change what is replayed.
_graph_ctx = torch.cuda.graph
_Graph = torch.cuda.CUDAGraph
# The C++ method where torch has one (CPU-only builds have a stand-in class).
_replay = getattr(torch._C._CUDAGraph, "replay", None) or torch.cuda.CUDAGraph.replay


class Unavailable(Exception):
    """Graph timing cannot be used for this task; the message says why."""


class GraphSampler:
    """`calls` calls of a side over `copies` input copies, captured once; each
    replay is one sample, the mean time of a call."""

    def __init__(self, side: timer.Side, clock: timer.CudaClock, calls: int, copies: int):
        self.clock, self.calls = clock, calls
        self.copies = [side.inputs] + [check.clone_inputs(side.inputs) for _ in range(copies - 1)]
        self.graph = _Graph()
        out = None
        with _graph_ctx(self.graph):
            for i in range(calls):
                out = None  # the previous call's output memory may be reused inside the graph
                out = side.call(self.copies[i % copies])
        # The last call's output stays alive, so its memory is never reused;
        # every replay rewrites it.
        self.out = out

    def replay(self) -> None:
        _replay(self.graph)
        self.clock._sync()

    def block(self, n: int) -> tuple[list[float], list[float]]:
        """n replays, each timed exactly as events mode times one call (L2 flush,
        launch shadow, events on the current stream); each gives the mean call."""
        pairs = [self.clock.sample(lambda: _replay(self.graph)) for _ in range(n)]
        return [e / self.calls for e, _ in pairs], [w / self.calls for _, w in pairs]


def capture_all(
    sides: list[timer.Side], clock: timer.CudaClock, warm_ms: list[float], validate: Callable | None, auto: bool
) -> tuple[list[GraphSampler], float] | None:
    """One validated sampler per side, and the per-call share of an empty event
    pair. Raises Unavailable with the reason if graphs cannot be used; returns
    None where `auto` finds them not worth it: a call that moves more than twice
    the L2 size cannot rotate its inputs out of L2, its back-to-back calls would
    pay each other's write-backs, and it takes >30 us, where events are accurate."""
    flush_bytes = clock.flush_buf.numel() * clock.flush_buf.element_size()  # twice the L2 size
    traffic = [shapes.nbytes(side.inputs) + shapes.nbytes(side()) for side in sides]
    if auto and max(traffic) >= flush_bytes:
        return None
    calls = max(5, min(MAX_CALLS, math.ceil(REPLAY_MS / max(min(warm_ms), 1e-4))))
    try:
        samplers = []
        for side, moved in zip(sides, traffic):
            # Between two reads of a copy, the other copies' calls move >= 2x L2.
            copies = max(1, min(calls, math.ceil(flush_bytes / max(moved, 1)) + 1))
            samplers.append(GraphSampler(side, clock, calls, copies))
        for s in samplers:
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
    # An empty event pair's cost is shared by the calls of a replay.
    return samplers, clock.empty_pair_ms() / calls


def _settle(clock: timer.CudaClock) -> None:
    """After a failed capture: wait for whatever was queued; a capture error is not sticky."""
    try:
        clock._sync()
    except Exception:  # noqa: BLE001
        pass
