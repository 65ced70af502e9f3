"""The numbers every report is built from: timing summaries, intervals, and KernelBench's
fast_p, which must mean what it means in the papers that quote it."""
import math

import numpy as np
import pytest

from harness.shared import stats


def test_median_odd_and_even():
    assert stats.median([3.0, 1.0, 2.0]) == 2.0
    assert stats.median([4.0, 1.0, 3.0, 2.0]) == 2.5
    assert stats.median([5]) == 5.0
    assert isinstance(stats.median([1, 2, 3]), float)


def test_median_ignores_outliers():
    assert stats.median([1.0, 1.0, 1.0, 1.0, 1000.0]) == 1.0


def test_iqr():
    xs = list(range(1, 101))  # 1..100: numpy's linear quartiles are 25.75 and 75.25
    assert stats.iqr(xs) == pytest.approx(49.5)
    assert stats.iqr([2.0] * 10) == 0.0
    assert stats.iqr([1.0, 2.0, 3.0, 4.0, 5.0]) == pytest.approx(2.0)


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 10, 11, 50, 101, 1000])
def test_median_ci_contains_the_median(n):
    xs = np.random.default_rng(n).lognormal(0.0, 0.3, size=n)
    lo, hi = stats.median_ci(xs)
    assert lo <= stats.median(xs) <= hi
    assert min(xs) <= lo and hi <= max(xs)


def test_median_ci_narrows_with_more_samples():
    rng = np.random.default_rng(0)
    widths = []
    for n in (20, 200, 2000):
        lo, hi = stats.median_ci(rng.normal(10.0, 1.0, size=n))
        widths.append(hi - lo)
    assert widths[0] > widths[1] > widths[2]
    # the width of a median interval shrinks like 1/sqrt(n): x100 samples, about 1/10 the width
    assert widths[2] < widths[0] / 5


def test_median_ci_covers_the_true_median_about_95_percent():
    rng = np.random.default_rng(1)
    n, runs = 40, 2000
    samples = rng.exponential(1.0, size=(runs, n))  # true median ln 2
    hits = 0
    for xs in samples:
        lo, hi = stats.median_ci(xs)
        hits += lo <= math.log(2) <= hi
    assert 0.93 <= hits / runs <= 0.99


def test_median_ci_of_constant_samples_is_a_point():
    assert stats.median_ci([1.5] * 30) == (1.5, 1.5)


def test_relative_ci_halfwidth():
    xs = [1.0] * 30
    assert stats.relative_ci_halfwidth(xs) == 0.0
    rng = np.random.default_rng(2)
    ys = rng.normal(100.0, 1.0, size=200)
    lo, hi = stats.median_ci(ys)
    assert stats.relative_ci_halfwidth(ys) == pytest.approx((hi - lo) / 2 / stats.median(ys))
    # scale-free: the same samples in other units give the same relative width
    assert stats.relative_ci_halfwidth(ys * 1000) == pytest.approx(stats.relative_ci_halfwidth(ys))
    # tighter with more samples, which is what adaptive stopping relies on
    assert stats.relative_ci_halfwidth(rng.normal(100.0, 1.0, size=5000)) < stats.relative_ci_halfwidth(ys)


def test_relative_ci_halfwidth_of_zero_median_is_infinite():
    assert stats.relative_ci_halfwidth([0.0, 0.0, 0.0]) == math.inf


def test_bootstrap_ratio_ci_contains_the_true_ratio():
    rng = np.random.default_rng(3)
    ref = rng.normal(3.0, 0.05, size=200)  # median 3
    sol = rng.normal(1.5, 0.03, size=200)  # median 1.5
    lo, hi = stats.bootstrap_ratio_ci(ref, sol)
    assert lo < 2.0 < hi
    assert lo <= stats.median(ref) / stats.median(sol) <= hi
    assert hi - lo < 0.05  # tight on tight samples


def test_bootstrap_ratio_ci_widens_with_noise():
    rng = np.random.default_rng(4)
    ref = rng.normal(2.0, 0.01, size=100)
    quiet = rng.normal(1.0, 0.005, size=100)
    noisy = rng.normal(1.0, 0.2, size=100)
    q_lo, q_hi = stats.bootstrap_ratio_ci(ref, quiet)
    n_lo, n_hi = stats.bootstrap_ratio_ci(ref, noisy)
    assert (n_hi - n_lo) > 5 * (q_hi - q_lo)


def test_bootstrap_ratio_ci_is_deterministic_with_the_seed():
    rng = np.random.default_rng(5)
    a, b = rng.lognormal(1.0, 0.2, size=50), rng.lognormal(0.0, 0.2, size=50)
    assert stats.bootstrap_ratio_ci(a, b, seed=7) == stats.bootstrap_ratio_ci(a, b, seed=7)
    assert stats.bootstrap_ratio_ci(a, b) == stats.bootstrap_ratio_ci(list(a), list(b))
    assert stats.bootstrap_ratio_ci(a, b, seed=7) != stats.bootstrap_ratio_ci(a, b, seed=8)


def test_geomean():
    assert stats.geomean([2.0, 8.0]) == pytest.approx(4.0)
    assert stats.geomean([0.5, 2.0]) == pytest.approx(1.0)
    assert stats.geomean(iter([3.0])) == pytest.approx(3.0)  # any iterable, e.g. a generator


def test_geomean_ignores_none_and_non_positive():
    assert stats.geomean([2.0, None, 8.0, 0.0, -1.0]) == pytest.approx(4.0)
    assert stats.geomean([]) is None
    assert stats.geomean([None, 0.0, -3.0]) is None


def test_fast_p_counts_all_tasks_in_the_denominator():
    # 10 tasks; 4 correct with speedups 0.5, 1.0, 1.2, 3.0; 6 failed
    correct = [0.5, 1.0, 1.2, 3.0]
    assert stats.fast_p(correct, 10, 0.0) == pytest.approx(0.4)  # fast_0: share correct
    assert stats.fast_p(correct, 10, 1.0) == pytest.approx(0.2)  # strictly faster: 1.0 does not count
    assert stats.fast_p(correct, 10, 2.0) == pytest.approx(0.1)
    assert stats.fast_p(correct, 10, 3.0) == 0.0


def test_fast_p_skips_unmeasured_and_handles_no_tasks():
    assert stats.fast_p([None, 2.0], 4, 1.0) == pytest.approx(0.25)
    # fast_0 is the share correct, timed or not (--no-timing leaves speedup None)
    assert stats.fast_p([None, 2.0], 4, 0.0) == pytest.approx(0.5)
    assert stats.fast_p([], 0, 1.0) == 0.0
    assert stats.fast_p([], 5, 0.0) == 0.0
