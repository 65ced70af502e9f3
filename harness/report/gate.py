"""CI policy: which results fail a run, and why. Decides the exit code."""
from __future__ import annotations

from dataclasses import dataclass, field

from ..records import Flag, Status, TaskResult, UserError

DEFAULT_FAIL_FLAGS = frozenset(
    {Flag.TAMPERING, Flag.UNTIMED_WORK, Flag.INPUT_MUTATION, Flag.BELOW_ROOFLINE, Flag.TIMING_MISMATCH}
)

EXIT_OK, EXIT_GATE_FAILED, EXIT_USAGE = 0, 1, 2


@dataclass(frozen=True)
class GatePolicy:
    fail_flags: frozenset[Flag] = DEFAULT_FAIL_FLAGS
    min_speedup: float | None = None
    exit_zero: bool = False  # research runs: failures are expected, the shell should not fail


@dataclass(frozen=True)
class Verdict:
    passed: bool
    reasons: tuple[str, ...] = ()


@dataclass(frozen=True)
class GateResult:
    exit_code: int
    failed: tuple[tuple[str, str], ...] = field(default_factory=tuple)  # (task key, reason)


def parse_flags(text: str) -> frozenset[Flag]:
    """'tampering,untimed_work' -> flags; 'none' -> no flag fails the run."""
    if text.strip().lower() in ("", "none"):
        return frozenset()
    out = set()
    for name in text.split(","):
        try:
            out.add(Flag(name.strip()))
        except ValueError:
            valid = ", ".join(f.value for f in Flag)
            raise UserError(f"--fail-on: unknown flag '{name.strip()}'; valid: {valid}, or none") from None
    return frozenset(out)


def verdict(result: TaskResult, policy: GatePolicy) -> Verdict:
    reasons = []
    if result.status is not Status.OK:
        reasons.append(result.status.value)
    for flag in result.flags:
        if flag in policy.fail_flags:
            reasons.append(f"flag {flag.value}")
    if policy.min_speedup is not None and result.status is Status.OK:
        if result.speedup is None or result.speedup < policy.min_speedup:
            got = "unmeasured" if result.speedup is None else f"{result.speedup:.2f}x"
            reasons.append(f"speedup {got} < --min-speedup {policy.min_speedup:g}")
    return Verdict(not reasons, tuple(reasons))


def reasons_summary(result: GateResult) -> str:
    """Why the gate failed, counted by reason, most common first: '5 incorrect, 2 flag
    timing_mismatch'. A task failing for several reasons counts under each."""
    counts: dict[str, int] = {}
    for _, reasons in result.failed:
        for reason in reasons.split("; "):
            # "speedup 0.80x < --min-speedup 1" differs per task: count it by its rule
            key = "speedup below " + reason.split(" < ", 1)[1] if " < --min-speedup" in reason else reason
            counts[key] = counts.get(key, 0) + 1
    return ", ".join(f"{n} {reason}" for reason, n in sorted(counts.items(), key=lambda kv: -kv[1]))


def gate(results: list[TaskResult] | tuple[TaskResult, ...], policy: GatePolicy) -> GateResult:
    failed = []
    for r in results:
        v = verdict(r, policy)
        if not v.passed:
            failed.append((r.key, "; ".join(v.reasons)))
    code = EXIT_OK if (not failed or policy.exit_zero) else EXIT_GATE_FAILED
    return GateResult(code, tuple(failed))
