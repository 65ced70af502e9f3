"""A batch of calls, the unit the judge times: run the same way on BOTH sides.

The judge times the reference's batches in its own process and the
candidate's batches around its requests (judge/timing.py); each side runs its
batch with this code, so the two do the same host work per call: the call,
keeping its output alive, and noting where the output lies (the candidate
must, so that the judge can read it; the judge notes the same for its own so
that neither side carries bookkeeping the other does not).

Call i of a batch reads input copy i, which holds values of its own: a call
that skipped its work and returned an earlier call's answer returns the answer
to other inputs. Every output stays alive until the next batch, so the judge
can read all of them.

Eager: the calls back to back, as a model makes them. Graph: the same calls
captured once into a CUDA graph (for calls of a few microseconds, whose launch
would otherwise be the measure); a replay recomputes all of them from
whatever the copies hold. Held (queue_held): the eager calls queued behind a
hold on the stream that the judge releases (hold.py), so that the judge's
clock holds the device's time, not the host's launches.
"""
from __future__ import annotations

import time
from typing import Any, Callable

import torch

_perf = time.perf_counter

# Captured before any solution is imported (candidate/serve.py imports this
# first): a solution that patches torch.cuda.graph or CUDAGraph.replay cannot
# change what kbench's code replays. (It can only lie about its own process,
# and the judge reads and times what happened.)
_graph_ctx = torch.cuda.graph
_Graph = torch.cuda.CUDAGraph
_replay = getattr(getattr(torch._C, "_CUDAGraph", None), "replay", None) or torch.cuda.CUDAGraph.replay
# The C-level event and synchronize functions, which Python cannot reassign (absent in
# CPU-only builds of torch): a solution that patches torch.cuda.Event or synchronize
# changes only its own claim, and a batch still waits for its GPU work.
_EventBase = getattr(torch._C, "_CudaEventBase", None)
_record = getattr(_EventBase, "record", None)
_elapsed = getattr(_EventBase, "elapsed_time", None)
_synchronize = getattr(torch._C, "_cuda_synchronize", None)
_current_stream = torch.cuda.current_stream


def leaves(out: Any) -> list:
    """The tensors of an output structure, in order. Exact list and tuple types (and
    torch's named tuples): a subclass's __iter__ would run the solution's code."""
    if isinstance(out, torch.Tensor):
        return [out]
    if type(out) in (list, tuple) or type(out).__module__ == "torch.return_types":
        return [x for item in out for x in leaves(item)]
    return []


class Log:
    """Where each call's output tensors lie: `at(tensor)` per leaf, and for a call
    whose tensors differ from the first call's in shape, strides or dtype, its
    whole description (`describe(out)`)."""

    def __init__(self, at: Callable[[torch.Tensor], Any], describe: Callable[[Any], Any]):
        self.at, self.describe = at, describe
        self.first: Any = None  # the first call's description
        self.shapes: list[tuple] = []
        self.ats: list[list] = []  # per call, per leaf
        self.odd: dict[int, Any] = {}  # call index -> its own description

    def fields(self) -> dict:
        """What a reply says of the batch's outputs (first, ats, odd), as the judge reads it
        (timing.py), and as the reference encodes it on the CPU to carry the same cost."""
        return {"first": self.first, "ats": self.ats, "odd": {str(k): v for k, v in self.odd.items()}}

    def note(self, out: Any) -> None:
        ts = leaves(out)
        if self.first is None:
            self.first = self.describe(out)
            self.shapes = [(t.shape, t.stride(), t.dtype) for t in ts]
            self.ats.append([])
            return
        if len(ts) != len(self.shapes) or any(
                type(t) is not torch.Tensor or (t.shape, t.stride(), t.dtype) != s for t, s in zip(ts, self.shapes)):
            self.odd[len(self.ats)] = self.describe(out)
            self.ats.append([])
            return
        self.ats.append([self.at(t) for t in ts])


class CallFailed(Exception):
    """A reference call raised (reference_call): the problem's error, raised again by
    the judge as such around the whole batch."""

    def __init__(self, error: BaseException):
        super().__init__(error)
        self.error = error


