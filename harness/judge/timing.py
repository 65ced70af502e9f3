"""Timing on the judge's own clock: batches of calls, the reference here, the solution there.

A sample is one batch: n calls, call i reading input copy i, with values of
its own drawn fresh for every batch (get_inputs with a new seed per copy,
written into the buffers the candidate was lent). The judge starts its clock,
continues the frozen candidate and asks for the batch; the candidate runs the
calls and synchronizes; on its reply the judge stops it again, waits until
the GPU has drained whatever the candidate queued (drain.py), and stops its
clock. A call's time is (that wall time - the fixed cost of a request) / n.
The reference's batches run here the same way (batches.py: the same code on
both sides), with the candidate frozen and the GPU drained. Nothing the
candidate reports enters a figure:
  * The fixed cost is the median of empty batches measured before the
    solution was imported (the same request, process and path), or after, if
    that is smaller: inflating its own empty requests cannot make the judge
    subtract more.
  * Every call's output is read by the judge from the candidate's memory
    while it is frozen (read.py) and compared with the reference's on the same
    values: a call skipped, deferred, replayed or finished later is an output
    that is not there. One call per batch, picked after it ran, is compared
    in full.
  * The candidate's own CUDA events around the batch are its claim. The
    judge's measure bounds it: a claim no more than 15% under the measure is
    the figure (finer than a wall clock that carries a stopped process's
    wake-up), a lower one is timing_mismatch and the measure is the figure
    (Timer._after).
Batches are long enough that the fixed cost is at most 2% of them (10 ms
on a GPU, 5 ms on the CPU, or 50 times the fixed cost), as far as memory for
one input copy per call allows. Calls of a few microseconds run as one replay
of n calls captured in a CUDA graph, where the graph recomputes the output
from new inputs (a launch on the legacy default stream is missing from a
graph); otherwise eagerly, back to back, as a model runs them.
"""
from __future__ import annotations

import base64
import binascii
import gc
import json
import math
import os
import random
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from ..shared import batches, channel, hold, sandbox, stats
from . import check, freeze, held
from ..discover import shapes
from ..shared.locate import Locator
from .read import span_bytes
from ..records import Flag, Status
from . import limits, stopping, walk
from .task import Judge, TaskFailed, unannounced_seed

_perf = time.perf_counter
TRACE = bool(os.environ.get("KBENCH_TIMING_TRACE"))  # one line per batch in the task's log
EMPTY_BATCHES = 11
EMPTY_MIN = 3  # empty batches after the import, at least, when the budget is short (11 stand before it)
WARM_PAIRS = 2  # pairs of single calls in the warm-up, where the budget has room (the first is not used;
# the check has called the candidate on these shapes already)
WARM_SHARE_OF_BUDGET = 0.1  # and warmup_s, or this share of the budget if less
# A batch's length, before the fixed cost's 50x. On the CPU the measure is CPU time, whose
# fixed cost is ~0.08 ms a batch (the wake-up is not in it): 5 ms keeps it under 2%, and a
# pair of short batches costs the judge less drawing, reading and comparing (a 1.3 ms C++
# affine: 3 calls a batch, 80 ms a pair, against 13 calls and 280 ms at 20 ms), so that a
# budget holds more of them.
TARGET_S = {"cuda": 0.010, "cpu": 0.005}
FIXED_SHARE = 0.02  # the fixed cost of a batch is at most this share of it
# The same for held batches, whose measure is the device's time: their fixed cost (~0.35 ms on an
# H100/H200: the release's latency and the switch to the candidate's context, the same in every
# batch) errs by its spread, not its size; 2% of it asked for 18 ms batches, 768 calls of a 7 us
# Tanh, whose pairs then cost 0.16 s of drawing, reading and comparing (2026-11-28, H200).
HOLD_FIXED_SHARE = 0.1
# A held batch's length at least, per side: the release and the done word's latencies vary by
# microseconds (the judge's own reference batches cost ~15 us beyond their calls).
TARGET_HELD_S = 0.25e-3
MAX_CALLS = 4096  # calls per batch (copies of the inputs, outputs kept)
MAX_BATCH_S = 0.2  # the slower side's batch at most (a 1000x gap: the faster side's batch is then short)
WARM_CALLS = 16  # a batch of this many after the single calls of the warm-up, for the time per call
ROWS_DRAW_BYTES = 256 << 20  # a batch's values drawn at once (_draw_rows) in chunks of this many bytes at most
MEMORY_SHARE = 0.4  # of the GPU's free memory, for both sides' copies and outputs
MUTATION_EVERY = 5  # compare a lent copy with its values every 5th pair
# How far the candidate's own events may sit from the judge's measure (Timer._after): honest
# candidates' sat 4-7% below it on an H200 (batches of 1-400 calls), more for batches of one
# microsecond call; events miss only work outside their stream, or are forged.
CLAIM_SHARE = 0.15
CLAIM_BATCH_S = 0.5e-3
# The same for held batches (clock cuda_hold), where the judge's measure is the device's
# time: a held batch's events sat within 2% of it on an H100 (bench/hold_probe.md), and
# what a batch costs beyond its calls varies by tens of us.
HOLD_CLAIM_SHARE = 0.08
HOLD_CLAIM_BATCH_S = 0.15e-3
HOLD_BUSY_S = 0.05  # how long the judge waits for the GPU to go idle around a held batch's input write
# A reference batch whose wall time (less the fixed cost) exceeds its own events by this share, and
# this much, met other work on the GPU: measured again, up to CONTENDED_RETRIES times.
# (Another context's time slice on an H100 is ~2 ms; a batch's fixed cost varies by tens of us.)
# A batch's own overhead beyond its events varies by up to ~0.3 ms (one-call batches on an H100, 2026-11-26).
CONTENDED_SHARE, CONTENDED_MIN_S, CONTENDED_RETRIES, CONTENDED_PAUSE_S = 0.10, 500e-6, 5, 0.02
# The probe between writing the candidate's inputs and its batch: the first probe after the judge's
# own drawing read 0.07-0.16 ms on an H100 with nothing else on the GPU (2026-11-26); another
# context's queued work holds it for a time slice (~2 ms).
BEFORE_BATCH_BUSY_S = 0.5e-3
HOST_WAIT_NOTE_S = 0.001  # the judge's run-queue delay inside held measures worth a note (held.release)
STARTED_MAX_S = 0.05  # CPU used by processes the candidate started, while timed (5 clock ticks)
COTENANT_SHARE = 0.1  # and by the candidate's own, while stopped, as a share of the reference's batches


@dataclass
class Side:
    ms: list[float] = field(default_factory=list)  # the judge's measure, per call
    claimed_ms: list[float] = field(default_factory=list)  # the side's own events, per call (the candidate's claim)
    host_ms: list[float] = field(default_factory=list)  # the side's own time to issue a call
    figure: list[float] = field(default_factory=list)  # what the verdict uses, per call (Timer._after decides)


@dataclass
class PairResult:
    ref: Side
    sol: Side
    stop_reason: str
    clock: str
    calls: int
    fixed_ms: float
    ref_fixed_ms: float
    baseline: Side | None = None
    notes: list[str] = field(default_factory=list)
    flags: set[Flag] = field(default_factory=set)
    last_inputs: list = field(default_factory=list)
    out_bytes: int = 0


def empty_batches(judge: Judge, n: int = EMPTY_BATCHES,
                  enough: Callable[[int, float], bool] | None = None) -> list[float]:
    """Seconds of `n` empty batches, measured exactly as a batch is, each after the
    judge has made inputs and run the reference once with the candidate stopped, as
    it does between two of the candidate's timed batches: a process stopped while
    the GPU moved gigabytes for another answers later, and the GPU switches to it
    later (on an H200, 2026-11-26: ~0.5 ms more than empty batches back to back,
    which a 3 ms call timed one per batch read as 16% slower). `enough(taken, each_s)`
    may end them sooner (the timing budget's share for them: stopping.Budget)."""
    limit = limits.for_other(judge.ref_call_s, "batch")

    def one() -> float:
        if judge.device.type == "cuda":  # on the CPU the measure is CPU time: waiting costs none
            judge.run_reference_once()
        return measure_candidate(judge, {"op": "batch", "n": 0}, limit)[0]

    out = _repeat(one, n, enough)
    if judge.device.type == "cuda" and judge.holds is None and judge.hold_unavailable is None:
        try:
            judge.holds = held.Holds(judge)
        except hold.HoldUnavailable as e:
            judge.hold_unavailable = str(e)
        else:
            judge.pre_hold_s = empty_holds(judge, n)
    return out


