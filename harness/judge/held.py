"""The judge's side of held batches (shared/hold.py): lend the page, queue, release, time.

A held batch of the candidate's, as timing.py runs it:
  1. `queue`: the candidate queues n calls behind a hold and answers at once;
     it is frozen on its reply. A forward that waits for its stream (a
     synchronize, .item()) stops counting calls: after STALL_S without a new
     one the judge releases the hold, so that the request ends, and the batch
     is not a held one (`Queued.stalled_at` says at which call).
  2. the judge waits for the GPU to be idle, writes the inputs, probes again
     (timing.py: work that the write set off ran unseen), flushes L2;
  3. `release`: the clock starts, the release word is written, and the clock
     stops when the done word is seen.
The reference's held batches run in the judge's process the same way, on its
own words of the page. An empty batch (n = 0) measures what a batch costs
beyond its calls, subtracted as the fixed cost.
"""
from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from typing import Callable

import torch

from ..records import Status
from ..shared import batches, hold
from . import freeze, limits
from .task import Judge, TaskFailed

_perf = time.perf_counter
# A queue that adds no call for this long (or 5x the host time a call took in the warm-up,
# if longer) waits for its held stream: a forward that synchronizes. On an H100 the probe
# found such forwards 31 ms after the request (bench/hold_probe.md).
STALL_S = 0.03
# Calls per held batch at most: the driver queued 1018 launches behind a hold before the
# next launch blocked (bench/hold_probe.md); a call of several kernels meets it sooner, and
# is found as a stall at call k > 0 (timing.py plans again below k).
MAX_CALLS = 800
SELF_TEST_S = 1.0


def run_queue_s() -> float:
    """Seconds this thread has spent runnable but not running (the second field of
    /proc/thread-self/schedstat); 0 where the kernel does not keep it."""
    try:
        with open("/proc/thread-self/schedstat", "rb") as f:
            return int(f.read().split()[1]) / 1e9
    except (OSError, ValueError, IndexError):
        return 0.0


class Stalled(Exception):
    """A held batch's queue stopped at call `at`: its forward waited for the held stream
    (a synchronize, a copy to the host, or the allocator asking the driver for memory)."""

    def __init__(self, side: str, at: int):
        super().__init__(side, at)
        self.side, self.at = side, at


@dataclass
class Queued:
    seq: int
    reply: dict
    stalled_at: int | None  # the call the queue stopped at, when the judge had to release it


