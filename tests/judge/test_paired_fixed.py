"""A held pair of one call each (a candidate whose calls share one output buffer is timed so)
is a few us of kernel beside a fixed cost of ~0.35 ms that drifts by tens of us between the
start of the timing and its pairs: such a pair carries its own empty batches' figures
(Timer._paired_fixed). The candidate's is taken only where it is below the one measured at
the start: it knows when an empty batch is asked for, and a slow one must not make its calls
read faster."""
from types import SimpleNamespace

import pytest

from harness.judge import timing


def _timer() -> timing.Timer:
    t = object.__new__(timing.Timer)
    t.fixed_s, t.ref_fixed_s = 350e-6, 10e-6
    t.result = timing.PairResult(timing.Side(), timing.Side(), "budget", "cuda_hold", 1, 0.35, 0.01)
    return t


def _pair(sol_s: float, ref_s: float, fixed=None) -> timing.Pair:
    return timing.Pair(1, (ref_s, None, None), (sol_s, None, None), None, [], 0.0, fixed)


def test_a_one_call_pair_is_measured_against_its_own_empty_batches():
    t = _timer()
    t._keep(_pair(349e-6, 21e-6, fixed=(340e-6, 12e-6)))  # the fixed costs drifted down since the start
    assert t.result.sol.ms[-1] == pytest.approx(0.009) and t.result.ref.ms[-1] == pytest.approx(0.009)


def test_a_slowed_empty_batch_of_the_candidates_does_not_speed_up_its_calls():
    t = _timer()
    t._keep(_pair(359e-6, 19e-6, fixed=(900e-6, 10e-6)))
    assert t.result.sol.ms[-1] == pytest.approx(0.009)  # 359 - 350 (the start's), not 359 - 900


def test_pairs_of_more_calls_keep_the_fixed_costs_measured_at_the_start():
    t = _timer()
    t._keep(timing.Pair(10, (110e-6, None, None), (450e-6, None, None), None, []))
    assert t.result.sol.ms[-1] == pytest.approx(0.01) and t.result.ref.ms[-1] == pytest.approx(0.01)
