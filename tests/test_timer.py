"""The timing loop's decisions: which clock, and whose samples fit the wall time."""
from dataclasses import replace

from harness import timer
from harness.judge.timing import wants_graphs
from harness.timer import TimingConfig


def _cuda_clock_stub():
    return object.__new__(timer.CudaClock)  # no GPU needed: only its type is consulted


def test_auto_mode_uses_graphs_only_when_a_side_takes_microseconds():
    cfg, cuda = TimingConfig(), _cuda_clock_stub()
    assert wants_graphs(cfg, cuda, [0.004] * 5, [1.0] * 5)  # a 4 us reference is enough
    assert not wants_graphs(cfg, cuda, [0.2] * 5, [0.06] * 5)
    assert wants_graphs(cfg, cuda, [0.2] * 5, [0.02] * 6 + [0.5] * 2)  # a few slow warm-up calls do not hide it
    assert wants_graphs(replace(cfg, mode="graph"), cuda, [1.0] * 5, [1.0] * 5)
    assert not wants_graphs(replace(cfg, mode="events"), cuda, [0.004] * 5, [0.004] * 5)
    assert not wants_graphs(replace(cfg, mode="graph"), timer.CpuClock(), [0.004] * 5, [0.004] * 5)


def test_cpu_clock_times_the_call_and_flushes_outside_it():
    clock = timer.CpuClock()
    ms, wall = clock.sample(lambda: sum(range(20000)))
    assert ms > 0 and ms == wall
