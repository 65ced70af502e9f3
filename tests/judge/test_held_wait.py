"""A held batch's measure (held.Holds.release) leaves out the time the judge waited for a CPU:
a done word written while the host ran something else in the judge's place is seen late by
that much. Under 16 compiles at nice 0 on 16 cores an honest SiLU read 250-303 us a call on the
judge's clock against 129 us on its events, and got timing_mismatch (H200, 2026-11-29)."""
import os
import threading
import time
from types import SimpleNamespace

import timer_stub
from harness.judge import held
from harness.shared import hold


class _Page:
    """A hold page whose done word is written `after_s` after the release, by a thread."""

    def __init__(self, after_s: float):
        self.after_s, self.words = after_s, {}

    def set(self, side, which, value):
        self.words[(side, which)] = value
        if which == hold.RELEASE:
            threading.Timer(self.after_s, lambda: self.words.__setitem__((side, hold.DONE), value)).start()

    def word(self, side, which):
        return self.words.get((side, which), 0)


def _holds(after_s: float) -> held.Holds:
    h = object.__new__(held.Holds)
    h.page = h.own = _Page(after_s)
    h.waited_s = h.kept_s = h.stopped_cpu_s = 0.0
    h.j = SimpleNamespace(remote=SimpleNamespace(kill=lambda: None), phase_name="timing")
    return h


def _limit() -> SimpleNamespace:
    return SimpleNamespace(seconds=5.0, message=lambda phase, ran: "hung")


def test_the_judges_own_wait_for_a_cpu_is_taken_out_of_its_measure(monkeypatch):
    delays = iter([1.000, 1.030])  # the judge's run-queue delay before and after: 30 ms waiting for a CPU
    monkeypatch.setattr(held, "run_queue_s", lambda: next(delays))
    h = _holds(after_s=0.05)
    seconds = h.release("candidate", 7, _limit())
    assert 0.015 < seconds < 0.05  # ~50 ms on the clock, 30 ms of it the host's
    assert abs(h.waited_s - 0.030) < 1e-9


def test_a_judge_that_ran_throughout_keeps_its_whole_measure(monkeypatch):
    monkeypatch.setattr(held, "run_queue_s", lambda: 2.0)
    h = _holds(after_s=0.02)
    seconds = h.release("candidate", 3, _limit())
    assert seconds >= 0.02 and h.waited_s == 0.0


def test_the_delay_taken_out_never_exceeds_the_measure(monkeypatch):
    delays = iter([0.0, 10.0])  # a counter that jumped (or was misread): the measure is not made negative
    monkeypatch.setattr(held, "run_queue_s", lambda: next(delays))
    assert _holds(after_s=0.01).release("candidate", 1, _limit()) == 0.0


def test_the_delay_stays_in_where_the_stopped_candidates_processes_used_cpu_meanwhile(monkeypatch):
    """A thread of the candidate's inside mmap(MAP_POPULATE) runs on past its stop and can take
    the judge's core: the wait it may have caused is not taken out (it would lower the measure
    that bounds the candidate's own claim)."""
    delays = iter([1.000, 1.030])
    monkeypatch.setattr(held, "run_queue_s", lambda: next(delays))
    cpu = iter([{11: 4.0, 12: 1.0}, {11: 4.02, 12: 1.0}])  # 20 ms of CPU by a "stopped" process during the measure
    h = _holds(after_s=0.05)
    seconds = h.release("candidate", 7, _limit(), stopped_cpu=lambda: next(cpu))
    assert seconds >= 0.05 and h.waited_s == 0.0
    assert abs(h.kept_s - 0.030) < 1e-9 and abs(h.stopped_cpu_s - 0.02) < 1e-9


def test_the_delay_stays_in_where_one_of_those_processes_went_away_meanwhile(monkeypatch):
    """A sum of their clocks falls when one of them ends, and could hide another's CPU: they are
    compared by pid, and a process that came or went during a stopped measure ran."""
    delays = iter([1.000, 1.030])
    monkeypatch.setattr(held, "run_queue_s", lambda: next(delays))
    cpu = iter([{11: 4.0, 12: 1.0}, {11: 4.02}])  # 11 used 20 ms, 12 (1 s of CPU) is gone: the sum fell
    h = _holds(after_s=0.05)
    assert h.release("candidate", 7, _limit(), stopped_cpu=lambda: next(cpu)) >= 0.05
    assert h.waited_s == 0.0 and abs(h.kept_s - 0.030) < 1e-9 and abs(h.stopped_cpu_s - 0.02) < 1e-9


def test_a_still_candidate_gets_the_delay_taken_out(monkeypatch):
    delays = iter([1.000, 1.030])
    monkeypatch.setattr(held, "run_queue_s", lambda: next(delays))
    h = _holds(after_s=0.05)
    seconds = h.release("candidate", 7, _limit(), stopped_cpu=lambda: {11: 4.0, 12: 1.0})
    assert 0.015 < seconds < 0.05 and h.kept_s == 0.0 and h.stopped_cpu_s == 0.0


def test_the_run_queue_delay_is_read_from_the_kernel_where_it_keeps_it():
    if not os.path.exists("/proc/thread-self/schedstat"):
        assert held.run_queue_s() == 0.0
        return
    before = held.run_queue_s()
    time.sleep(0.01)
    assert held.run_queue_s() >= before > 0.0 or before == 0.0


def _after(held_cpu_s: float, held_wall_s: float, ref_cpu_s: float = 0.0, ref_wall_s: float = 0.0):
    return timer_stub.after(held_cpu_s=held_cpu_s, held_wall_s=held_wall_s, ref_cpu_s=ref_cpu_s, ref_wall_s=ref_wall_s)


def test_cpu_the_stopped_candidate_used_during_its_held_measures_is_untimed_work():
    """The judge's delay is taken out of a held measure only because the stopped candidate cannot
    add to it: a thread of its that ran on inside a system call could, so its CPU there is flagged."""
    from harness.records import Flag

    r = _after(held_cpu_s=0.2, held_wall_s=0.5)
    assert Flag.UNTIMED_WORK in r.flags and "while stopped, during the judge's" in r.notes[0]
    assert _after(held_cpu_s=0.0, held_wall_s=0.5).flags == set()
    assert _after(held_cpu_s=0.01, held_wall_s=0.5).flags == set()  # one clock tick: below 5


def test_cpu_the_stopped_candidate_used_beside_the_references_batches_is_untimed_work_too():
    from harness.records import Flag

    r = _after(held_cpu_s=0.0, held_wall_s=0.5, ref_cpu_s=0.2, ref_wall_s=0.5)
    assert Flag.UNTIMED_WORK in r.flags
    assert r.notes == ["the candidate's processes used 0.20 s of CPU while stopped, beside the reference's 0.50 s of "
                       "batches (work inside a system call runs on past a stop)"]