class Holds:
    """The task's hold page, mapped here and lent to the candidate."""

    def __init__(self, judge: Judge):
        self.j = judge
        fd = hold.new_page()
        try:
            self.page = hold.Page(fd, judge.device)
            reply, _ = judge.ask({"op": "hold_page"}, [fd])
        finally:
            os.close(fd)
        if not reply.get("ok"):
            raise hold.HoldUnavailable(f"the candidate's process cannot map the hold page: {reply.get('message')}")
        # The reference's words on a page of the judge's alone: the candidate maps the other.
        fd = hold.new_page()
        try:
            self.own = hold.Page(fd, judge.device)
        finally:
            os.close(fd)
        self.seq = 0
        self.waited_s = 0.0  # the judge's run-queue delay taken out of its held measures, summed (release)
        self.kept_s = 0.0  # and the delay left in, where the stopped candidate's processes used CPU meanwhile
        self.stopped_cpu_s = 0.0  # CPU those processes used during the last measure of a candidate's batch
        self.stopped_cpu_read: dict[int, float] = {}  # and their clocks as it ended (Freezer.cpu_by_member)
        self._self_test()
        self.watchdog = _Watchdog(self.own)

    def _self_test(self) -> None:
        """An empty held batch of the judge's own must end within SELF_TEST_S of its
        release: where stream memory operations do not reach host memory, nothing is held."""
        seq = self._next()
        stream = torch.cuda.current_stream(self.j.device)
        self.own.hold("reference", stream, seq)
        self.own.done("reference", stream, seq)
        self.own.set("reference", hold.RELEASE, seq)
        t0 = _perf()
        while self.own.word("reference", hold.DONE) != seq:
            if _perf() - t0 > SELF_TEST_S:
                self.own.set("reference", hold.RELEASE, seq + 1_000_000)
                raise hold.HoldUnavailable(f"an empty held batch did not end within {SELF_TEST_S:g} s of its release")

    def _next(self) -> int:
        self.seq += 1
        return self.seq

    # -- the candidate's -------------------------------------------------------------
    def queue(self, n: int, limit: limits.Limit, call_host_s: float = 0.0) -> Queued:
        """Ask the candidate to queue n calls behind a new hold; frozen on its reply."""
        seq = self._next()
        stall = _StallWatch(self.page, "candidate", seq, max(STALL_S, 5 * call_host_s))
        reply, _ = self.j.ask({"op": "held", "n": n, "seq": seq}, when="while being timed", limit=limit,
                              watch=stall.poll)
        self.j.remote.wait_stopped()
        return Queued(seq, reply, stall.stalled)

    def claim(self, seq: int) -> float | None:
        """The candidate's own events for held batch `seq`, in ms (its word)."""
        reply, _ = self.j.ask({"op": "claim"})
        claim = reply.get("claim")
        if (isinstance(claim, list) and len(claim) == 2 and claim[0] == seq and isinstance(claim[1], (int, float))
                and not isinstance(claim[1], bool) and claim[1] == claim[1]):
            return float(claim[1])
        return None

    # -- both sides ------------------------------------------------------------------
    def release(self, side: str, seq: int, limit: limits.Limit,
                stopped_cpu: Callable[[], dict[int, float]] | None = None) -> float:
        """Seconds from the release of batch `seq` to its done word, less the time this
        thread waited for a CPU meanwhile (its run-queue delay: a done word written while
        the host ran something else in the judge's place is seen late by that much). Past
        the limit the candidate is killed (a held batch that never ends is hung).

        Without the delay taken out, 16 compiles at nice 0 on 16 cores put an honest SiLU
        at 250-303 us a call against its own events' 129 us, timing_mismatch in two loaded
        runs of three (bench/timing_repro.md, H200, 2026-11-29). What is left is a lower
        bound on the batch's time (the delay may have fallen while the GPU still ran), so
        it is taken out only where the candidate cannot have caused it: `stopped_cpu`
        reads the CPU clocks of the candidate's processes by pid (Freezer.cpu_by_member),
        stopped while its batch runs, and a thread of theirs that ran on inside a system
        call (mmap(MAP_POPULATE) runs past SIGSTOP) could have taken the judge's core.
        Where a clock moved, or a process came or went, the delay stays in the measure
        (`stopped_cpu_s` says how much CPU they used)."""
        page = self.page if side == "candidate" else self.own
        before = stopped_cpu() if stopped_cpu is not None else {}
        waited0 = run_queue_s()
        t0 = _perf()
        page.set(side, hold.RELEASE, seq)
        deadline, spins = t0 + limit.seconds, 0
        while page.word(side, hold.DONE) != seq & 0xFFFFFFFF:
            spins += 1
            if spins & 0x3FF == 0 and _perf() > deadline:
                ran = _perf() - t0
                if side == "candidate":
                    self.j.remote.kill()
                raise TaskFailed(Status.TIMEOUT, limit.message(self.j.phase_name, ran))
        seconds = _perf() - t0
        waited = min(max(run_queue_s() - waited0, 0.0), seconds)
        after = stopped_cpu() if stopped_cpu is not None else {}
        self.stopped_cpu_s, self.stopped_cpu_read = freeze.cpu_used(before, after), after
        if self.stopped_cpu_s > 0.0 or set(before) - set(after):
            self.kept_s += waited
            return seconds
        self.waited_s += waited
        return seconds - waited

    # -- the reference's -------------------------------------------------------------------
    def reference(self, batch: batches.Eager, n: int, limit: limits.Limit,
                  log: batches.Log | None = None) -> tuple[float, float | None, float]:
        """(seconds, its events in ms, its host ms) of one held reference batch."""
        seq = self._next()
        self.watchdog.arm(seq)
        try:
            host_ms, events = batches.queue_held(batch, n, self.j.device, self.own, "reference", seq, log)
        finally:
            stalled = self.watchdog.disarm()
        if stalled is not None:
            torch.cuda.synchronize(self.j.device)
            raise Stalled("reference", stalled)
        seconds = self.release("reference", seq, limit)
        torch.cuda.synchronize(self.j.device)  # the events are read below; nothing after them
        return seconds, batches.held_ms(events), host_ms


class _StallWatch:
    """The stall rule, for both sides: a held batch whose QUEUED count has not moved for
    `stall_s` is waiting for its own held stream (its forward synchronized, or its
    allocator asked the driver for memory); it is released, to go on unheld, and
    `stalled` is the call it stopped at. Polled by whoever waits for the queueing."""

    def __init__(self, page: hold.Page, side: str, seq: int, stall_s: float):
        self.page, self.side, self.seq, self.stall_s = page, side, seq, stall_s
        self.count, self.since, self.stalled = -1, _perf(), None

    def poll(self) -> None:
        count, now = self.page.word(self.side, hold.QUEUED), _perf()
        if count != self.count:
            self.count, self.since = count, now
        elif self.stalled is None and now - self.since > self.stall_s:
            self.stalled = count
            self.page.set(self.side, hold.RELEASE, self.seq)


class _Watchdog:
    """Releases the judge's own held batch when its queueing stops for STALL_S: a reference
    whose allocator asks the driver for memory waits for the held stream, and only another
    thread can release it (torch's ops let go of the GIL while they run, so this one runs)."""

    def __init__(self, page: hold.Page):
        self.page = page
        self.armed = threading.Event()
        self.generation, self.seq, self.stalled = 0, 0, None
        threading.Thread(target=self._run, name="kbench-hold-watchdog", daemon=True).start()

    def arm(self, seq: int) -> None:
        self.seq, self.stalled = seq, None
        self.generation += 1
        self.armed.set()

    def disarm(self) -> int | None:
        self.armed.clear()
        self.generation += 1
        return self.stalled

    def _run(self) -> None:
        while True:
            self.armed.wait()
            generation = self.generation
            stall = _StallWatch(self.page, "reference", self.seq, STALL_S)
            while self.armed.is_set() and generation == self.generation:
                stall.poll()
                if stall.stalled is not None:
                    self.stalled = stall.stalled
                    break
                time.sleep(0.001)
            while self.armed.is_set() and generation == self.generation:
                time.sleep(0.001)  # released: wait for the disarm
