"""Timing across the boundary: the reference here, the solution in its process.

Sample pairs alternate, reference then solution, each on the same freshly
drawn inputs (get_inputs with a new seed per pair, written into the buffers
the candidate was lent), so nothing can be replayed from an earlier call and
drift hits both sides. Each side's sample is the same clock code (timer.py)
and ends with a projection of the call's output (fingerprint.py), which the
judge compares with the reference's: every timed call is checked.

What the candidate reports is bounded by what the judge measures from outside:
the wall time of each request. With rtt the cost of an empty request, an
honest sample leaves wall - rtt - claimed close to the same overhead the
judge's own samples leave (flush, launch shadow, syncs, projection: same
code). Claims that leave more than ALLOWANCE beyond that are refused: flag
timing_mismatch, no speedup. So a forger can shave at most the allowance off
each call; the README states it.
"""
from __future__ import annotations

import gc
import math
import os
import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable

import torch

from .. import channel, check, fingerprint, graph_clock, sandbox, shapes, stats, timer
from ..records import Flag, Status
from .task import Judge, TaskFailed

_perf = time.perf_counter
# Beyond the judge's own per-sample overhead, an honest candidate's stays within
# the largest of: 30 us, a quarter of that overhead, and three times its spread
# (the interquartile range of the judge's own samples: a loaded host is noisy).
# On an H100 honest candidates' overhead sat 0.1-0.36 ms above the judge's (its
# request handling is heavier than the empty request that measures rtt): 0.5 ms
# per sample, shared by the calls of a graph replay.
ALLOWANCE_MIN_MS = 0.5
ALLOWANCE_FRACTION = 0.25
ALLOWANCE_SPREADS = 3.0
# On the CPU clock the two processes share the host's caches and cores, and an
# honest candidate's overhead was measured up to 2.4x the judge's on a loaded
# 2-core machine: the bound there is three times the judge's own overhead.
ALLOWANCE_FRACTION_CPU = 3.0
# The CPU clock's release is the call and a reply, yet an honest candidate's wall there
# sat 0.13-0.42 ms above the judge's own on the loaded 2-core CI machine (2026-11-23;
# its own handling is 0.014 ms: the rest is waking the judge after a millisecond's
# wait, which the empty request that measures rtt does not pay). On a GPU the
# release keeps the loose allowance: on an H100 (2026-11-23, adversarial CUDA set
# and graph fixtures, release measured apart) honest candidates sat 0.01-0.15 ms per
# sample above the judge with events and up to about 0.25 ms per graph or burst
# sample of ~16 calls (two runs): 0.5 ms keeps a 2x margin.
CALL_MIN_CPU_MS = 1.0
# The CPU clock's queuing is the 32 MB flush: an honest candidate's took 0.98-1.42x the
# judge's own (same code; 32 task runs on the 2-core machine, 2026-11-23), one that
# swapped its flush buffer for a single element 0.19x (skip_flush.py). On a GPU the
# flush is ~35 us of a queuing of ~0.45 ms per sample (H100): too small a part for a
# floor; the guard names a swapped buffer there (guard.held).
QUEUE_MIN_SHARE_CPU = 0.5
# Between its requests the candidate waits, and what it started should be idle: CPU
# time its child processes use at all, and (on the CPU clock) its own threads use
# while the reference is timed, competes with the reference for the host
# (hog_processes.py, hog_thread.py). Flagged past a quarter of the reference's timed
# wall and 50 ms (5 clock ticks). Honest candidates used at most 0.02 s beside 0.12-0.56 s
# of reference samples: the end of their previous reply overlaps the next reference
# sample by tens of microseconds, which on a GPU, where a sample can be shorter than
# that, is why the threads are counted on the CPU clock only.
INTERFERENCE_SHARE = 0.25
INTERFERENCE_MIN_S = 0.05
MUTATION_EVERY = 5  # compare the lent timing inputs with the judge's copy every 5th sample