def empty_holds(judge: Judge, n: int = EMPTY_BATCHES,
                enough: Callable[[int, float], bool] | None = None) -> list[float]:
    """Seconds of `n` empty held batches of the candidate's (held.py), each as a held
    batch is timed: after a reference call, the GPU drained and L2 flushed. `enough` as
    for empty_batches."""
    limit = limits.for_other(judge.ref_call_s, "batch")

    def one() -> float:
        judge.run_reference_once()
        return empty_hold(judge, limit)

    return _repeat(one, n, enough)


def empty_hold(judge: Judge, limit: limits.Limit, idle_within_s: float = 60.0) -> float:
    """Seconds of one empty held batch of the candidate's: queued, the GPU drained (for at
    most `idle_within_s`) and L2 flushed, then released and timed to its done word."""
    q = judge.holds.queue(0, limit)
    judge.drain.wait(limit_s=idle_within_s)
    judge.flush_caches()
    return judge.holds.release("candidate", q.seq, limit) + judge.drain.settle()


def _repeat(measure: Callable[[], float], n: int, enough: Callable[[int, float], bool] | None) -> list[float]:
    """n measures, or fewer once `enough(taken, the longest one took)` says so."""
    out: list[float] = []
    each_s = 0.0
    while len(out) < n and not (enough is not None and enough(len(out), each_s)):
        t0 = _perf()
        out.append(measure())
        each_s = max(each_s, _perf() - t0)
    return out


def measure_candidate(judge: Judge, msg: dict, limit: limits.Limit) -> tuple[float, dict]:
    """The judge's measure of one request to the candidate. On a GPU its wall time,
    from before the candidate is continued to after its reply with its GPU work
    drained; GPU work it managed to queue between its reply and its stop is waited
    for and added. On the CPU the CPU time the candidate's processes used (their
    CPU clocks, read while they are stopped): on a host shared with other work,
    wall time measures the other work too."""
    if judge.device.type != "cuda":
        freezer = judge.remote.freezer
        cpu0 = freezer.cpu_seconds()
        reply, _ = judge.ask(msg, when="while being timed", limit=limit)
        judge.remote.wait_stopped()
        return freezer.cpu_seconds() - cpu0, reply
    t0 = _perf()
    reply, _ = judge.ask(msg, when="while being timed", limit=limit, spin=True)
    t_reply = _perf()
    judge.drain.wait()
    seconds = _perf() - t0
    judge.remote.wait_stopped()
    late = judge.drain.wait()
    if TRACE:
        print(f"[kbench trace] candidate n={msg.get('n')}: reply {(t_reply - t0) * 1e6:.0f} us, drain "
              f"{(t0 + seconds - t_reply) * 1e6:.0f} us, late {late * 1e6:.0f} us, its events {reply.get('ms')}, "
              f"its own trace (before run, run+sync, after) {reply.get('trace_us')} us",
              flush=True)
    return seconds + late, reply


class Spent:
    """Seconds a timing phase spent in each of its steps, summed, for the task log's
    summary line: where a task's timing went (fixed costs, warm-up, trying batch kinds,
    sampling; and within pairs, drawing inputs, queueing, the measures, reading and
    comparing outputs). Two perf_counter reads a step: nothing a measure would see."""

    def __init__(self):
        self.s: dict[str, float] = {}

    @contextmanager
    def __call__(self, name: str):
        t0 = _perf()
        try:
            yield
        finally:
            self.s[name] = self.s.get(name, 0.0) + _perf() - t0

    def line(self, names: tuple[str, ...]) -> str:
        return ", ".join(f"{k} {self.s[k]:.2f}" for k in names if k in self.s)


STAGES = ("fixed", "bind", "warm", "estimate", "try", "sample", "after")
STEPS = ("grow", "draw", "queue", "write", "flush", "busy", "measure", "read", "reference", "compare")


