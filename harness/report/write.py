"""results.json, results.csv and report.md: one small writer each, all from
the same RunResults. Also reads a run back, finished or cut short (load_run)."""
from __future__ import annotations

import json
import warnings
from pathlib import Path, PurePath
from typing import Callable

import pandas as pd

from ..shared import stats
from ..shared.whole_file import replace_whole
from . import store
from .gate import GatePolicy, verdict
from ..records import RunResults, Status, UserError, results_from_json, to_json_dict
from .units import duration

FAST_P = (0.0, 0.5, 1.0, 1.5, 2.0)
CSV_COLUMNS = [
    "problem", "solution_set", "solution_path", "status", "verdict", "flags", "ref_ms", "sol_ms", "speedup",
    "speedup_ci_low", "speedup_ci_high", "compiled_ms", "speedup_vs_compiled", "floor_ms", "achieved_gbs", "pct_of_floor",
    "ref_iqr_ms", "sol_iqr_ms",
    "samples", "clock", "ref_host_ms", "sol_host_ms", "rel_l2_err_fp64",
    "seconds", "message",
]


def atomic_write(path: Path, text: str) -> None:
    """A report written whole (shared/whole_file.py): a reader (or a kill) never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    replace_whole(path, text)


def load_run(path: Path, warn: Callable[[str], None] | None = None) -> RunResults:
    """A run from its folder, a results.json or a results.jsonl. A folder is read from
    its store (store.py), which is never behind its results.json: a killed run may have
    had no chance to write results.json. `warn` hears of a cut-short last line."""
    warn = warn or (lambda text: warnings.warn(text, stacklevel=3))
    if path.is_dir():
        if (path / store.STORE_NAME).is_file():
            return store.read(path / store.STORE_NAME, warn)
        path = path / "results.json"
    elif path.name.endswith(".jsonl") and path.is_file():
        return store.read(path, warn)
    if not path.is_file():
        raise UserError(f"no results file at {path}; pass a results.json or a run folder")
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise UserError(f"{path} is not valid JSON ({e.msg} at line {e.lineno}); was it written by kbench?") from None
    return results_from_json(data)


def table(run: RunResults, policy: GatePolicy) -> pd.DataFrame:
    """One row per task: the table every format is written from."""
    rows = []
    for r in run.results:
        t = r.timing
        v = verdict(r, policy)
        rows.append(
            {
                "problem": r.problem,
                "solution_set": r.solution_set,
                "solution_path": r.solution_path,
                "status": r.status.value,
                "verdict": "pass" if v.passed else "fail",
                "flags": ";".join(f.value for f in r.flags),
                "ref_ms": r.ref_ms,
                "sol_ms": r.sol_ms,
                "speedup": r.speedup,
                "speedup_ci_low": t.speedup_ci[0] if t and r.speedup is not None else None,
                "speedup_ci_high": t.speedup_ci[1] if t and r.speedup is not None else None,
                "compiled_ms": t.compiled.median_ms if t and t.compiled else None,
                "speedup_vs_compiled": t.speedup_vs_compiled if t and r.speedup is not None else None,
                "floor_ms": t.floor_ms if t else None,
                # bytes that must move over the solution's time, and the floor as a share of that time
                "achieved_gbs": t.bytes_moved / (t.sol.median_ms * 1e6) if t and t.bytes_moved and t.sol.median_ms else None,
                "pct_of_floor": 100 * t.floor_ms / t.sol.median_ms if t and t.floor_ms and t.sol.median_ms else None,
                "ref_iqr_ms": t.ref.iqr_ms if t else None,
                "sol_iqr_ms": t.sol.iqr_ms if t else None,
                "samples": t.sol.n if t else None,
                "clock": clock_of(t),
                "ref_host_ms": t.ref.host_ms if t else None,
                "sol_host_ms": t.sol.host_ms if t else None,
                "rel_l2_err_fp64": r.check.rel_l2_err_fp64 if r.check else None,
                "seconds": round(r.seconds, 2),
                "message": r.message,
            }
        )
    return pd.DataFrame(rows, columns=CSV_COLUMNS)


def clock_of(t) -> str | None:
    """The clock that timed a task, or "reference's/solution's" where the two sides' differ
    (a side that synchronizes inside is timed by host_wall)."""
    if t is None:
        return None
    ref, sol = t.ref.clock or t.clock, t.sol.clock or t.clock
    return ref if ref == sol else f"{ref}/{sol}"


def is_correct(r, policy: GatePolicy) -> bool:
    """Correct for fast_p, geomean and pass@k: ok, and no flag the policy fails on.
    --min-speedup is a gate rule, not correctness, so it does not count here."""
    return verdict(r, GatePolicy(fail_flags=policy.fail_flags)).passed


def summary(run: RunResults, policy: GatePolicy) -> dict:
    """Counts per status, fast_p and the geometric-mean speedup. A task counts as
    correct only if it passes the gate's flag policy too: an `ok` that tampered
    with the timer or escaped it is not a win."""
    results = run.results
    counts = {s.value: sum(1 for r in results if r.status is s) for s in Status}
    correct = [r.speedup for r in results if is_correct(r, policy)]
    return {
        "tasks": len(results),
        "counts": counts,
        "fast_p": {p: stats.fast_p(correct, len(results), p) for p in FAST_P},
        "geomean_speedup": stats.geomean(s for s in correct if s is not None),
        "geomean_n": sum(1 for s in correct if s is not None),
    }


# ---- writers ----------------------------------------------------------------

def write_json(run: RunResults, path: Path) -> None:
    atomic_write(path, json.dumps(to_json_dict(run), indent=1) + "\n")


def write_csv(run: RunResults, path: Path, policy: GatePolicy) -> None:
    atomic_write(path, table(run, policy).to_csv(index=False, float_format="%.6g"))


def write_markdown(run: RunResults, path: Path, policy: GatePolicy) -> None:
    atomic_write(path, render_markdown(run, policy))


def write_all(run: RunResults, out_dir: Path, policy: GatePolicy) -> None:
    write_json(run, out_dir / "results.json")
    write_csv(run, out_dir / "results.csv", policy)
    write_markdown(run, out_dir / "report.md", policy)


def _fmt(x, spec: str) -> str:
    return "" if x is None or (isinstance(x, float) and pd.isna(x)) else format(x, spec)


def _md_table(header: list[str], rows: list[list[str]]) -> str:
    esc = lambda s: str(s).replace("|", "\\|").replace("\n", " ")  # noqa: E731
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(esc(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def _clock_paragraph(cpu: bool) -> str:
    """How the times in the table were measured, for this run's device."""
    if cpu:
        return ("Times are medians per call of the CPU time each side's processes used for a batch of calls "
                "(its CPU clocks, read by the judge; the solution's process is stopped between requests), caches "
                "flushed before each batch, less the batch's fixed cost (cpu_clock). Speedup = reference median / "
                "solution median, with a bootstrap 95% interval.")
    return ("Times are medians per call over timed batches, each call on inputs of its own drawn for that batch, "
            "L2 flushed before it, the other side stopped and the GPU drained: the reference's from CUDA events "
            "the judge records around its batch; the solution's from the judge's own wall clock around its batch, "
            "less the batch's fixed cost, or the solution's CUDA events where they are no more than 15% (held "
            "batches: 8%) under that measure (further under: timing_mismatch, and the judge's measure stands). "
            "Batches are the calls queued behind a hold that the judge releases, its clock running from the release "
            "until the GPU is idle (cuda_hold: the device's time, not the host's launches), or where a forward "
            "cannot queue, one replay of the calls captured in a CUDA graph (cuda_graph, for calls of a few "
            "microseconds) or the calls eagerly back to back, as a model makes them (cuda_burst). Host time (ref host, sol host) is how long a side "
            "takes to issue one call (the solution's by its own account); host_bound marks a task where it exceeds "
            "a side's own kernel time. Speedup = reference median / solution median, with a bootstrap 95% interval.")