@dataclass
class Side:
    ms: list[float] = field(default_factory=list)  # timed (event or CPU) ms per call
    wall_ms: list[float] = field(default_factory=list)  # release to device-synchronized, per call
    outside_ms: list[float] = field(default_factory=list)  # judge-measured wall of the release minus the timed ms
    host_ms: list[float] = field(default_factory=list)  # the host's time to queue a call, while the GPU was held
    queue_outside_ms: list[float] = field(default_factory=list)  # judge-measured wall of the queuing minus host_ms
    project_ms: list[float] = field(default_factory=list)  # judge-measured wall of the output's projection
    clock: str = ""  # the clock of the last sample
    why: str | None = None  # why that clock, where it is not the first choice


@dataclass
class PairResult:
    ref: Side
    sol: Side
    stop_reason: str
    clock: str
    event_overhead_ms: float | None
    rtt_ms: float
    baseline: Side | None = None
    note: str | None = None
    bound_note: str | None = None  # why the candidate's samples were refused
    interference_note: str | None = None  # what the candidate ran beside the reference's samples


class Timer:
    """Interleaved, bounded timing of one task's two sides."""

    def __init__(self, judge: Judge, cfg: timer.TimingConfig, baseline: Callable | None = None):
        self.j, self.cfg = judge, cfg
        self.remote = judge.remote
        self.clock = timer.make_clock(judge.device)
        self.seed = judge.spec["seed"] + 500
        self.baseline = baseline
        self.last_inputs: list = []
        # The projection's weights: drawn by the judge per task, unknown before it starts.
        self.fp_seed = int.from_bytes(os.urandom(4), "little")
        self.busy_s = self.ref_wall_s = 0.0  # the candidate's own CPU while the reference was timed, and that time
        self.calls_per_sample = 1  # a graph replay's calls share one sample's overhead

    # -- one sample per side ---------------------------------------------------
    def fresh(self) -> list:
        self.seed += 1
        self.last_inputs = []  # one set of the judge's inputs alive at a time (6.4 GB for the softmax)
        return self.j.make_inputs(self.seed)

    def ref_sample(self, inputs: list, fp_seed: int, side: Side, fn: Callable | None = None) -> list:
        """One reference call (or the baseline's, `fn`), queued then released as a
        candidate's is, added to `side`; its projection."""
        fn = fn or self.j.call_reference
        holder: list = []
        return self._reference_turn(lambda: self._timed_here(
            lambda: self.clock.queue(lambda: holder.append(fn(inputs))), self.clock.finish,
            lambda: fingerprint.project(holder[-1], fp_seed, trusted=True), side))

    def _reference_turn(self, sample: Callable[[], Any]) -> Any:
        """A reference sample, and on the CPU clock the CPU time the candidate's
        process used meanwhile (on a GPU it is not read: see INTERFERENCE_SHARE)."""
        threads = isinstance(self.clock, timer.CpuClock)
        pid = self.remote.proc.pid
        cpu, t0 = sandbox.cpu_seconds(pid) if threads else 0.0, _perf()
        out = sample()
        self.ref_wall_s += _perf() - t0
        if threads:
            self.busy_s += sandbox.cpu_seconds(pid) - cpu
        return out

    def _interference(self, started_s: float) -> str | None:
        """Why what the candidate ran beside the reference's samples is refused, or None."""
        busy = self.busy_s + started_s
        if busy > max(INTERFERENCE_MIN_S, INTERFERENCE_SHARE * self.ref_wall_s):
            return (f"the solution's threads and processes used {busy:.2f} s of CPU beside the reference's "
                    f"{self.ref_wall_s:.2f} s of timed samples ({started_s:.2f} s in processes it started): "
                    "they compete with the reference for the host")
        return None

    def _timed_here(self, queue: Callable, finish: Callable, project: Callable, side: Side, calls: int = 1) -> Any:
        """A sample in this process, its two halves timed as sol_sample times the
        candidate's two requests (per call of a replay of `calls`); the projection."""
        t0 = _perf()
        queue()
        t1 = _perf()
        s = finish()
        t2 = _perf()
        fp = project()
        t3 = _perf()
        _add(side, s, (t2 - t1) * 1e3 / calls, (t1 - t0) * 1e3 / calls, (t3 - t2) * 1e3 / calls, self.clock.why)
        return fp

    def sol_sample(self, fp_seed: int, side: Side, graph: bool = False, calls: int = 1) -> Any:
        """One candidate sample in two requests, each timed here: the queuing (its
        host's dispatch behind a held stream) and the release (the device's work).
        Its projection(s)."""
        self.j.ask({"op": "graph_sample" if graph else "sample"}, when="while being timed", limit=self.sample_limit)
        queued_ms = self.remote.last_wall_s * 1e3 - self.rtt_ms
        if self.sample_limit.first:  # the timing inputs' shape was new; it is not any more
            self.sample_limit = self.release_limit = self.j.call_limit(self.lent, "a timed call")
        reply, _ = self.j.ask({"op": "release"}, when="while being timed", limit=self.release_limit)
        released_ms = self.remote.last_wall_s * 1e3 - self.rtt_ms
        s = _sample(reply)
        if reply.get("threads"):
            self.j.flags.add(Flag.UNTIMED_WORK)
        why = reply.get("why") if isinstance(reply.get("why"), str) else None
        # The projection is its own request: the call's bound then holds the call alone
        # (a projection's cost varies with the output's layout, a call's overhead does not).
        projected, _ = self.j.ask({"op": "project", "fp_seed": fp_seed}, when="while being timed", limit=self.release_limit)
        projected_ms = self.remote.last_wall_s * 1e3 - self.rtt_ms
        _add(side, s, released_ms / calls, queued_ms / calls, projected_ms / calls, why and why[:300])
        if projected.get("fp") is None and isinstance(projected.get("why"), str):
            raise TaskFailed(Status.INCORRECT, f"output of a timed call: {projected['why'][:300]}")
        return projected.get("fp")

    def write_lent(self, values: list) -> None:
        for buf, v in zip(self.lent, values):
            if isinstance(buf, torch.Tensor):
                buf.copy_(v)
        self.j.sync()

    # -- the loop --------------------------------------------------------------
    def run(self) -> PairResult:
        j = self.j
        first = self.fresh()
        self.lent = j.shared.lend(first)
        fds: list[int] = []
        j.ask({"op": "bind", "copies": channel.encode([self.lent], fds, [], by_copy=False)}, fds)
        del first  # the lent copy holds its values; one 6.4 GB softmax input is enough
        self.sample_limit = j.call_limit(self.lent, "a timed call")
        # A release may time the call again around a synchronize (a side that syncs inside).
        self.release_limit = self.sample_limit
        self.rtt_ms = self._rtt()
        started_s = sandbox.started_by(os.getpid(), self.remote.proc.pid)
        overhead = self.clock.empty_pair_ms()
        warm_ref, warm_sol = self._warm_up()
        clock_name, note = self.clock.name, None  # after the warm-up: a side that syncs inside has found out
        sampler = self._pair_events
        if self._wants_graphs(warm_ref, warm_sol):
            try:
                sampler, overhead, clock_name, note = self._replays(stats.median(warm_ref), stats.median(warm_sol))
            except graph_clock_unavailable as e:
                note = f"timed with events, not CUDA graphs: {e}"
        ref, sol = Side(), Side()
        base = Side() if self.baseline else None
        deadline = _perf() + self.cfg.budget_s
        stop = "max_samples"
        gc.collect()
        gc.disable()  # a collection inside a timed call would be charged to that call
        try:
            while len(sol.ms) < self.cfg.max_samples:
                for _ in range(self.cfg.block):
                    sampler(ref, sol, base)
                if len(sol.ms) >= self.cfg.min_samples:
                    sides = [ref, sol] + ([base] if base else [])
                    if all(stats.relative_ci_halfwidth(s.ms) <= self.cfg.target_rel_ci for s in sides):
                        stop = "converged"
                        break
                    if _perf() > deadline:
                        stop = "budget"
                        break
        finally:
            gc.enable()
        if clock_name == graph_clock.NAME:
            # A graph replay's host time is one launch (a burst's is its calls'); the host time that matters is an
            # eager call's, from the warm-up (its first call is never held).
            ref.host_ms, sol.host_ms = self.warm[0].host_ms[1:], self.warm[1].host_ms[1:]
        result = PairResult(ref, sol, stop, clock_name, overhead, self.rtt_ms, base, note)
        started_s = sandbox.started_by(os.getpid(), self.remote.proc.pid) - started_s
        cpu = clock_name == "cpu_clock"
        result.interference_note = self._interference(started_s)
        result.bound_note = bound_violation(ref, sol, ALLOWANCE_FRACTION_CPU if cpu else ALLOWANCE_FRACTION,
                                            self.calls_per_sample, CALL_MIN_CPU_MS if cpu else None,
                                            QUEUE_MIN_SHARE_CPU if cpu else None)
        q = lambda xs: f"{stats.quantile(xs, 0.25):.4f}/{stats.median(xs):.4f}"  # noqa: E731
        print(f"[kbench] per-call ms outside the timed region (lower quartile/median), reference vs solution: "
              f"release {q(ref.outside_ms)} vs {q(sol.outside_ms)}; queuing {q(ref.queue_outside_ms)} vs "
              f"{q(sol.queue_outside_ms)}; projection {q(ref.project_ms)} vs {q(sol.project_ms)} "
              f"(empty request {self.rtt_ms:.4f}); CPU s beside the reference's {self.ref_wall_s:.3f} s: the "
              f"candidate's {self.busy_s:.3f}, its processes' {started_s:.3f}", flush=True)
        return result

    def _rtt(self) -> float:
        walls = []
        for _ in range(20):
            self.j.ask({"op": "ping"})
            walls.append(self.remote.last_wall_s * 1e3)
        return stats.median(walls)

    def _pair_events(self, ref: Side, sol: Side, base: Side | None) -> None:
        # The judge's GPU work (fresh inputs) comes right before the candidate's
        # sample, and the candidate's right before the reference's: each side's
        # measured wall time pays one switch between the two processes' GPU
        # contexts (a few hundred us on an H100), so the overheads compare.
        inputs = self.fresh()
        self.write_lent(inputs)
        s_fp = self.sol_sample(self.fp_seed, sol)
        r_fp = self.ref_sample(inputs, self.fp_seed, ref)
        self._check_fp(s_fp, r_fp)
        if len(sol.ms) % MUTATION_EVERY == 0 and not check.same_inputs(self.lent, inputs):
            self.j.flags.add(Flag.INPUT_MUTATION)
        if base is not None:
            self.ref_sample(inputs, self.fp_seed, base, self.baseline)
        self.last_inputs = inputs

    def _check_fp(self, sol_fp: Any, ref_fp: list) -> None:
        why = fingerprint.mismatch(sol_fp, ref_fp, self.j.timed_bound())
        if why:
            raise TaskFailed(Status.INCORRECT, f"output of a timed call does not match the reference's ({why})")

    def _warm_up(self) -> tuple[list[float], list[float]]:
        """At least 3 calls and warmup_s of them per side: the first calls may
        autotune, allocate or load modules. Timed ms of the calls after the first."""
        ref, sol = Side(), Side()
        t0 = _perf()
        while len(sol.ms) < 3 or (_perf() - t0 < 2 * self.cfg.warmup_s and len(sol.ms) < 1000):
            self._pair_events(ref, sol, None)
        self.warm = (ref, sol)
        return ref.ms[1:], sol.ms[1:]

    def _wants_graphs(self, warm_ref: list[float], warm_sol: list[float]) -> bool:
        return wants_graphs(self.cfg, self.clock, warm_ref + [self._ref_burst_ms()], warm_sol)

    def _ref_burst_ms(self) -> float:
        """The reference's mean call over 10 back to back in one event pair. Samples
        that alternate between the two processes can carry the GPU's switch between
        their contexts (tens of us, seen on an H100), which would hide a microsecond call."""
        if not isinstance(self.clock, timer.CudaClock) or not self.last_inputs:
            return float("inf")
        inputs = self.last_inputs

        def burst():
            for _ in range(10):  # each output dropped at once: ten 6.4 GB softmax outputs do not fit
                self.j.call_reference(inputs)

        ms, _ = self.clock.sample(burst)
        return ms / 10

    # -- graphs, or bursts where a graph is not valid ---------------------------
    def _replays(self, ref_ms: float, sol_ms: float):
        """Both sides' calls `plan.calls` at a time in one event pair: captured in CUDA
        graphs, or where either side's graph is not valid (a launch on the legacy
        default stream is missing from it, say), run eagerly back to back in bursts.
        Returns the pair sampler, the event pair's cost per call, the clock's name
        and a note (why bursts), or raises graph_clock_unavailable (plain events)."""
        flush = self.clock.flush_buf.numel() * self.clock.flush_buf.element_size()
        inputs = self.last_inputs or self.fresh()
        out = self.j.call_reference(inputs)
        moved, out_bytes = shapes.nbytes(inputs) + shapes.nbytes(out), shapes.nbytes(out)
        plan = graph_clock.plan(min(ref_ms, sol_ms), moved, out_bytes, flush, auto=self.cfg.mode == "auto")
        if plan is None:
            raise graph_clock_unavailable("each call moves more than twice the L2 size")
        ref_copies = [check.clone_inputs(inputs) for _ in range(plan.copies)]
        sol_copies = [self.j.shared.lend(inputs) for _ in range(plan.copies)]
        fds: list[int] = []
        self.j.ask({"op": "bind", "copies": channel.encode(sol_copies, fds, [], by_copy=False)}, fds)
        self.lent = sol_copies[0]  # what the candidate's plain samples read from now on, graphs or not
        try:
            return (*self._replayed(graph_clock.GraphSampler, plan, ref_copies, sol_copies), graph_clock.NAME, None)
        except graph_clock_unavailable as e:
            why = str(e)
        burst = replace(plan, calls=min(plan.calls, graph_clock.BURST_CALLS))
        pair, overhead = self._replayed(graph_clock.BurstSampler, burst, ref_copies, sol_copies)
        return (pair, overhead, graph_clock.BURST_NAME,
                f"timed in bursts of {burst.calls} eager calls, not CUDA graphs: {why}")

    def _replayed(self, kind: type, plan: graph_clock.Plan, ref_copies: list[list], sol_copies: list[list]):
        eager = kind is graph_clock.BurstSampler
        what = f"a burst of {plan.calls} eager calls" if eager else f"a CUDA graph replay of {plan.calls} calls"
        try:
            ref_replay = kind(self.j.forward_reference, ref_copies, self.clock, plan.calls, plan.keep_all)
        except Exception as e:  # noqa: BLE001 - a capture may fail: not the problem's bug
            graph_clock.settle(self.clock)
            raise graph_clock_unavailable(f"the reference cannot be captured: {str(e).splitlines()[0][:200]}") from None
        # A capture may take new paths (capture-safe allocation, cuBLAS workspaces): room as for a first call.
        capture = self.j.call_limit(None, f"capturing {plan.calls} calls in a CUDA graph" if not eager else what,
                                    plan.calls, first=True)
        replay = self.j.call_limit(None, what, plan.calls)
        reply, _ = self.j.ask({"op": "graph_capture", "calls": plan.calls, "keep_all": plan.keep_all, "eager": eager},
                              limit=capture)
        if not reply.get("ok"):
            raise graph_clock_unavailable(str(reply.get("message"))[:300])
        self._validate_graphs(ref_replay, ref_copies, sol_copies, replay, "burst" if eager else "graph")
        self.calls_per_sample = plan.calls
        self.sample_limit = self.release_limit = replay

        def pair(ref: Side, sol: Side, base: Side | None) -> None:
            self._refresh(ref_copies, sol_copies)  # as in _pair_events: candidate first, then reference
            s_fp = self.sol_sample(self.fp_seed, sol, graph=True, calls=plan.calls)
            project = lambda: fingerprint.project_many(ref_replay.outputs(), self.fp_seed, trusted=True)  # noqa: E731
            r_fp = self._reference_turn(lambda: self._timed_here(ref_replay.queue, ref_replay.finish, project, ref,
                                                                 plan.calls))
            if not isinstance(s_fp, list) or len(s_fp) != len(r_fp):
                raise TaskFailed(Status.INCORRECT, "the candidate's replay returned no projection for its timed calls")
            for a, b in zip(s_fp, r_fp):
                self._check_fp(a, b)

        # An empty event pair's cost is shared by the calls of a replay.
        return pair, self.clock.empty_pair_ms() / plan.calls

    def _refresh(self, ref_copies: list[list], sol_copies: list[list]) -> list[int]:
        """Fresh values into every copy, the same on both sides; returns the seeds."""
        seeds = []
        for rc, sc in zip(ref_copies, sol_copies):
            values = self.fresh()
            seeds.append(self.seed)
            for a, b, v in zip(rc, sc, values):
                if isinstance(a, torch.Tensor):
                    a.copy_(v)
                    b.copy_(v)
        self.j.sync()
        return seeds

    def _validate_graphs(self, ref_graph, ref_copies: list[list], sol_copies: list[list], limit,
                         what: str = "graph") -> None:
        """Replay both graphs on fresh inputs and compare the candidate's last output
        with the eager reference on the inputs it read: a graph that misses work
        (host code, a launch on the legacy default stream, an unjoined stream, a
        capture-aware solution) is not timed. Bursts are checked the same way."""
        self._refresh(ref_copies, sol_copies)
        ref_graph.replay()
        reply, blobs = self.j.ask({"op": "graph_replay", "fp_seed": self.fp_seed}, limit=limit)
        sol_out = self.remote.output(reply, blobs, self.j.device)
        last_copy = ref_copies[(ref_graph.calls - 1) % len(ref_copies)]
        expected = self.j.call_reference(check.clone_inputs(last_copy))
        for name, got in (("reference", ref_graph.outputs()[-1]), ("solution", sol_out)):
            try:
                check.compare_outputs(got, expected, None, l2_bound=self.j.timed_bound())
            except check.Mismatch as e:
                raise graph_clock_unavailable(f"the {what} does not recompute the output from new inputs: {name}: {e}") from None
        # Then every kept output, by projection: one output buffer returned by every call
        # leaves the earlier calls' outputs overwritten, which eager calls checked one
        # at a time never show. Such a solution is timed one call at a time.
        theirs, ours = reply.get("fp"), fingerprint.project_many(ref_graph.outputs(), self.fp_seed, trusted=True)
        if not isinstance(theirs, list) or len(theirs) != len(ours):
            raise graph_clock_unavailable(f"the {what}'s replay returned no projection of its outputs")
        for i, (a, b) in enumerate(zip(theirs, ours)):
            why = fingerprint.mismatch(a, b, self.j.timed_bound())
            if why:
                raise graph_clock_unavailable(f"the {what}'s output of call {i + 1} of {len(ours)} was changed by a "
                                              f"later call (one output buffer for every call?): {why}")


