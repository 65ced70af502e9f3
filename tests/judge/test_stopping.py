"""When timing stops (judge/stopping.py): on precision after a minimum, on a deadline that
covers the whole timing phase, never on a step that would end past it. Numbers and a
fake clock only: no processes, no timed assertions."""
import math

import pytest

from harness.judge import stopping


class FakeClock:
    def __init__(self):
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_speedup_interval_adds_both_sides_in_quadrature():
    tight = [1.0] * 20
    assert stopping.speedup_rel_ci(tight, tight) == 0.0
    spread = [1.0 + 0.01 * (i % 5) for i in range(40)]
    one = stopping.speedup_rel_ci(spread, tight)
    assert one > 0 and stopping.speedup_rel_ci(spread, spread) == pytest.approx(math.sqrt(2) * one)
    assert stopping.speedup_rel_ci([1.0], tight) == math.inf  # one sample says nothing of its spread


def test_precision_stops_sampling_only_after_the_minimum_of_samples_and_time():
    rule = stopping.StopRule(min_samples=10, max_samples=500, target_rel_ci=0.01, min_sampling_s=0.25)
    tight = [2.0] * 10
    assert rule.converged([tight, tight], sampling_s=0.3)
    assert not rule.converged([tight[:9], tight[:9]], sampling_s=0.3)  # too few pairs
    assert not rule.converged([tight, tight], sampling_s=0.1)  # too short
    noisy = [2.0 * (1 + 0.2 * (i % 2)) for i in range(10)]
    assert not rule.converged([tight, noisy], sampling_s=0.3)
    assert not rule.converged([tight, tight, noisy], sampling_s=0.3)  # a baseline must be tight too


def test_the_budget_refuses_a_step_that_would_end_past_its_deadline():
    clock = FakeClock()
    budget = stopping.Budget(1.0, clock)
    assert budget.fits(0.9) and budget.fits(1.0)
    clock.now += 0.6
    assert budget.spent() == pytest.approx(0.6)
    assert budget.fits(0.4) and not budget.fits(0.41)
    clock.now += 1.0
    assert not budget.fits(0.0)


def test_fixed_costs_take_their_minimum_then_their_share_of_the_budget():
    clock = FakeClock()
    budget = stopping.Budget(1.0, clock)
    assert not budget.fixed_costs_done(0, 5, 11, each_s=0.05)
    clock.now += 0.3  # the first empty batches took long (a loaded host): past 5% of the budget
    assert not budget.fixed_costs_done(4, 5, 11, each_s=0.05)  # the minimum comes first
    assert budget.fixed_costs_done(5, 5, 11, each_s=0.05)
    fresh = stopping.Budget(10.0, FakeClock())
    assert not fresh.fixed_costs_done(5, 5, 11, each_s=0.001)
    assert fresh.fixed_costs_done(11, 5, 11, each_s=0.001)


def test_a_pairs_cost_grows_on_the_line_through_one_call_and_many():
    assert stopping.pair_cost(1, 0.05, None) == 0.05
    assert stopping.pair_cost(8, 0.05, None) == pytest.approx(0.4)  # no second point: n times one
    # 1 call: 50 ms (mostly fixed work), 16 calls: 80 ms -> 2 ms a call
    assert stopping.pair_cost(101, 0.05, (16, 0.08)) == pytest.approx(0.05 + 0.002 * 100)
    assert stopping.pair_cost(4, 0.05, (16, 0.01)) == 0.05  # a faster many-call pair: never below one


def test_a_judge_pays_for_its_imports_before_its_task():
    """What each task's timing phase paid before its first pair (a full collection of
    torch's objects, numpy.ma at the first quantile) is paid while the judge waits for its
    task (main._settle_imports): a collection after it walks only newer objects."""
    import gc
    import sys
    import time

    from harness.judge import main

    try:
        main._settle_imports()
        assert "numpy.ma" in sys.modules and gc.get_freeze_count() > 0
        t0 = time.perf_counter()
        gc.collect()
        assert time.perf_counter() - t0 < 0.02
    finally:
        gc.unfreeze()