def _overhead_line(run: RunResults) -> str:
    """The fixed cost of a timed batch (subtracted before dividing by its calls), per
    side: times whose batches are not much longer than it are the least certain."""
    sol = [r.timing.fixed_ms for r in run.results if r.timing and r.timing.fixed_ms is not None]
    ref = [r.timing.ref_fixed_ms for r in run.results if r.timing and r.timing.ref_fixed_ms is not None]
    if not sol or not ref:
        return ""
    return (f" A timed batch's fixed cost, subtracted before dividing by its calls: {stats.median(sol) * 1e3:.0f} us "
            f"for the solution's (a request to its process), {stats.median(ref) * 1e3:.0f} us for the reference's "
            "(median over tasks); floor = (input + output bytes) / the device's measured copy bandwidth.")


def device_line(info) -> str:
    """The card and, on a GPU run, which GPUs ran it: 'NVIDIA H100 80GB HBM3 x4 (GPUs 0, 1, 2, 3)'."""
    if not info.gpus:
        return info.device
    numbers = ", ".join(g.partition(":")[0] for g in info.gpus)
    names = {g.partition(":")[2].strip() for g in info.gpus}
    if len(names) == 1 and next(iter(names)):
        count = f" x{len(info.gpus)}" if len(info.gpus) > 1 else ""
        return f"{next(iter(names))}{count} (GPU{'s' if len(info.gpus) > 1 else ''} {numbers})"
    return "GPUs " + ", ".join(info.gpus)