def wants_graphs(cfg: timer.TimingConfig, clock, warm_ref: list[float], warm_sol: list[float]) -> bool:
    """Graphs in graph mode, or in auto mode when either side's calls are
    microseconds (the reference's fastest measure, which includes a burst of back
    to back calls; the solution's lower quartile: a few slow calls on a busy host
    must not hide a microsecond call); never on the CPU clock."""
    if cfg.mode == "events" or not isinstance(clock, timer.CudaClock):
        return False
    quick = min(min(warm_ref), stats.quantile(warm_sol, 0.25))
    return cfg.mode == "graph" or quick < cfg.graph_below_ms


class graph_clock_unavailable(Exception):  # noqa: N801 - reads as what it says where raised
    """Graph timing cannot be used for this task; the message says why."""


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _sample(reply: dict) -> timer.Sample:
    """A candidate's release reply as a sample; anything but numbers is a broken protocol.
    The clock's name is the candidate's word, shown and never trusted: the bound
    below holds whatever clock it names."""
    ms, wall, host = reply.get("ms"), reply.get("wall_ms"), reply.get("host_ms")
    if not (_number(ms) and _number(wall)) or not (host is None or _number(host)):
        raise TaskFailed(Status.CRASHED, "the candidate sent a malformed sample")
    clock = reply.get("clock") if isinstance(reply.get("clock"), str) else "?"
    return timer.Sample(float(ms), float(wall), None if host is None else float(host), clock[:40])


