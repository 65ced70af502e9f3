"""Compare two runs task by task: what newly fails, what got fixed, what got
faster or slower beyond the noise. The exit code is the verdict (as asv compare).

A speedup change counts only when the two bootstrap 95% intervals do not overlap:
a difference inside the noise of either run is "not significant", however large,
and so is one where either run has no usable interval (see `interval`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import PurePath

import pandas as pd

from .gate import EXIT_GATE_FAILED, EXIT_OK, GatePolicy, verdict
from ..records import RunResults, Status, TaskResult
from .write import _md_table

# Worst first: a reviewer reads the top of the table.
MARKS = ("newly failing", "slower", "problem error", "fixed", "faster", "not significant", "still failing",
         "not comparable", "untimed", "new", "removed")
COLUMNS = ["mark", "problem", "set", "candidate", "base", "new", "change"]


@dataclass(frozen=True)
class Row:
    problem: str
    solution_set: str
    candidate: str  # path inside the set folder: the same in both runs whatever their roots
    base: TaskResult | None
    new: TaskResult | None
    mark: str
    change: float | None  # new speedup / base speedup - 1
    fails: bool  # counts against the exit code


@dataclass(frozen=True)
class Comparison:
    rows: tuple[Row, ...]
    threshold: float
    exit_code: int
    devices: tuple[str, str]


def candidate_path(r: TaskResult) -> str:
    """The solution path below its set folder. Two runs of one checkout from different
    places (a CI workspace, a laptop) store different absolute paths for the same file."""
    parts = PurePath(r.solution_path).parts
    inside = [i for i, p in enumerate(parts[:-1]) if p == r.solution_set]
    return "/".join(parts[inside[-1] + 1:]) if inside else parts[-1]


def _pair(base: RunResults, new: RunResults) -> list[tuple[TaskResult | None, TaskResult | None]]:
    """Match by solution_path, then what is left by (problem, set, path inside the set)."""
    new_by_path = {r.solution_path: r for r in new.results}
    pairs, left_base = [], []
    for b in base.results:
        n = new_by_path.pop(b.solution_path, None)
        if n is None:
            left_base.append(b)
        else:
            pairs.append((b, n))
    rootless = {(r.problem, r.solution_set, candidate_path(r)): r for r in new_by_path.values()}
    for b in left_base:
        pairs.append((b, rootless.pop((b.problem, b.solution_set, candidate_path(b)), None)))
    pairs += [(None, n) for n in rootless.values()]
    return pairs


def _mark(b: TaskResult | None, n: TaskResult | None, policy: GatePolicy, threshold: float) -> tuple[str, float | None, bool]:
    if b is None:
        return "new", None, False
    if n is None:
        return "removed", None, False
    if problem_changed(b, n):
        return "not comparable", None, False  # another problem: neither its verdict nor its speed carries over
    b_ok, n_ok = verdict(b, policy).passed, verdict(n, policy).passed
    if n.status is Status.PROBLEM_ERROR:
        # NEW never judged the solution, so it is not "newly failing"; but a kernel that
        # passed in BASE is no longer shown to pass, which a CI gate must not wave through.
        return "problem error", None, b_ok
    if b_ok != n_ok:
        return ("fixed", None, False) if n_ok else ("newly failing", None, True)
    if not b_ok:
        return "still failing", None, False
    if b.speedup is None or n.speedup is None or b.timing is None or n.timing is None:
        return "untimed", None, False  # --no-timing on either side: nothing to compare
    change = n.speedup / b.speedup - 1
    b_ci, n_ci = interval(b), interval(n)
    if b_ci is None or n_ci is None:
        return "not significant", change, False  # no usable interval: no claim either way
    if n_ci[0] > b_ci[1]:
        return "faster", change, False
    if n_ci[1] < b_ci[0]:
        return "slower", change, -change > threshold
    return "not significant", change, False


def interval(r: TaskResult) -> tuple[float, float] | None:
    """The task's speedup interval as compare may use it: finite, ordered, and holding the
    speedup itself (widened to it if not); None where there is none to trust (missing,
    NaN, a speedup of 0 or inf). An interval that cannot be read can never separate two
    runs: the task is "not significant" rather than faster or slower."""
    ci = r.timing.speedup_ci if r.timing is not None else None
    if r.speedup is None or not ci or len(ci) != 2 or any(x is None for x in ci):
        return None
    lo, hi = float(ci[0]), float(ci[1])
    if not all(math.isfinite(x) and x > 0 for x in (lo, hi, r.speedup)) or lo > hi:
        return None
    return min(lo, r.speedup), max(hi, r.speedup)


def problem_changed(b: TaskResult, n: TaskResult) -> bool:
    """Both runs recorded the problem file's hash, and it differs. Runs that did not
    record it (older results files) compare as before."""
    return bool(b.problem_sha256) and bool(n.problem_sha256) and b.problem_sha256 != n.problem_sha256


def compare(base: RunResults, new: RunResults, policy: GatePolicy, threshold: float = 0.05) -> Comparison:
    rows = []
    for b, n in _pair(base, new):
        r = n or b
        mark, change, fails = _mark(b, n, policy, threshold)
        rows.append(Row(r.problem, r.solution_set, candidate_path(r), b, n, mark, change, fails))
    rows.sort(key=lambda row: MARKS.index(row.mark))  # stable: run order within a mark
    code = EXIT_GATE_FAILED if any(row.fails for row in rows) else EXIT_OK
    return Comparison(tuple(rows), threshold, code, (base.run.device, new.run.device))


def _side(r: TaskResult | None, policy: GatePolicy) -> str:
    if r is None:
        return ""
    v = verdict(r, policy)
    if not v.passed:
        return "; ".join(v.reasons)
    if r.speedup is None or r.timing is None:
        return "pass (untimed)"
    ci = interval(r)
    return f"{r.speedup:.3f}x " + (f"[{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "[no interval]")


def table(cmp: Comparison, policy: GatePolicy) -> pd.DataFrame:
    rows = [
        {
            "mark": row.mark + (" (beyond threshold)" if row.fails and row.mark == "slower" else "")
            + (" (problem file changed)" if row.mark == "not comparable" else "")
            + (" (NEW's problem file failed)" if row.mark == "problem error" else ""),
            "problem": row.problem, "set": row.solution_set, "candidate": row.candidate,
            "base": _side(row.base, policy), "new": _side(row.new, policy),
            "change": "" if row.change is None else f"{row.change:+.1%}",
        }
        for row in cmp.rows
    ]
    return pd.DataFrame(rows, columns=COLUMNS)


def render_markdown(cmp: Comparison, policy: GatePolicy) -> str:
    rows = [list(rec) for rec in table(cmp, policy).itertuples(index=False)]
    return _md_table(COLUMNS, rows) + "\n"  # report.md's table writer: the same escaping of | and newlines


def render_csv(cmp: Comparison, policy: GatePolicy) -> str:
    return table(cmp, policy).to_csv(index=False)


def summary_line(cmp: Comparison) -> str:
    counts = {m: sum(1 for r in cmp.rows if r.mark == m) for m in MARKS}
    parts = [f"{v} {m}" for m, v in counts.items() if v]
    beyond = sum(1 for r in cmp.rows if r.mark == "slower" and r.fails)
    if counts["slower"]:
        parts.append(f"{beyond} slower by more than {cmp.threshold * 100:g}%")
    text = f"compare: {len(cmp.rows)} tasks: " + (", ".join(parts) or "none") + f"; exit {cmp.exit_code}"
    if cmp.devices[0] != cmp.devices[1]:
        text += f" (BASE ran on {cmp.devices[0]}, NEW on {cmp.devices[1]}: speedups may not carry across devices)"
    return text
