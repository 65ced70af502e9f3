"""Statistics on timing samples and over tasks. No torch."""
from __future__ import annotations

import math
from typing import Iterable, Sequence

import numpy as np

Z95 = 1.959963984540054


def median(xs: Sequence[float]) -> float:
    return float(np.median(np.asarray(xs, dtype=float)))


def quantile(xs: Sequence[float], q: float) -> float:
    return float(np.quantile(np.asarray(xs, dtype=float), q))


def iqr(xs: Sequence[float]) -> float:
    q75, q25 = np.percentile(np.asarray(xs, dtype=float), [75, 25])
    return float(q75 - q25)


def median_ci(xs: Sequence[float]) -> tuple[float, float]:
    """Distribution-free 95% interval of the median from order statistics
    (normal approximation of the binomial); cheap enough to test after every block."""
    s = np.sort(np.asarray(xs, dtype=float))
    n = len(s)
    if n < 3:
        return float(s[0]), float(s[-1])
    half = Z95 * math.sqrt(n) / 2
    lo = max(0, int(math.floor(n / 2 - half)))
    hi = min(n - 1, int(math.ceil(n / 2 + half)))
    return float(s[lo]), float(s[hi])


def relative_ci_halfwidth(xs: Sequence[float]) -> float:
    lo, hi = median_ci(xs)
    m = median(xs)
    return (hi - lo) / 2 / m if m > 0 else math.inf


def bootstrap_ratio_ci(
    numer: Sequence[float], denom: Sequence[float], resamples: int = 2000, seed: int = 0
) -> tuple[float, float]:
    """95% bootstrap interval of median(numer) / median(denom)."""
    rng = np.random.default_rng(seed)
    a = np.asarray(numer, dtype=float)
    b = np.asarray(denom, dtype=float)
    ma = np.median(rng.choice(a, size=(resamples, len(a)), replace=True), axis=1)
    mb = np.median(rng.choice(b, size=(resamples, len(b)), replace=True), axis=1)
    ratios = ma / mb
    lo, hi = np.percentile(ratios, [2.5, 97.5])
    return float(lo), float(hi)


def geomean(xs: Iterable[float]) -> float | None:
    vals = [x for x in xs if x is not None and x > 0]
    if not vals:
        return None
    return float(math.exp(sum(math.log(x) for x in vals) / len(vals)))


def fast_p(correct_speedups: Iterable[float | None], total: int, p: float) -> float:
    """Share of all tasks that are correct and more than p times faster than the reference
    (KernelBench's fast_p; fast_0 is the share correct)."""
    if total == 0:
        return 0.0
    # A correct task that was not timed (--no-timing) is still more than 0 times faster.
    hits = sum(1 for s in correct_speedups if (s > p if s is not None else p <= 0))
    return hits / total


def pass_at_k(n: int, c: int, k: int) -> float:
    """Chance that at least one of k candidates drawn without replacement from n, of
    which c are correct, is correct: the unbiased estimator 1 - C(n-c, k) / C(n, k)
    (Chen et al. 2021). math.comb is exact, and C(n-c, k) is 0 when fewer than k
    candidates are wrong, so that case gives 1 without a special branch."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass_at_k needs 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}")
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)