def _add(side: Side, s: timer.Sample, released_ms: float, queued_ms: float, projected_ms: float,
         why: str | None) -> None:
    """One sample and the judge's wall times around its three parts."""
    side.ms.append(s.ms)
    side.wall_ms.append(s.wall_ms)
    side.outside_ms.append(released_ms - s.ms)
    host = s.host_ms or 0.0
    side.host_ms.append(host)
    side.queue_outside_ms.append(queued_ms - host)
    side.project_ms.append(projected_ms)
    side.clock, side.why = s.clock, why


def bound_violation(ref: Side, sol: Side, fraction: float = ALLOWANCE_FRACTION, calls: int = 1,
                    tight_calls_ms: float | None = None, min_queue_share: float | None = None) -> str | None:
    """Why the candidate's samples cannot fit the wall time the judge measured, or None.
    Each sample is three requests, all timed here: queuing (flush, synchronize,
    the held stream, the host's dispatch), release (the device's work and a
    synchronize) and projection. An honest candidate's time outside what it
    reports in each is the judge's own (same clock code) give or take noise; a
    forger's grows by what it hid. So device work can be moved out of the
    reported device time only into the reported host time, which is shown.
    Each part's allowance scales with the judge's whole overhead per sample (a
    projection's cost varies with the output's layout, the queuing's with the
    flush). The release holds nothing but the call and a reply: with
    `tight_calls_ms` its allowance is that, or a quarter of the judge's own
    release overhead, or three spreads, whichever is largest. With
    `min_queue_share`, the candidate's queuing must take at least that share of
    the judge's own: the queuing is mostly the cache flush, and a candidate that
    skipped it would time its calls on warm caches."""
    if not sol.outside_ms or not ref.outside_ms:
        return None
    if any(m < 0 for m in sol.ms) or any(h < 0 for h in sol.host_ms):
        return "the candidate reported negative sample times"
    if stats.median(sol.ms) <= 0:
        return "the candidate reported calls that took no time at all"
    low = lambda xs: stats.quantile(xs, 0.25) if xs else 0.0  # noqa: E731
    # The judge's own overhead per sample, all parts: the relative allowance of the
    # queuing and the projection scales with it (the CPU clock's flush is most of it,
    # and the noise grows with it).
    own_total = low(ref.outside_ms) + low(ref.queue_outside_ms) + low(ref.project_ms)
    if min_queue_share is not None and ref.queue_outside_ms and sol.queue_outside_ms:
        own, theirs = low(ref.queue_outside_ms), low(sol.queue_outside_ms)
        if theirs < min_queue_share * own:
            return (f"the candidate's queuing of calls took {theirs:.3f} ms per call against {own:.3f} ms for the "
                    f"reference's, most of which is flushing the caches: its calls ran on caches it did not flush")
    loose = (ALLOWANCE_MIN_MS, fraction * own_total)  # (floor per sample, relative) of every part by default
    call_floor, call_relative = loose if tight_calls_ms is None else (tight_calls_ms,
                                                                      ALLOWANCE_FRACTION * low(ref.outside_ms))
    for what, own_s, their_s, floor, relative in (
            ("calls", ref.outside_ms, sol.outside_ms, call_floor, call_relative),
            ("queuing of calls", ref.queue_outside_ms, sol.queue_outside_ms, *loose),
            ("projection of outputs", ref.project_ms, sol.project_ms, *loose)):
        if not own_s or not their_s:
            continue
        # The lower quartile: a forger's hidden time is in every sample, a busy host's
        # spikes are not.
        own, theirs = low(own_s), low(their_s)
        allowance = max(floor / calls, relative, ALLOWANCE_SPREADS * stats.iqr(own_s))
        if theirs > own + allowance:
            return (f"the candidate's samples leave {theirs:.3f} ms per call unaccounted in the wall time kbench "
                    f"measured around the {what}, against {own:.3f} ms for the reference's (allowed {allowance:.3f} ms "
                    f"more): its reported times are too short for the time its calls took")
    allowance = max(ALLOWANCE_MIN_MS / calls, fraction * own_total)
    if stats.median(sol.ms) > stats.median(sol.wall_ms) + allowance:
        # a sample longer than the candidate's own wall: not a gain for it, but not data either
        return "the candidate's sample times exceed its own wall times"
    return None
