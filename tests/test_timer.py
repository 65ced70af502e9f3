"""The timing loop's decisions, on the CPU clock and with a stand-in CUDA clock."""
from dataclasses import replace

from harness import timer
from harness.timer import TimingConfig


def _cuda_clock_stub():
    return object.__new__(timer.CudaClock)  # no GPU needed: only its type is consulted


def test_auto_mode_uses_graphs_only_when_a_side_takes_microseconds():
    cfg, cuda = TimingConfig(), _cuda_clock_stub()
    assert timer._wants_graphs(cfg, cuda, [[0.004] * 5, [1.0] * 5])  # a 4 us reference is enough
    assert not timer._wants_graphs(cfg, cuda, [[0.2] * 5, [0.06] * 5])
    assert timer._wants_graphs(replace(cfg, mode="graph"), cuda, [[1.0] * 5, [1.0] * 5])
    assert not timer._wants_graphs(replace(cfg, mode="events"), cuda, [[0.004] * 5] * 2)
    assert not timer._wants_graphs(replace(cfg, mode="graph"), timer.CpuClock(), [[0.004] * 5] * 2)


def test_interleaved_blocks_until_converged_on_the_cpu_clock():
    calls = []
    ref = timer.Side(lambda inputs: calls.append(("ref", inputs)), ["a"])
    sol = timer.Side(lambda inputs: calls.append(("sol", inputs)), ["b"])
    cfg = TimingConfig(min_samples=10, max_samples=40, budget_s=2.0, target_rel_ci=10.0, block=5, warmup_s=0.0)
    pair = timer.time_pair(ref, sol, timer.CpuClock(), cfg)
    assert pair.clock == "cpu_clock" and pair.note is None
    assert pair.stop_reason == "converged"  # a 1000% target is met at the first check
    assert len(pair.ref.event_ms) == len(pair.sol.event_ms) == 10
    timed = calls[6:]  # after three warm-up calls per side
    assert timed == ([("ref", ["a"])] * 5 + [("sol", ["b"])] * 5) * 2  # blocks alternate, each on its inputs