def reference_call(model: Callable) -> Callable[[list], Any]:
    """The reference's forward for its batches, under no_grad. Its errors come out as
    CallFailed, but running out of memory: the candidate's process shares the GPU.
    A function of this module, not a method of the judge's task, so that a batch of n
    calls runs here, not n calls into the judge's task (issue 30: a held batch of 266
    calls was 532 of a pair's 637 stays, bench/judge_walk.md)."""
    def call(inputs: list) -> Any:
        try:
            with torch.no_grad():
                return model(*inputs)
        except torch.OutOfMemoryError:
            raise
        except Exception as e:  # noqa: BLE001
            raise CallFailed(e) from None
    return call


class Eager:
    """`n` calls of `call`, call i on `copies[i]`, back to back."""

    name = "burst"

    def __init__(self, call: Callable[[list], Any], copies: list[list]):
        self.call, self.copies = call, copies
        self.outs: list = []

    def run(self, n: int, log: Log | None = None, on_call: Callable[[int], None] | None = None) -> None:
        self.outs = []  # the previous batch's outputs go before this one allocates
        for i in range(n):
            out = self.call(self.copies[i])
            self.outs.append(out)
            if log is not None:
                log.note(out)
            if on_call is not None:
                on_call(i + 1)


class Graph:
    """`n` calls captured into one CUDA graph, call i on `copies[i]`; each replay
    recomputes all of them. The outputs are the graph's own buffers, the same
    memory at every replay."""

    name = "graph"

    def __init__(self, call: Callable[[list], Any], copies: list[list], n: int):
        self.graph = _Graph()
        outs = []
        with _graph_ctx(self.graph):
            for i in range(n):
                outs.append(call(copies[i]))
        self.outs = outs

    def run(self, n: int = 0, log: Log | None = None) -> None:
        _replay(self.graph)


def run_timed(batch: Eager | Graph, n: int, device: torch.device,
              log: Log | None = None) -> tuple[float | None, float | None]:
    """Run one batch and wait for it: (its time on CUDA events of the current
    stream; the host's time to issue it), in ms, or (None, None) on the CPU, where
    issuing is all there is. The judge times the same batch from outside; these
    are the runner's own figures."""
    if device.type != "cuda":
        batch.run(n, log)
        return None, None
    start, end = _EventBase(enable_timing=True), _EventBase(enable_timing=True)
    stream = _current_stream(device)
    _record(start, stream)
    t0 = _perf()
    batch.run(n, log)
    host_ms = (_perf() - t0) * 1e3
    _record(end, stream)
    with torch.cuda.device(device):
        _synchronize()
    try:
        return _elapsed(start, end), host_ms
    except RuntimeError:  # an event left unrecorded: no claim
        return None, host_ms


def queue_held(batch: Eager, n: int, device: torch.device, page, side: str, seq: int,
               log: Log | None = None) -> tuple[float, tuple]:
    """Queue one batch behind a hold on the current stream and return without waiting:
    (the host's ms to issue it, its (start, end) events, read once the judge has seen
    it done). The calls count themselves in the page's QUEUED word as they are issued,
    so that the judge sees a forward that waits for the held stream (a synchronize,
    .item()) stop counting."""
    from . import hold

    stream = _current_stream(device)
    start, end = _EventBase(enable_timing=True), _EventBase(enable_timing=True)
    page.set(side, hold.QUEUED, 0)
    page.hold(side, stream, seq)
    _record(start, stream)
    t0 = _perf()
    batch.run(n, log, on_call=lambda i: page.set(side, hold.QUEUED, i))
    host_ms = (_perf() - t0) * 1e3
    _record(end, stream)
    page.done(side, stream, seq)
    return host_ms, (start, end)


def held_ms(events: tuple) -> float | None:
    """The device's ms between a held batch's events, once it has run; None if unreadable."""
    try:
        return _elapsed(*events)
    except (RuntimeError, TypeError):
        return None