class Timer:
    """Interleaved batches of the two sides, each on the judge's clock."""

    def __init__(self, judge: Judge, cfg, baseline: Callable | None = None):
        self.j, self.cfg = judge, cfg
        self.cuda = judge.device.type == "cuda"
        self.baseline = baseline
        self.rng = random.Random()  # which calls are compared in full: picked after they ran
        self.result = PairResult(Side(), Side(), "max_samples", "cuda_burst" if self.cuda else "cpu_clock", 1, 0.0, 0.0,
                                 Side() if baseline else None)
        self.graphs: tuple[batches.Graph, Any] | None = None  # (the reference's graph, the capture's reply)
        self.ref_eager: batches.Eager | None = None
        self.locator = Locator(judge.device)
        self.sched = _scheduling()  # the judge's own, as it started timing
        self.holding = False  # batches held (held.py) rather than eager or graphs
        self.call_host_s = 0.0  # the candidate's host time to issue a call, from the warm-up
        self.cotenant_s = self.ref_wall_s = 0.0  # the candidate's CPU beside the reference's batches, and their wall
        self.held_cotenant_s = self.held_wall_s = 0.0  # the same beside its own held batches' measures
        self.one_s = 0.0  # the wall time of a pair of single calls (the warm-up's)
        self.many: tuple[int, float] | None = None  # (calls, wall seconds) of the pair of WARM_CALLS, where it ran
        self.spent = Spent()
        self.plans: list[str] = []  # how calls a batch were chosen, for the timing line
        self.rows_draw: bool | None = None  # draw a batch's values at once (_draw_rows); None: not tried yet

    # -- fixed costs ------------------------------------------------------------
    def _fixed_costs(self) -> None:
        # The lower quartile, not the median: a host busy while they were measured (builds
        # beside a cold run) slows some of them, and a fixed cost read high makes the judge's
        # measure of every batch read low. As many as the budget's share for them allows
        # (EMPTY_MIN at least): the ones measured before the import stand beside them.
        enough = lambda taken, each_s: self.budget.fixed_costs_done(taken, EMPTY_MIN, EMPTY_BATCHES, each_s)  # noqa: E731
        post = stats.quantile(empty_batches(self.j, EMPTY_BATCHES, enough), 0.25)
        pre = stats.quantile(self.j.pre_fixed_s, 0.25) if self.j.pre_fixed_s else post
        self.fixed_s = min(pre, post)
        self.fixed_parts = (pre, post)
        empty = batches.Eager(self.j.forward_reference, [])
        self.ref_fixed_s = stats.quantile([self._measure_reference(empty, 0)[0] for _ in range(EMPTY_BATCHES)], 0.25)
        self.result.fixed_ms, self.result.ref_fixed_ms = self.fixed_s * 1e3, self.ref_fixed_s * 1e3
        self.hold_fixed = None
        if self.cuda and self.j.holds is not None and self.cfg.mode in ("auto", "hold"):
            post = stats.quantile(empty_holds(self.j, EMPTY_BATCHES, enough), 0.25)
            pre = stats.quantile(self.j.pre_hold_s, 0.25) if self.j.pre_hold_s else post
            limit = limits.for_other(self.j.ref_call_s, "batch")
            ref = [self.j.holds.reference(empty, 0, limit)[0] for _ in range(EMPTY_BATCHES)]
            self.hold_fixed = (min(pre, post), stats.quantile(ref, 0.25), (pre, post))

    def _use_holds(self) -> None:
        """From now on batches are held: their fixed costs are the held batches'."""
        self.holding = True
        self.eager_fixed = (self.fixed_s, self.ref_fixed_s, self.fixed_parts)
        self.fixed_s, self.ref_fixed_s, self.fixed_parts = self.hold_fixed
        self.result.fixed_ms, self.result.ref_fixed_ms = self.fixed_s * 1e3, self.ref_fixed_s * 1e3

    def _drop_holds(self) -> None:
        self.holding = False
        self.fixed_s, self.ref_fixed_s, self.fixed_parts = self.eager_fixed
        self.result.fixed_ms, self.result.ref_fixed_ms = self.fixed_s * 1e3, self.ref_fixed_s * 1e3

    def _measure_reference(self, batch, n: int, log: batches.Log | None = None) -> tuple[float, float | None, float]:
        """(seconds, its events in ms, its host ms) of one reference batch, measured as the
        candidate's are: wall time ended with a drained GPU, or on the CPU this process's CPU time."""
        if self.holding:
            return self.j.holds.reference(batch, n, self.limit, log)
        clock = _perf if self.cuda else time.process_time
        t0 = clock()
        ms, host_ms = batches.run_timed(batch, n, self.j.device, log)
        if log is not None and not self.cuda:
            # The candidate's reply says where each call's output lies, as JSON: its encoding,
            # ~0.7 us a call, is in its CPU time and not in its fixed cost (an empty batch's
            # reply is short), so the reference encodes the same (identical torch code on the
            # CPU: 0.81-0.90x against itself without, 0.89-0.95x with; 16 x 256 ReLU). On a GPU
            # the candidate encodes while its batch runs on the device; the reference's batch
            # has been waited for here.
            json.dumps({"ms": ms, "host_ms": host_ms, "threads": [], **log.fields(), "segs": []}).encode()
        if self.cuda:
            self.j.drain.wait()
        return clock() - t0, ms, host_ms

    # -- inputs -----------------------------------------------------------------
    def _bind(self, n: int) -> None:
        """Lend n copies of the inputs, stacked: for each input a tensor [n, ...] (or
        the plain value, the same for every call); and keep n copies of the judge's own
        (staging), where fresh values are drawn and the reference reads them."""
        self.j.reader.release()
        self.stacked = self.copies = self.staging = self.ref_copies = None
        first = self.j.make_inputs(self._next_seed())
        stacked = [self.j.shared.alloc((n, *x.shape), x.dtype) if isinstance(x, torch.Tensor) else x for x in first]
        staging = [torch.empty((n, *x.shape), dtype=x.dtype, device=x.device) if isinstance(x, torch.Tensor) else x
                   for x in first]
        self.stacked, self.staging, self.n = stacked, staging, n
        self.copies = _rows(stacked, n)
        self.ref_copies = _rows(staging, n)
        fds: list[int] = []
        self.j.ask({"op": "bind", "n": n, "stacked": channel.encode(stacked, fds)}, fds)
        self.bound_limit = self.j.call_limit(self.copies[0], "a timed batch", calls=n, timed=True)
        self.bound_scaled_s = limits.HANG_FACTOR * (self.j.ref_call_s or 0.0) * n

    @property
    def limit(self) -> limits.Limit:
        """The bound batch's limit; on the GPU, cut near the time budget's end
        (limits.near_budget_end: the budget is a hard cap)."""
        budget = getattr(self, "budget", None)
        if budget is None or not self.cuda:
            return self.bound_limit
        return limits.near_budget_end(self.bound_limit, budget.deadline - budget.clock(), self.bound_scaled_s)

    def _next_seed(self) -> int:
        """Each draw's own unannounced seed, not the last one's successor: a candidate that
        worked one seed out from its inputs (mt19937's state can be recovered from its
        outputs, and its seeding inverted) would know every later one."""
        return unannounced_seed()

    def _draw(self, n: int) -> None:
        if self.rows_draw is not False and n > 1 and self._draw_rows(n):
            return
        self._draw_one_by_one(n)

    def _draw_rows(self, n: int) -> bool:
        """Fresh values for n calls drawn at once (Judge.make_input_rows), in chunks of
        at most ROWS_DRAW_BYTES. Tried once per task against single draws: taken where it
        runs and each input varies across its rows exactly where it varies across single
        draws (drawn first, as the batch's values)."""
        tensors = [s for s in self.staging if isinstance(s, torch.Tensor)]
        per_call = sum(s[0].numel() * s.element_size() for s in tensors)
        m = min(n, ROWS_DRAW_BYTES // max(per_call, 1))
        if m < 2 or not tensors:
            self.rows_draw = False
            return False
        trial = self.rows_draw is None
        if trial:
            self._draw_one_by_one(n)
            varies = [_varies(s[:n]) for s in tensors]
        for start in range(0, n, m):
            k = min(m, n - start)
            try:
                rows = self.j.make_input_rows(self._next_seed(), k)
            except Exception:  # noqa: BLE001 - vmap cannot run this get_inputs() (or it raised): single draws
                rows = None
            if rows is None or len(rows) != len(tensors) or any(
                    tuple(r.shape) != (k, *s.shape[1:]) or r.dtype != s.dtype for r, s in zip(rows, tensors)):
                self.rows_draw = False
                return trial  # the trial's single draws stand; otherwise the caller draws them so
            if trial:
                self.rows_draw = k > 1 and all(_varies(r) == v for r, v in zip(rows, varies))
                return True  # the single draws stand; the next batches draw rows, or not
            for r, s in zip(rows, tensors):
                s[start:start + k].copy_(r)
        return True

    def _draw_one_by_one(self, n: int) -> None:
        for i in range(n):
            values = self.j.make_inputs(self._next_seed())
            for s, v in zip(self.staging, values):
                if isinstance(s, torch.Tensor):
                    if not isinstance(v, torch.Tensor) or v.shape != s.shape[1:] or v.dtype != s.dtype:
                        raise TaskFailed(Status.PROBLEM_ERROR,
                                         f"problem file {self.j.spec['problem_path']}: get_inputs() returns inputs of "
                                         "another shape or dtype for another seed; timing needs the same each time")
                    s[i].copy_(v)

    def _write_lent(self, n: int) -> None:
        for lent, own in zip(self.stacked, self.staging):
            if isinstance(lent, torch.Tensor):
                lent[:n].copy_(own[:n])
        self.j.sync()

    def _flush(self) -> None:
        """Caches cold before each batch, by the judge: the same for both sides."""
        self.j.flush_caches()

    # -- one pair ---------------------------------------------------------------
    def _pair(self, n: int, graph: bool, keep: bool = True) -> "Pair":
        """One batch of each side on the same fresh values, each output compared; the
        candidate first, right after its inputs are written (so that no work its GPU
        streams start on that write runs unseen), the reference after it, on the
        judge's own copies of the values (nothing the candidate writes reaches it).
        Nothing is kept here."""
        at = self.spent
        # Fresh values drawn into the judge's own copies, then written into the lent ones in
        # one copy per input: a candidate whose GPU stream waits for its inputs to change
        # (cuStreamWaitValue32 on a lent buffer) is woken once, right before its batch, and
        # what it runs then is found by the probe that follows, not hidden behind the
        # judge's minutes of drawing.
        with at("draw"):
            self._draw(n)
        with at("write"):
            self._write_lent(n)
        with at("flush"):
            self._flush()
        # Work of the candidate's on the GPU now ran while it was stopped: a stream that
        # waited for its inputs to be written. The pair is measured again (another
        # program's work passes); still there, it is untimed_work (_settled_pair).
        with at("busy"):
            busy_before = self.j.drain.wait(busy_above_s=BEFORE_BATCH_BUSY_S) if self.cuda else 0.0
        with at("measure"):
            sol_s, reply = measure_candidate(self.j, {"op": "batch", "n": n, "graph": graph}, self.limit)
        self.j.note_threads(reply)
        with at("read"):
            outs = self.graph_outs if graph else self._read_calls(reply, n)
        ref, base = self._reference_and_compare(self.graphs[0] if graph else self._eager_reference(), outs, n,
                                                graph, keep)
        sol = (sol_s, _number(reply.get("ms")), _number(reply.get("host_ms")))
        return Pair(n, ref, sol, base, outs, busy_before)

    def _held_pair(self, n: int, keep: bool = True) -> "Pair":
        """One pair of held batches (held.py) on the same fresh values. The candidate
        queues its calls first; then, with it frozen and the GPU idle, the judge writes
        the inputs (work set off by that write, or still running from before, is
        busy_before, as in _pair), flushes L2, and times the release to the done word,
        plus any work of the candidate's still on the GPU after it. Its calls cannot
        have read the inputs before they were written: their outputs are compared."""
        at = self.spent
        with at("draw"):
            self._draw(n)
        with at("queue"):
            q = self.j.holds.queue(n, self.limit, self.call_host_s)
        with at("draw"):
            # The judge's drawing ran on its own stream while the candidate queued; unfinished,
            # the probe below queues behind it and reads it as the candidate's work: honest
            # candidates on 128 MB-1 GB inputs read "busy for 5.5-16.9 ms ... twice" and lost their
            # held batches (6_SiLU, 7_LayerNorm, 8_CrossEntropyLoss, 11_MSELoss; H200, 2026-11-28).
            self.j.sync()
        if q.stalled_at is not None:
            self.j.quiesce()  # the calls ran unheld once released: let them finish, unjudged
            raise held.Stalled("candidate", q.stalled_at)
        self.j.note_threads(q.reply)
        # Bounded: work of the candidate's other streams that waits for the held one reads
        # as a busy GPU until the release (07_untimed_work/side_stream.py: the probe never
        # came back fast), and such a batch is not a held one (_try_holds).
        with at("busy"):
            busy_before = self.j.drain.wait(limit_s=HOLD_BUSY_S, busy_above_s=BEFORE_BATCH_BUSY_S)
        with at("write"):
            self._write_lent(n)
            self.j.sync()
        with at("busy"):
            busy_before += self.j.drain.wait(limit_s=HOLD_BUSY_S, busy_above_s=BEFORE_BATCH_BUSY_S)
        with at("flush"):
            self._flush()
        with at("measure"):
            # The judge's run-queue delay is taken out of this measure (held.release) only where the
            # stopped candidate's processes used no CPU meanwhile; what they used all the same (a
            # thread inside a system call runs on past a stop) is also counted against it (_after).
            holds, freezer = self.j.holds, self.j.remote.freezer
            seconds = holds.release("candidate", q.seq, self.limit, freezer.cpu_by_member)
            late = self.j.drain.settle()  # in the measure too, and so is their CPU meanwhile
            self.held_cotenant_s += holds.stopped_cpu_s + freeze.cpu_used(holds.stopped_cpu_read,
                                                                          freezer.cpu_by_member())
            self.held_wall_s += seconds + late
        if TRACE:
            print(f"[kbench trace] held candidate n={n}: {seconds * 1e6:.0f} us to done, late {late * 1e6:.0f} us, "
                  f"busy before {busy_before * 1e6:.0f} us", flush=True)
        with at("read"):
            outs = self._read_calls(q.reply, n)
        ref, base = self._reference_and_compare(self._eager_reference(), outs, n, False, keep)
        with at("read"):
            # Only now: the request for its claim lets the candidate run again, and the outputs
            # read above are views of its memory, valid while it is frozen. Asked before the
            # comparison, a worker thread that launches each call's kernel after forward returns
            # would finish them during the request, untimed, and be compared finished
            # (thread_after_forward.py). Its 1.45x over its twin, first read as that (H200,
            # 2026-11-28), came again with this order, its outputs timed on the device: the
            # twin's zero fill, which the fixture's empty_like skipped (2026-11-29).
            claim = self.j.holds.claim(q.seq)
        fixed = self._paired_fixed() if n == 1 and keep else None
        return Pair(n, ref, (seconds + late, claim, _number(q.reply.get("host_ms"))), base, outs, busy_before, fixed)

    def _paired_fixed(self) -> tuple[float, float]:
        """An empty held batch of each side's, measured right after a held pair of one
        call each, as that pair's batches were: (candidate's, reference's) seconds. One
        call's few us beside a fixed cost of ~0.35 ms that drifts by tens of us between
        the start of the timing and its pairs: against the fixed cost measured at the
        start, persistent_output.py (timed one call per batch) read -6.3, 12.3 and 20.0 us
        for its 9 us kernel in three runs, 0.64x-1.37x (H200). The candidate knows an empty
        batch when asked for one and could slow it: _keep takes its figure only where it is
        below the one measured at the start."""
        with self.spent("fixed"):
            limit = limits.for_other(self.j.ref_call_s, "batch")
            sol = empty_hold(self.j, limit, idle_within_s=HOLD_BUSY_S)
            self._flush()
            ref = self.j.holds.reference(batches.Eager(self.j.forward_reference, []), 0, limit)[0]
        return sol, ref

    def _eager_reference(self) -> batches.Eager:
        """The reference's eager batch over the judge's current copies (kept from one pair
        to the next, as the candidate keeps its: each batch frees the last one's outputs)."""
        if self.ref_eager is None or self.ref_eager.copies is not self.ref_copies:
            self.ref_eager = batches.Eager(batches.reference_call(self.j.ref), self.ref_copies)
        return self.ref_eager

    def _reference_and_compare(self, ref_batch, outs: list, n: int, graph: bool, keep: bool) -> tuple:
        """What every pair does after the candidate's batch, whatever timed it: the
        reference's batch on the same values (with the candidate's bookkeeping per call,
        done here too and thrown away, outside graphs), the baseline's, the candidate's
        outputs compared, and now and then its inputs checked for writes. (ref, base)."""
        # The candidate's bookkeeping per call, done for the reference too where the host's time
        # is in the measure; a held batch is queued before its clock starts, so none there.
        log = None if graph or self.holding else batches.Log(_quietly(self.locator.at), _quietly(self.locator.describe))
        with self.spent("reference"):
            try:
                ref = self._reference_batch(ref_batch, n, log, keep)
            except batches.CallFailed as e:
                raise self.j.reference_failed(e) from None
            base = None
            if self.baseline is not None:
                self._flush()
                base = self._measure_reference(batches.Eager(self.baseline, self.ref_copies), n)
        with self.spent("compare"):
            self._compare(outs, ref_batch.outs, n)
        self.checked += 1
        if self.checked % MUTATION_EVERY == 1 and not check.same_inputs(self.copies[0], self.ref_copies[0]):
            self.j.flags.add(Flag.INPUT_MUTATION)
        self.result.last_inputs = self.ref_copies[n - 1]
        return ref, base

    def _try_holds(self, n: int) -> tuple[int, str | None]:
        """A held pair of n calls (at most held.MAX_CALLS): (calls a batch, None) when the
        candidate's calls queue behind the hold and compute the inputs written after it,
        else (n, why not). A queue that stops at call k > 0 met the driver's queue depth
        (calls of several kernels) or a synchronize inside a later call: tried again with
        fewer calls. Once a held batch's time is known, n is planned again, up or down: the
        first plan's times per call come from eager batches, whose first at a new size may
        meet the allocator (an honest 3 us ReLU was planned 6 calls a batch, held; its fixed
        cost of 0.35 ms then read 2x its time, H200 2026-11-28)."""
        n = min(n, held.MAX_CALLS)
        ceiling = held.MAX_CALLS
        passed = None  # the n of the last trial whose calls queued and computed the inputs written after the hold
        for attempt in range(3):
            self._bind(n)
            t0 = _perf()
            try:
                p = self._held_trial(n)
            except _SharedMemory as e:
                if n == 1:
                    return n, e.message
                # Only one call a batch can be read (and so timed), held all the same: an eager
                # single call's events hold the host's launch too, ~0.1 ms beside a 14 us kernel,
                # and both sides' figures were then the host's (persistent_output.py read 1.38x
                # its honest twin, H100 2026-11-27).
                self.result.notes.append(f"timed one call per batch: {e.message}")
                n = ceiling = 1
                continue
            except held.Stalled as e:
                who = "its forward" if e.side == "candidate" else "the reference's forward"
                if e.at > 0 and attempt == 2 and passed is not None and passed < e.at:
                    # A plan grown past the driver's queue depth on the last try: the smaller
                    # n that passed is held all the same (an honest GELU of two kernels a call,
                    # planned 672 calls on its third try beside cold builds, stopped at call 510
                    # and was timed in eager bursts at 0.36x, against 0.69x held; H200 2026-11-29).
                    self.plans.append(f"tried {n} held: stopped queueing at call {e.at + 1} -> {passed}")
                    return passed, None
                if e.at == 0 or attempt == 2:
                    return n, (f"{who} waits for the GPU (a synchronize or a copy to the host?): a held batch "
                               f"stopped queueing at call {e.at + 1} of {n}")
                n = ceiling = max(1, int(0.8 * e.at))
                continue
            except TaskFailed as e:
                if e.status is not Status.INCORRECT:
                    raise
                return n, (f"the outputs of held calls do not match the inputs written after the hold (work outside "
                           f"the held stream, on another stream that does not wait for it?): {e.message[:200]}")
            if p.busy_before:
                return n, (f"the GPU read busy for {p.busy_before * 1e3:.1f} ms around the input write of a held "
                           "batch, twice (work on other streams that waits for the held one, or work set off by "
                           "the write)")
            trial_s, passed = _perf() - t0, n
            per_call = ((p.ref[0] - self.ref_fixed_s) / n, (p.sol[0] - self.fixed_s) / n)
            again = min(ceiling, self._plan(*per_call))
            self.plans.append(f"tried {n} held: us a call {_us(per_call, 1)} -> {again}")
            # Room for trying `again` and sampling it, at what this trial cost the judge per call
            # (its eager growth, both held batches, drawing, reading and comparing), fixed part
            # included: an upper bound for more calls. The eager pairs' cost per call, which
            # _pair_s has, carries the candidate's Python launches (2.4 ms a call planned for a 3
            # us ReLU), and held the ReLU at 11 calls a batch where its held trial asked for 352;
            # its fixed cost's jitter then kept it from converging (2 s budget spent, H200
            # 2026-11-28, bench/lane_trace.md).
            if attempt < 2 and (again > 1.5 * n or 1.5 * again < n) and self.budget.fits(2 * trial_s * again / n):
                # room for trying `again` (an eager and a held pair) and then sampling it
                n = again
                continue
            return n, None
        return n, None

    def _held_trial(self, n: int) -> "Pair":
        """A held pair of n calls to try them, not kept, after the candidate has run an
        eager batch of the same n (_grow): its allocator then holds memory for n outputs
        (a held batch that must ask the driver for new memory waits, as cudaMalloc waits
        for the held stream, and would read as a forward that synchronizes). One that
        reads the GPU busy around its input write is tried once more: once is not the
        candidate's, as the judge's probe can wait out a time slice of another context
        (honest 95_CrossEntropyLoss read 1.0 ms once on an H100, builds beside it); twice
        in a row is (dma_cotenant.py: 1.1 ms every time), after a full eager pair."""
        self._grow(n)
        p = self._held_pair(n, keep=False)
        if p.busy_before:
            time.sleep(CONTENDED_PAUSE_S)
            self._pair(n, graph=False, keep=False)
            p = self._held_pair(n, keep=False)
        return p

    def _grow(self, n: int) -> None:
        """The candidate's eager batch of n calls on whatever its lent copies hold, its
        GPU drained, nothing read or compared: only its allocator's growth is wanted (a
        full pair here drew n sets of inputs and ran and compared the reference's batch
        too, up to a third of a task's timing on an H100). The judge's own allocator
        grows in the held pair's reference batch, which is not kept either."""
        with self.spent("grow"):
            # Valid values in every lent copy (one set, broadcast): a bound loan holds
            # whatever its memory held, and class indices read from it could send an
            # honest kernel out of bounds.
            values = self.j.make_inputs(self._next_seed())
            for lent, v in zip(self.stacked, values):
                if isinstance(lent, torch.Tensor):
                    if not isinstance(v, torch.Tensor) or v.shape != lent.shape[1:] or v.dtype != lent.dtype:
                        self._pair(n, graph=False, keep=False)  # _draw says what is wrong with the problem
                        return
                    lent[:n].copy_(v.unsqueeze(0).expand(n, *v.shape))
            self.j.sync()
            measure_candidate(self.j, {"op": "batch", "n": n, "graph": False}, self.limit)

    def _claim_tolerance(self) -> tuple[float, float]:
        """(share of the judge's measure, seconds a batch) by which the candidate's own
        events may stand below it: held batches' measure is the device's time, tighter."""
        return (HOLD_CLAIM_SHARE, HOLD_CLAIM_BATCH_S) if self.holding else (CLAIM_SHARE, CLAIM_BATCH_S)

    def _settled_pair(self, n: int, graph: bool) -> "Pair":
        """A pair whose candidate batch took the judge longer than its own events explain
        is run again after a pause that grows: another program's time slices on the GPU
        (the next task's judge making its CUDA context, say) are in the judge's clock and
        not in the candidate's events. A claim that is simply low stays low, and the last
        try is kept (Timer._after judges the claims)."""
        share, batch_s = self._claim_tolerance()
        for attempt in range(CONTENDED_RETRIES + 1):
            try:
                p = self._held_pair(n) if self.holding else self._pair(n, graph)
            except held.Stalled as e:
                if attempt == CONTENDED_RETRIES:
                    raise _HoldsFailed(f"held batches stopped queueing while sampling ({e.side}'s, at call {e.at + 1} "
                                       f"of {n}) in {CONTENDED_RETRIES + 1} tries") from None
                continue
            judged, claimed = p.sol[0] - self.fixed_s, p.sol[1]
            if not p.busy_before and (not self.cuda or claimed is None
                                      or judged - claimed / 1e3 <= share * judged + batch_s):
                return p
            if attempt < CONTENDED_RETRIES:
                time.sleep(CONTENDED_PAUSE_S * 2 ** attempt)
        if p.busy_before:
            self.result.flags.add(Flag.UNTIMED_WORK)
            note = (f"the GPU was busy for {p.busy_before * 1e3:.2f} ms after the judge wrote the candidate's inputs "
                    "and before its batch was asked for, in every try: work of the candidate's that its inputs set off "
                    "while it was stopped (a stream waiting on them?)")
            if note not in self.result.notes:
                self.result.notes.append(note)
        return p

    def _keep(self, p: "Pair", into: "PairResult | None" = None) -> None:
        r = into or self.result
        # A pair of one call each carries its own fixed costs (_paired_fixed); the candidate's
        # never above the one measured at the start, so that slowing its empty batches cannot
        # speed up its calls.
        fixed, ref_fixed = (min(p.fixed[0], self.fixed_s), p.fixed[1]) if p.fixed else (self.fixed_s, self.ref_fixed_s)
        _add(r.ref, (p.ref[0] - ref_fixed) / p.n, p.ref[1], p.ref[2], p.n)
        _add(r.sol, (p.sol[0] - fixed) / p.n, p.sol[1], p.sol[2], p.n)
        if p.base is not None and r.baseline is not None:
            _add(r.baseline, (p.base[0] - self.ref_fixed_s) / p.n, p.base[1], p.base[2], p.n)

    def _reference_batch(self, batch, n: int, log: batches.Log | None, keep: bool) -> tuple:
        """A reference batch, measured again (after a pause that grows) where other work on
        the GPU slowed it: another process's time slices show in the wall time, not in the
        batch's own events. Still slowed after the last try, a kept batch flags the task."""
        for attempt in range(CONTENDED_RETRIES + 1):
            self._guard_own_scheduling()
            self._flush()
            cpu0 = self.j.remote.freezer.cpu_seconds()
            seconds, events, host = self._measure_reference(batch, n, log)
            # A stopped process's thread inside a system call (a long mmap(MAP_POPULATE), a
            # read) runs on until the call returns: its CPU beside the reference is counted.
            self.cotenant_s += self.j.remote.freezer.cpu_seconds() - cpu0
            self.ref_wall_s += seconds
            if TRACE:
                print(f"[kbench trace] reference n={n}: {seconds * 1e6:.0f} us, its events {events}", flush=True)
            if events is None:
                return seconds, events, host
            excess = seconds - self.ref_fixed_s - events / 1e3
            if excess <= max(CONTENDED_SHARE * events / 1e3, CONTENDED_MIN_S):
                return seconds, events, host
            if attempt < CONTENDED_RETRIES:
                time.sleep(CONTENDED_PAUSE_S * 2 ** attempt)
        if keep:
            self.result.flags.add(Flag.CONTENDED)
            note = (f"the reference's batches met other work on the GPU: a batch of {n} took {seconds * 1e3:.3f} ms "
                    f"(fixed cost {self.ref_fixed_s * 1e3:.3f} ms) against {events:.3f} ms on its own events, "
                    f"{CONTENDED_RETRIES + 1} tries over {CONTENDED_PAUSE_S * 2 ** CONTENDED_RETRIES:.1f} s")
            if not any(n_.startswith("the reference's batches met") for n_ in self.result.notes):
                self.result.notes.append(note)
        return seconds, events, host

    def _guard_own_scheduling(self) -> None:
        """The candidate runs as the judge's user: it can renice the judge, change its
        scheduling policy or its CPUs (Landlock does not stop that), and starve the
        reference's loop. Put back what can be put back, and say so (tampering)."""
        now = _scheduling()
        if now == self.sched:
            return
        self.j.flags.add(Flag.TAMPERING)
        note = "the judge's scheduling (nice, policy or CPUs) was changed from outside while the task ran"
        if note not in self.result.notes:
            self.result.notes.append(note)
        try:
            os.setpriority(os.PRIO_PROCESS, 0, self.sched[0])
            os.sched_setscheduler(0, self.sched[1], os.sched_param(0))
            os.sched_setaffinity(0, self.sched[2])
        except (OSError, AttributeError):
            pass  # lowering one's nice needs privileges: the flag stands

    def _read_calls(self, reply: dict, n: int) -> list:
        """The candidate's n outputs, read from its memory. Outputs of different calls
        that share memory are refused (only the last call's would be there to read)."""
        first, ats, odd = reply.get("first"), reply.get("ats"), reply.get("odd") or {}
        if not isinstance(ats, list) or len(ats) != n or not isinstance(odd, dict):
            raise TaskFailed(Status.CRASHED, "the candidate described its batch's outputs wrongly")
        self.j.quiesce()
        rows = self._read_rows(first, ats, odd, reply.get("segs"), n)
        if rows is not None:
            return rows
        descs = [odd.get(str(i)) or (first if i == 0 else _with_locations(first, ats[i])) for i in range(n)]
        segs = reply.get("segs") if isinstance(reply.get("segs"), list) else []
        if n > 1:
            _refuse_shared_memory(descs, segs)
        return [self.j.read({"out": desc, "segs": segs}, settled=True) for desc in descs]

    def _read_rows(self, first: Any, ats: list, odd: dict, segs: Any, n: int) -> list | None:
        """_read_calls where every call returned one tensor laid out as the first's
        (Reader.read_rows), or None (read them one by one)."""
        if odd or n < 2 or not isinstance(first, dict) or first.get("t") != "Tensor" or not isinstance(segs, list):
            return None
        if not all(type(a) is list and len(a) == 1 for a in ats[1:]):
            return None
        locs = [first.get("at"), *(a[0] for a in ats[1:])]
        outs = self.j.read_rows(first, locs, segs)
        if outs is None:
            return None
        # Overlaps on a GPU by the addresses the judge mapped the outputs at (a reply may name
        # one allocation twice, its handle in two base64 spellings), on the CPU by the
        # candidate's (the judge reads copies there, which never overlap).
        span = span_bytes(list(outs[0].shape), list(outs[0].stride()), outs[0].element_size())
        on_gpu = outs[0].device.type == "cuda"
        _refuse_overlaps([((), o.data_ptr() if on_gpu else a[1], span, i) for i, (o, a) in enumerate(zip(outs, locs))])
        return outs

    def _compare(self, sol_outs: list, ref_outs: list, n: int) -> None:
        """Every call's output against the reference's on the same values (relative L2),
        and one call, picked now, in full."""
        bound = self.j.timed_bound()
        errors = []  # one call: the full comparison says it
        if n > 1:
            errors = check.rows_rel_l2(sol_outs, ref_outs) or check.batch_rel_l2(sol_outs, ref_outs)
        for i, err in enumerate(errors):
            if not err <= bound:  # NaN fails
                self._full(sol_outs[i], ref_outs[i], i, n, bound)  # the full comparison says why (or passes NaN twins)
        pick = self.rng.randrange(n)
        self._full(sol_outs[pick], ref_outs[pick], pick, n, bound)

    def _full(self, sol: Any, ref: Any, i: int, n: int, bound: float) -> None:
        try:
            check.compare_outputs(sol, ref, None, l2_bound=bound)
        except check.Mismatch as e:
            which = f"a timed call ({i + 1} of a batch of {n})" if n > 1 else "a timed call"
            raise TaskFailed(Status.INCORRECT, f"output of {which} does not match the reference's: {e}") from None

    # -- planning -----------------------------------------------------------------
    def _plan(self, ref_s: float, sol_s: float) -> int:
        """Calls per batch: each side's batch long enough for its own fixed cost to be
        FIXED_SHARE of it (HOLD_FIXED_SHARE held; the candidate's held fixed cost carries a
        switch of contexts, ~0.35 ms, the judge's own reference ~0.015 ms), the slower
        side's no longer than MAX_BATCH_S, within memory."""
        floor, share = (TARGET_HELD_S, HOLD_FIXED_SHARE) if self.holding else (TARGET_S[self.j.device.type], FIXED_SHARE)
        ref_s, sol_s = max(ref_s, 1e-7), max(sol_s, 1e-7)
        n = max(math.ceil(max(floor, self.ref_fixed_s / share) / ref_s), math.ceil(max(floor, self.fixed_s / share) / sol_s))
        n = max(1, min(MAX_CALLS, n, math.floor(MAX_BATCH_S / max(ref_s, sol_s))))
        per_copy = 2 * shapes.nbytes(self.copies[0]) + 2 * max(self.out_bytes, 1)  # lent and own; both outputs
        if self.cuda:
            free, _total = torch.cuda.mem_get_info(self.j.device)
            n = min(n, max(1, int(MEMORY_SHARE * free // per_copy)))
        else:
            n = min(n, max(1, (1 << 30) // per_copy))
        return n

    def _try_graphs(self, n: int, replanned: bool = False) -> tuple[int, str | None]:
        """Capture n calls in a graph on both sides and check that the candidate's graph
        recomputes its outputs from new inputs: (calls a batch, None) when it does, else
        (n, why not). n came from eager calls; a replay is faster, so once its time is
        known, n is planned again (and the graphs captured again) where that adds calls."""
        try:
            ref_graph = batches.Graph(self.j.forward_reference, self.ref_copies, n)
        except Exception as e:  # noqa: BLE001 - a reference may not be capturable: not the problem's bug
            _settle(self.j.device)
            return n, f"the reference cannot be captured: {str(e).splitlines()[0][:200]}"
        limit = self.j.call_limit(None, f"capturing {n} calls in a CUDA graph", n, first=True)
        reply, _ = self.j.ask({"op": "capture", "n": n}, limit=limit)
        if not reply.get("ok"):
            return n, str(reply.get("message"))[:300]
        try:
            self.graph_outs = self._read_calls(reply, n)  # static: the same memory at every replay
            self.graphs = (ref_graph, reply)
            p = self._pair(n, graph=True, keep=False)
        except TaskFailed as e:
            if e.status is not Status.INCORRECT:
                raise
            self.graphs = None
            return n, f"the graph does not recompute the output from new inputs ({e.message[:200]})"
        again = self._plan((p.ref[0] - self.ref_fixed_s) / n, (p.sol[0] - self.fixed_s) / n)
        if not replanned and again > 1.5 * n:
            self.graphs = self.graph_outs = None
            self._bind(again)
            return self._try_graphs(again, replanned=True)
        return n, None

    # -- the run --------------------------------------------------------------------
    def run(self) -> PairResult:
        r = self.result
        self.budget = stopping.Budget(self.cfg.budget_s)
        self.rule = stopping.StopRule(self.cfg.min_samples, self.cfg.max_samples, self.cfg.target_rel_ci)
        started = sandbox.started_by(os.getpid(), self.j.remote.proc.pid)
        stage = self.spent
        with stage("fixed"):
            self._fixed_costs()
        self.checked = 0
        with stage("bind"):
            self._bind(1)
        gc.collect()
        gc.disable()  # a collection inside a batch would be charged to it
        try:
            with stage("warm"):
                warm = self._warm_up()
            with stage("estimate"):
                per_call = self._per_call_estimate()
            self.call_host_s = stats.median(self.warm.sol.host_ms[1:]) / 1e3 if self.warm.sol.host_ms[1:] else 0.0
            planned, graph = self._plan(*per_call), False
            self.plans.append(f"us a call {_us(per_call, 1)}, {planned} calls eager")
            n, why_not_held = planned, None
            with stage("try"):
                if self.hold_fixed is not None:
                    # The first held batch as long as an eager one: the times per call above come
                    # from eager batches, and where the host's launches or a first batch's allocations
                    # swell them (2531 us planned for an honest 12 us Affine), a plan on the held
                    # fixed costs from them asked for 1-7 calls, whose measure the fixed cost's
                    # jitter then decided (slow_warmup_small_batch.py read 1.7x its twin, H200
                    # 2026-11-28). The held batch's own times plan it again (_try_holds).
                    self._use_holds()
                    held_n, why_not_held = self._try_holds(self._within_budget(planned))
                    if why_not_held is None:
                        n = held_n
                    else:
                        self._drop_holds()
                elif self.cuda and self.cfg.mode in ("auto", "hold"):
                    why_not_held = self.j.hold_unavailable or "the GPU's stream cannot be held here"
                if not self.holding:
                    n, graph = self._unheld_batch(planned, per_call, warm)
            if why_not_held:
                r.notes.append(f"not timed in held batches: {why_not_held}")
            r.calls = n
            r.clock = ("cuda_hold" if self.holding else "cuda_graph" if graph else "cuda_burst") if self.cuda \
                else "cpu_clock"
            try:
                with stage("sample"):
                    self._sample(n, graph)
            except _HoldsFailed as e:  # sampled again, from the start, in eager batches
                self._drop_holds()
                r.notes.append(f"not timed in held batches: {e}")
                r.ref, r.sol = Side(), Side()
                r.baseline = Side() if self.baseline else None
                with stage("sample"):
                    self._bind(n)
                    r.calls, r.clock = self._eager_calls(n), "cuda_burst"
                    self._sample(r.calls, False)
        finally:
            gc.enable()
        with stage("after"):
            self._after(sandbox.started_by(os.getpid(), self.j.remote.proc.pid) - started)
        print(f"[kbench] timing: {r.clock}, {r.calls} calls a batch, {len(r.sol.ms)} pairs ({r.stop_reason}) in "
              f"{self.budget.spent():.2f} s of a {self.budget.seconds:g} s budget; fixed "
              f"cost us: candidate {self.fixed_s * 1e6:.0f} (before/after import {_us(self.fixed_parts)}), reference "
              f"{self.ref_fixed_s * 1e6:.0f}; warm-up us per call: reference "
              f"{stats.median(self.warm.ref.ms[1:] or self.warm.ref.ms) * 1e3:.1f}, solution "
              f"{stats.median(self.warm.sol.ms[1:] or self.warm.sol.ms) * 1e3:.1f}; "
              f"medians us: reference {stats.median(r.ref.ms) * 1e3:.2f}, solution {stats.median(r.sol.ms) * 1e3:.2f}, "
              f"its own events {stats.median(r.sol.claimed_ms) * 1e3 if r.sol.claimed_ms else float('nan'):.2f}; "
              f"stages s: {self.spent.line(STAGES)}; in pairs s: {self.spent.line(STEPS)}; plan: {'; '.join(self.plans)}",
              flush=True)
        return r

    def _unheld_batch(self, planned: int, per_call: list[float], warm: list["Pair"]) -> tuple[int, bool]:
        """(calls a batch, whether a CUDA graph replays them) where batches are not held:
        the planned n as far as the budget has room, in a graph for microsecond calls
        where the graph is valid, else eager (one call a batch where calls share memory)."""
        wants = self.cuda and (self.cfg.mode == "graph" or (self.cfg.mode in ("auto", "hold") and
                                                            min(per_call) * 1e3 < self.cfg.graph_below_ms))
        m = self.many[0] if self.many else 0
        if not wants and m and planned <= 2 * m:
            # The estimate's batch is long enough (its fixed cost at most twice the planned
            # share), and no longer than its own plan allowed (m came from the single calls'
            # times, which are no shorter): its loan is bound and warm and its outputs were
            # read apart, so its calls (or its first n, where the budget is short) are the
            # batch and no pair goes to trying them.
            n = self._within_grace(m)
            if self.n < n:  # held batches were tried since, on a loan of their own size
                self._bind(n)
            if n == 1 and not self.cuda:
                self._keep_warm(warm)
            return n, False
        n = self._within_budget(planned)
        if n > 1:
            self._bind(n)
            n, why = self._try_graphs(n) if wants else (n, None)
            graph = wants and why is None
            if why:
                self.result.notes.append(f"timed in eager batches, not CUDA graphs: {why}")
            return (n if graph else self._eager_calls(n)), graph
        if not self.cuda:
            self._keep_warm(warm)
        return n, False

    def _warm_up(self) -> list["Pair"]:
        """Pairs of single calls until the candidate has run WARM_PAIRS and warmup_s (or
        WARM_SHARE_OF_BUDGET of the budget, if less; no time where batches will be held) has
        passed (first calls may autotune, allocate, load modules; the check has run a few on
        these shapes already), as far as the budget has room for them: a pair of slow calls
        may be all it holds. Returns the pairs; self.one_s is what one such pair costs the judge."""
        self.warm = PairResult(Side(), Side(), "", self.result.clock, 1, 0.0, 0.0)
        pairs: list[Pair] = []
        walls: list[float] = []
        # Held batches are tried before any is kept (_try_holds: a held pair or more, not kept,
        # each as long as the batches sampled after it): they warm the candidate on the path it
        # is timed on, and the single calls here only plan; their 0.2 s was 15-25% of a
        # converged task's timing (0.75-1.1 s, 12 problems, H200, 2026-11-28).
        warm_s = 0.0 if self.hold_fixed is not None else min(self.cfg.warmup_s,
                                                               WARM_SHARE_OF_BUDGET * self.budget.seconds)
        t0 = _perf()
        while True:
            s0 = _perf()
            p = self._pair(1, graph=False, keep=False)
            walls.append(_perf() - s0)
            pairs.append(p)
            self._keep(p, self.warm)
            self.out_bytes = self.result.out_bytes = shapes.nbytes(p.outs[0])
            self.one_s = max(walls[1:] or walls)  # the first pair also met new memory
            if len(pairs) >= 1000 or (len(pairs) >= WARM_PAIRS and _perf() - t0 >= warm_s):
                return pairs
            if not self.budget.fits(self.one_s):
                return pairs

    def _per_call_estimate(self) -> list[float]:
        """Seconds per call of each side, for planning: the growth of a batch's time from
        1 call to WARM_CALLS, so that whatever a batch costs beyond its calls (which a
        single call's time is mostly, for calls of microseconds) does not count. Without
        room in the budget for that batch, the single calls' times."""
        one = [stats.median(s.ms[1:] or s.ms) / 1e3 for s in (self.warm.ref, self.warm.sol)]
        n = min(WARM_CALLS, self._plan(*one))
        if n < 2 or not self.budget.fits(self._pair_s(n)):
            return one
        self._bind(n)
        s0 = _perf()
        try:
            p = self._pair(n, graph=False, keep=False)
        except _SharedMemory:
            return one  # one output buffer for every call: _eager_calls finds it again, and says so
        self.many = (n, _perf() - s0)
        whole = [p.ref[0] - self.ref_fixed_s, p.sol[0] - self.fixed_s]  # the batch of n calls, s
        return [max((t - o) / (n - 1), 1e-7) for t, o in zip(whole, one)]

    def _keep_warm(self, warm: list["Pair"]) -> None:
        """On the CPU the warm-up's pairs were measured as samples are (one call a batch,
        fresh inputs, cold caches, every output compared): samples, but for the first (its
        process met the loan's memory first), unless it is all there is."""
        for p in warm[1:] or warm:
            self._keep(p)

    def _pair_s(self, n: int) -> float:
        """What a pair of n-call batches is expected to cost the judge."""
        return stopping.pair_cost(n, self.one_s, self.many)

    def _within_grace(self, m: int) -> int:
        """Calls of the first sample's batch, at most m: sampling takes one pair whatever
        the budget says, so it may end past the budget by at most stopping.GRACE_S."""
        n = m
        while n > 1 and not self.budget.fits(self._pair_s(n) - stopping.GRACE_S):
            n //= 2
        return n

    def _within_budget(self, n: int) -> int:
        """n calls a batch, or fewer where the budget has no room for two such pairs (one
        to try the calls, one sample): fewer calls measure less finely, none measure nothing."""
        planned = n
        while n > 1 and not self.budget.fits(2 * self._pair_s(n)):
            n //= 2
        if n < planned and not any(x.startswith(f"timed {n} calls a batch, not {planned}") for x in self.result.notes):
            self.result.notes.append(f"timed {n} calls a batch, not {planned}: the time budget "
                                     f"({self.budget.seconds:g} s) had no room for batches that long")
        return n

    def _eager_calls(self, n: int) -> int:
        """n, or 1 where the candidate's calls share their output memory (the outputs
        of the calls before the last cannot be read: only one call per batch can be
        checked, so only one per batch is timed)."""
        try:
            self._pair(n, graph=False, keep=False)
        except _SharedMemory as e:
            self.result.notes.append(f"timed one call per batch: {e.message}")
            self._bind(1)
            return 1
        return n

    def _sample(self, n: int, graph: bool) -> None:
        """Pairs until the speedup is known to target_rel_ci (after min_samples pairs and
        MIN_SAMPLING_S), or the next pair would end past the budget (one sample at least),
        or max_samples: stop_reason says which (stopping.py)."""
        r = self.result
        if not self.cuda and not r.sol.ms:
            self._settle(n, graph)
        t0 = _perf()
        cost, recent = self._pair_s(n), []
        r.stop_reason = stopping.MAX_SAMPLES
        while len(r.sol.ms) < self.rule.max_samples:
            if r.sol.ms and not self.budget.fits(cost):
                r.stop_reason = stopping.BUDGET
                break
            s0 = _perf()
            try:
                with walk.pair():
                    p = self._settled_pair(n, graph)
                self._keep(p)
            except _SharedMemory as e:  # these calls were read apart when tried: not one buffer by design
                raise TaskFailed(Status.INCORRECT, f"output of a timed call is another call's: {e.message[:200]}; "
                                 "the same calls were read apart before (a replay?)") from None
            recent = (recent + [_perf() - s0])[-3:]
            cost = max(recent)
            sides = [r.ref.ms, r.sol.ms] + ([r.baseline.ms] if r.baseline else [])
            if self.rule.converged(sides, _perf() - t0):
                r.stop_reason = stopping.CONVERGED
                break
        if len(r.sol.ms) < self.rule.min_samples:
            r.notes.append(f"{len(r.sol.ms)} pairs of batches: the time budget ({self.budget.seconds:g} s) ended "
                           f"sampling before the minimum of {self.rule.min_samples}; a larger --time-budget buys more")

    def _settle(self, n: int, graph: bool) -> None:
        """On the CPU, one pair at the sampled batch size before the samples, not kept, where
        the budget has room for it and a sample: a process's heap grows to a batch's
        footprint over its first pairs (glibc's memalign leaves holes that the next batch's
        outputs do not fit), and every page met for the first time is CPU time (2048 pages,
        one 8 MB output: 3.3 ms on the 2-core CI box, beside a 1.3 ms C++ affine call)."""
        if self.budget.fits(2 * self._pair_s(n)):
            self._settled_pair(n, graph)

    def _after(self, started_s: float) -> None:
        """Processes the candidate started that used the CPU while it was timed (an
        honest solution starts none; they are frozen with it, but what ran and ended
        inside a batch is not in its measure on the CPU); and which figures stand.

        The judge's wall clock around a batch bounds each side's time; within a batch,
        CUDA events time the device's work more finely (the judge's measure carries the
        wake-up of a process stopped for the other side's turn and the GPU's switch to
        its context: 0.3-0.5 ms a batch on an H200, 2026-11-26, that the calibration
        does not quite reproduce). The reference's figure is its own events. The
        candidate's events are its claim:
          * no lower than CLAIM_SHARE below the judge's measure: its figure (a forged
            claim gains at most that: 1 / (1 - 0.15) = 1.18x; a claim above the measure
            only says the candidate is slower);
          * lower than that by no more than CLAIM_BATCH_S a batch plus CLAIM_SHARE (what
            that extra cost explains, for short batches): the judge's measure is the figure;
          * anything else: timing_mismatch, and the judge's measure is the figure."""
        r, j = self.result, self.j
        if started_s > STARTED_MAX_S:
            r.flags.add(Flag.UNTIMED_WORK)
            r.notes.append(f"processes the solution started used {started_s:.2f} s of CPU while it was timed")
        for used_s, wall_s, where in ((self.cotenant_s, self.ref_wall_s, "beside the reference's {:.2f} s of batches"),
                                      (self.held_cotenant_s, self.held_wall_s,
                                       "during the judge's {:.2f} s of measures of its held batches")):
            if used_s > max(STARTED_MAX_S, COTENANT_SHARE * wall_s):
                r.flags.add(Flag.UNTIMED_WORK)
                r.notes.append(f"the candidate's processes used {used_s:.2f} s of CPU while stopped, "
                               f"{where.format(wall_s)} (work inside a system call runs on past a stop)")
        j.ask({"op": "guard"})
        waited, kept = (j.holds.waited_s, j.holds.kept_s) if self.holding else (0.0, 0.0)
        if waited >= HOST_WAIT_NOTE_S:  # the host's, not the candidate's: said, never flagged
            r.notes.append(f"the host kept the judge from a CPU for {waited * 1e3:.1f} ms inside its held measures "
                           "(its run-queue delay), taken out of them: a busy host")
        if kept >= HOST_WAIT_NOTE_S:
            r.notes.append(f"the judge waited {kept * 1e3:.1f} ms for a CPU inside held measures while the stopped "
                           "candidate's processes used CPU, and that wait stayed in them")
        own = lambda side: side.claimed_ms if len(side.claimed_ms) == len(side.ms) else side.ms  # noqa: E731
        r.ref.figure, r.sol.figure = own(r.ref), r.sol.ms
        if r.baseline is not None:
            r.baseline.figure = own(r.baseline)
        if not (self.cuda and r.sol.ms):
            return
        judged = stats.median(r.sol.ms)
        claimed = stats.median(r.sol.claimed_ms) if len(r.sol.claimed_ms) == len(r.sol.ms) else None
        share, batch_s = self._claim_tolerance()
        if claimed is not None and claimed > 0 and claimed >= (1 - share) * judged:
            # Above the judge's measure too: a claim that its calls were slower costs only the
            # candidate (the judge's measure reads low where the host was busier while the fixed
            # cost was measured than during the batches: builds running beside a cold run).
            r.sol.figure = r.sol.claimed_ms
            return
        explained = share * judged + batch_s * 1e3 / r.calls
        if claimed is not None and 0 < claimed < judged and judged - claimed <= explained:
            # Each sample's figure is the lowest its measure allows, not the measure: with the measure
            # itself, a claim just past the share read a task's speedup up to 1 / (1 - share) away from
            # a run whose claim was just inside it (5_CosineSimilarityLoss, 62 calls a batch: 3.43-3.45x
            # on the measure, 3.80-3.92x on its events, H200, 2026-11-29). Dominated sample by sample,
            # the median stays at or above (1 - share) of the measure's: a claim here gains no more
            # than one at the share's edge already does.
            r.sol.figure = [max(c, (1 - share) * m) for c, m in zip(r.sol.claimed_ms, r.sol.ms)]
            r.notes.append(f"the candidate's own events read {claimed:.4f} ms per call against the judge's "
                           f"{judged:.4f} ms, batches of {r.calls} too short to tell them apart: each sample is "
                           f"taken at {1 - share:.0%} of the judge's measure where its events read lower")
            return
        r.flags.add(Flag.TIMING_MISMATCH)
        said = f"read {claimed:.4f} ms per call" if claimed is not None else "are missing or malformed"
        r.notes.append(f"the candidate's own events {said} against the judge's {judged:.4f} ms (allowed "
                       f"{explained:.4f} ms less): work outside its stream, or forged events; the judge's figure stands")


@dataclass
class Pair:
    n: int
    ref: tuple  # (seconds, own events ms, host ms)
    sol: tuple
    base: tuple | None
    outs: list  # the candidate's outputs as read
    busy_before: float = 0.0  # seconds the GPU was busy between writing the inputs and the batch
    fixed: tuple[float, float] | None = None  # its own empty batches' seconds (candidate, reference): _paired_fixed


class _HoldsFailed(Exception):
    """Held batches stopped working while sampling: the task is sampled again without them."""


class _SharedMemory(TaskFailed):
    def __init__(self, message: str):
        super().__init__(Status.INCORRECT, message)


def _refuse_shared_memory(descs: list, segs: list) -> None:
    """Raise _SharedMemory where the outputs of two calls overlap in the candidate's
    memory (by the locations it gave: on the CPU the judge reads copies, which never do)."""
    _refuse_overlaps([(key, start, size, i) for i, desc in enumerate(descs) for key, start, size in _locations(desc, segs)])


def _refuse_overlaps(spans: list[tuple]) -> None:
    """Raise _SharedMemory where two calls' outputs overlap: spans (memory, start, bytes, call)."""
    spans = sorted((key, start, start + size, i) for key, start, size, i in spans)
    for (ka, a0, a1, i), (kb, b0, b1, k) in zip(spans, spans[1:]):
        if ka == kb and b0 < a1 and i != k:
            raise _SharedMemory(f"the outputs of calls {min(i, k) + 1} and {max(i, k) + 1} share memory (one output "
                                "buffer for every call?)")


def _locations(desc: Any, segs: list):
    """(memory, start, bytes) of each tensor an output description places."""
    if isinstance(desc, dict) and isinstance(desc.get("items"), list):
        for item in desc["items"]:
            yield from _locations(item, segs)
    elif isinstance(desc, dict) and desc.get("t") == "Tensor" and isinstance(desc.get("at"), list):
        at = desc["at"]
        try:
            size = span_bytes(desc["shape"], desc["stride"], torch.empty((), dtype=channel.dtype_of(desc["dtype"])).element_size())
        except (KeyError, TypeError, channel.ChannelError):
            return
        if size and at[:1] == ["addr"] and len(at) == 2:
            yield ("addr",), at[1], size
        elif size and at[:1] in (["seg"], ["lent"]) and len(at) == 3:
            where = segs[at[1]] if at[0] == "seg" and isinstance(at[1], int) and 0 <= at[1] < len(segs) else at[1]
            try:  # the handle, not its spelling: base64 has several for one handle
                where = base64.b64decode(where, validate=True) if at[0] == "seg" else where
            except (binascii.Error, TypeError, ValueError):
                pass
            yield (at[0], where), at[2], size


def _scheduling() -> tuple:
    """This process's nice, scheduling policy and CPUs."""
    return (os.getpriority(os.PRIO_PROCESS, 0), os.sched_getscheduler(0), frozenset(os.sched_getaffinity(0)))


def _varies(rows: torch.Tensor) -> bool:
    """Whether any row differs from the first (a drawn input that varies between calls)."""
    flat = rows.reshape(rows.shape[0], -1)
    return bool((flat[1:] != flat[:1]).any()) if rows.shape[0] > 1 else False


def _rows(stacked: list, n: int) -> list[list]:
    """Call i's inputs: row i of each stacked tensor, or the plain value."""
    return [[s[i] if isinstance(s, torch.Tensor) else s for s in stacked] for i in range(n)]


def _quietly(fn: Callable) -> Callable:
    """The locator's work, for the reference's outputs: its answer is not needed, so
    memory it cannot locate is not the judge's failure."""
    def run(x):
        try:
            return fn(x)
        except Exception:  # noqa: BLE001
            return None
    return run


def _with_locations(first: Any, ats: Any) -> Any:
    """The first call's description with each tensor's location replaced, in order."""
    if not isinstance(ats, list):
        raise TaskFailed(Status.CRASHED, "the candidate described its batch's outputs wrongly")
    it = iter(ats)

    def walk(d: Any) -> Any:
        if isinstance(d, dict) and "items" in d and isinstance(d["items"], list):
            return {**d, "items": [walk(x) for x in d["items"]]}
        if isinstance(d, dict) and "at" in d and d.get("t") == "Tensor":
            return {**d, "at": next(it, None)}
        return d

    return walk(first)


def _add(side: Side, per_call_s: float, events_ms: float | None, host_ms: float | None, n: int) -> None:
    side.ms.append(per_call_s * 1e3)
    if events_ms is not None:
        side.claimed_ms.append(events_ms / n)
    if host_ms is not None:
        side.host_ms.append(host_ms / n)


def _us(seconds, digits: int = 0) -> str:
    """Seconds as microseconds, "a/b", for the timing line."""
    return "/".join(f"{x * 1e6:.{digits}f}" for x in seconds)


def _number(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else None


def _settle(device: torch.device) -> None:
    try:
        torch.cuda.synchronize(device)
    except Exception:  # noqa: BLE001 - a capture error is not sticky
        pass
