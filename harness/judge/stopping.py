"""When a task's timing stops: once the speedup is known to about 1%, or when its budget is spent.

Timing used to run until each side's median was known to 1%, checked every five
pairs, and took at least ten pairs whatever they cost: on the CPU a 256 x 65536
softmax took 52.9 s of timing at --time-budget 1 (2-core host, 2026-11-27), and
the budget was only looked at once the ten pairs were in. Here the budget is a
deadline over the whole timing phase (fixed costs, warm-up, planning, samples),
and no step starts that would end past it by what the step is expected to cost:
a step that runs longer than its last run is all it can overshoot by. Precision
is what sampling pays for: after min_samples pairs and MIN_SAMPLING_S of
sampling, it stops as soon as the speedup's 95% interval is within
target_rel_ci (about 1%), as nvbench stops on noise after a minimum of samples
and time. The same rule on every device: what a step costs is measured, never
assumed.

No torch, no processes: the rule is tested with numbers alone.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Callable, Sequence

from ..shared import stats

# Sampling runs at least this long once it starts, whatever its spread: ten pairs of
# microsecond batches take milliseconds, and a spread that looks tight over a few
# milliseconds has not met the host's slower drift.
MIN_SAMPLING_S = 0.25
# The share of the budget the fixed costs (empty batches) may take before the minimum
# of them is enough.
FIXED_SHARE_OF_BUDGET = 0.05
# Sampling takes one pair whatever the budget: that pair may be planned to end this far
# past the budget (a task's timing may end at most a second past it).
GRACE_S = 0.5

# stop_reason in results.json
CONVERGED = "converged"  # the speedup's interval reached the target
BUDGET = "budget"  # the next pair would have ended past the budget
MAX_SAMPLES = "max_samples"  # the cap on samples came first


def speedup_rel_ci(ref_ms: Sequence[float], sol_ms: Sequence[float]) -> float:
    """Half-width of the speedup's 95% interval relative to the speedup, from each
    median's own (distribution-free) interval: for a ratio of independent medians the
    relative errors add in quadrature. Cheap enough to ask after every pair; the
    bootstrap interval reported in results.json is drawn once, at the end."""
    if len(ref_ms) < 2 or len(sol_ms) < 2:
        return math.inf
    return math.hypot(stats.relative_ci_halfwidth(ref_ms), stats.relative_ci_halfwidth(sol_ms))


@dataclass(frozen=True)
class StopRule:
    min_samples: int
    max_samples: int
    target_rel_ci: float
    min_sampling_s: float = MIN_SAMPLING_S

    def converged(self, sides: Sequence[Sequence[float]], sampling_s: float) -> bool:
        """Whether sampling may stop for precision: enough pairs, long enough, and the
        speedup of every compared side against the first (the reference) within target."""
        ref, *others = sides
        if len(ref) < self.min_samples or sampling_s < self.min_sampling_s:
            return False
        return all(speedup_rel_ci(ref, other) <= self.target_rel_ci for other in others)


class Budget:
    """A deadline over a whole timing phase."""

    def __init__(self, seconds: float, clock: Callable[[], float] = time.perf_counter):
        self.clock = clock
        self.start = clock()
        self.seconds = seconds
        self.deadline = self.start + seconds

    def spent(self) -> float:
        return self.clock() - self.start

    def fits(self, cost_s: float) -> bool:
        """Whether a step expected to cost `cost_s` ends before the deadline."""
        return self.clock() + max(cost_s, 0.0) <= self.deadline

    def fixed_costs_done(self, taken: int, minimum: int, maximum: int, each_s: float) -> bool:
        """Whether to stop measuring empty batches: `maximum` taken, or `minimum` and the
        next would pass FIXED_SHARE_OF_BUDGET of the budget."""
        if taken >= maximum:
            return True
        return taken >= minimum and self.spent() + each_s > FIXED_SHARE_OF_BUDGET * self.seconds


def pair_cost(n: int, one_s: float, many: tuple[int, float] | None) -> float:
    """Seconds a pair of n-call batches is expected to take, from the wall time of a
    pair of 1-call batches (`one_s`) and of one pair of m calls (`many`: (m, seconds)),
    on the line through them: a pair's cost is fixed work (requests, flushes) plus work
    per call (drawing inputs, both calls, reading and comparing outputs). Without the
    second point, n times the first: high for short calls, which only stops earlier."""
    if n <= 1:
        return one_s
    if many is None or many[0] <= 1:
        return n * one_s
    m, seconds = many
    per_call = max((seconds - one_s) / (m - 1), 0.0)
    return one_s + per_call * (n - 1)