def render_markdown(run: RunResults, policy: GatePolicy) -> str:
    info, s = run.run, summary(run, policy)
    df = table(run, policy)
    cuda = f", CUDA {info.cuda_version}" if info.cuda_version else ""
    state = f"finished {info.finished}" if info.finished else "not finished (interrupted or still running)"
    out = [
        f"# kbench report: {info.run_id}",
        "",
        f"- device: {device_line(info)}; precision {info.precision}; torch {info.torch_version}{cuda}; "
        f"kbench {info.kbench_version}",
        f"- started {info.started}; {state}",
        *([f"- build stage: {info.build_seconds:.1f} s wall, {info.builds_cached} of the builds from the cache"]
          if info.build_seconds is not None else []),
        f"- options: {', '.join(f'{k}={v}' for k, v in sorted(info.options.items()))}",
        "",
        "## Summary",
        "",
        _md_table(["status", "tasks"], [[k, str(v)] for k, v in s["counts"].items() if v] + [["total", str(s["tasks"])]]),
        "",
        _md_table(
            ["metric", "value"],
            [[f"fast_{p:g}", f"{v:.1%}"] for p, v in s["fast_p"].items()]
            + [["geomean speedup (correct tasks)", f"{_fmt(s['geomean_speedup'], '.3f')}x (n={s['geomean_n']})"
                if s["geomean_speedup"] is not None else "n/a (n=0)"]],
        ),
        "",
        "fast_p: share of all tasks that are correct (ok, and no flag that fails the gate) and more than p times "
        "faster than the reference.",
        "",
    ]
    out += _problem_errors_section(run)
    sets = sorted(df["solution_set"].unique()) if len(df) else []
    if len(sets) > 1:
        rows = []
        for name in sets:
            sub = [r for r in run.results if r.solution_set == name]
            sp = [r.speedup for r in sub if is_correct(r, policy)]
            gm = stats.geomean(x for x in sp if x is not None)
            rows.append([name, str(len(sub)), str(len(sp)), f"{stats.fast_p(sp, len(sub), 1.0):.1%}", _fmt(gm, ".3f")])
        out += ["## Per solution set", "", _md_table(["set", "tasks", "ok", "fast_1", "geomean speedup"], rows), ""]
    out += _candidates_section(run, policy)
    compiled = bool(len(df)) and df["compiled_ms"].notna().any()  # --compile-baseline columns
    roofline = bool(len(df)) and df["floor_ms"].notna().any()  # GPU runs with a measured bandwidth
    clocks = df["clock"].dropna().value_counts() if len(df) else pd.Series(dtype=int)
    by_clock = len(clocks) > 1  # say per task which clock timed it when they differ
    host = bool(len(df)) and (df["ref_host_ms"].notna().any() or df["sol_host_ms"].notna().any())
    header = ["problem", "set", "solution", "status", "flags", "ref time", "sol time", "speedup"]
    header += ["ref host", "sol host"] if host else []
    header += (["compiled", "vs compiled"] if compiled else []) + (["floor", "% of floor", "GB/s"] if roofline else [])
    header += ["95% CI"] + (["clock"] if by_clock else []) + ["verdict"]
    rows = []
    for r in df.to_dict("records"):
        lo, hi = r["speedup_ci_low"], r["speedup_ci_high"]
        ci = f"{_fmt(lo, '.3f')}-{_fmt(hi, '.3f')}" if _fmt(lo, ".3f") else ""
        row = [r["problem"], r["solution_set"], PurePath(r["solution_path"]).name, r["status"],
               r["flags"].replace(";", ", "), duration(r["ref_ms"]), duration(r["sol_ms"]), _fmt(r["speedup"], ".3f")]
        if host:
            row += [duration(r["ref_host_ms"]), duration(r["sol_host_ms"])]
        if compiled:
            row += [duration(r["compiled_ms"]), _fmt(r["speedup_vs_compiled"], ".3f")]
        if roofline:
            row += [duration(r["floor_ms"]), _fmt(r["pct_of_floor"], ".0f"), _fmt(r["achieved_gbs"], ".0f")]
        row += [ci] + ([r["clock"] if isinstance(r["clock"], str) else ""] if by_clock else []) + [r["verdict"]]
        rows.append(row)
    out += [
        "## Results",
        "",
        _md_table(header, rows),
        "",
        (_clock_paragraph(info.device == "cpu") + " Timed by: "
         + ", ".join(f"{k} ({v} task{'s' * (v != 1)})" for k, v in clocks.items()) + "." if len(clocks)
         else "Nothing was timed.")
        + _overhead_line(run),
        "",
    ]
    if info.unmatched:
        out += ["## Solution files that match no problem", ""] + [f"- {u}" for u in info.unmatched] + [""]
    notes = [r for r in run.results if r.status is not Status.OK or r.flags or not verdict(r, policy).passed]
    if notes:
        out += ["## Failures and flags", ""]
        for r in notes:
            flags = f" [{', '.join(f.value for f in r.flags)}]" if r.flags else ""
            # The gate's own reason where the status does not give it (a failing flag, --min-speedup).
            extra = [x for x in verdict(r, policy).reasons if x != r.status.value]
            gate_note = f" fails the gate: {'; '.join(extra)}." if extra else ""
            message = f": {r.message}" if r.message else ""
            log = f" (log: {log_link(r.log_path)})" if r.log_path else ""
            out.append(f"- **{r.status.value}**{flags} `{r.problem}` in set `{r.solution_set}` "
                       f"(`{r.solution_path}`){message}{gate_note}{log}")
        out.append("")
    return "\n".join(out)


def log_link(log_path: str) -> str:
    """A markdown link to a task's log, relative to report.md: the run writes logs under
    <run folder>/logs/, beside report.md, so the link survives moving the folder."""
    parts = PurePath(log_path).parts
    if "logs" in parts:
        inside = "/".join(parts[len(parts) - 1 - parts[::-1].index("logs"):])
        return f"[{inside}]({inside.replace(' ', '%20')})"
    return f"`{log_path}`"


# What each clock is, said only for the clocks that timed something in this run: a CPU
# report must not describe CUDA events.


def problem_errors(run: RunResults) -> list[tuple[str, int, str]]:
    """(problem, tasks, the first task's message) for each problem whose file failed:
    with many candidates per problem, one line each instead of one per candidate."""
    found: dict[str, list] = {}
    for r in run.results:
        if r.status is Status.PROBLEM_ERROR:
            found.setdefault(r.problem, []).append(r)
    return [(problem, len(rs), rs[0].message) for problem, rs in found.items()]


PROBLEM_ERRORS_NOTE = ("Their solutions were not judged: these problem files failed (their import, get_init_inputs, "
                       "get_inputs or the reference's forward). Fix them, then `kbench run --resume RUN_DIR` reruns "
                       "those tasks.")


def _problem_errors_section(run: RunResults) -> list[str]:
    rows = problem_errors(run)
    if not rows:
        return []
    return ["## Problem files that failed", "", PROBLEM_ERRORS_NOTE, "",
            _md_table(["problem", "tasks", "error"], [[p, str(n), m] for p, n, m in rows]), ""]


PASS_AT_K = (1, 5, 10)


def _candidates_section(run: RunResults, policy: GatePolicy) -> list[str]:
    """pass@k and the best speedup per (set, problem), for sets that sample several
    candidates per problem (model evaluations); empty when every problem has one."""
    groups: dict[tuple[str, str], list] = {}
    for r in run.results:
        groups.setdefault((r.solution_set, r.problem), []).append(r)
    if all(len(g) == 1 for g in groups.values()):
        return []
    rows = []
    for (sset, problem), group in groups.items():  # run order: problems as discovered
        correct = [r for r in group if is_correct(r, policy)]
        n, c = len(group), len(correct)
        best = max((r.speedup for r in correct if r.speedup is not None), default=None)
        rows.append([problem, sset, str(n), str(c)]
                    + [f"{stats.pass_at_k(n, c, k):.1%}" if k <= n else "" for k in PASS_AT_K] + [_fmt(best, ".3f")])
    header = ["problem", "set", "n", "correct"] + [f"pass@{k}" for k in PASS_AT_K] + ["best speedup (correct)"]
    return [
        "## Several candidates per problem", "", _md_table(header, rows), "",
        "pass@k: chance that at least one of k candidates drawn from the n is correct, by the unbiased estimator "
        "1 - C(n-c, k) / C(n, k); empty where k > n.", "",
    ]
