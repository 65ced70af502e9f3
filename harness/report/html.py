"""report.html: one self-contained file (no scripts, fonts, stylesheets or images
from anywhere else) that a reviewer can open from a CI artifact or an email.

Every string from results goes through `_el`/`_text`, which escape it: a
solution's message may hold anything, markup included, and must show as text.
"""
from __future__ import annotations

import html
import math
import re
from pathlib import PurePath

from . import write as report
from .gate import GatePolicy, verdict
from .junit import xml_safe
from ..records import RunResults, Status
from .units import duration

PASS, FAIL = "#1a7f37", "#cf222e"
CSS = """body{font:14px/1.4 system-ui,sans-serif;margin:2em;color:#1f2328;max-width:1200px}
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #d0d7de;padding:2px 8px;text-align:left}
td.num{text-align:right;font-variant-numeric:tabular-nums}tr.fail td:last-child{color:#cf222e}
tr.pass td:last-child{color:#1a7f37}pre{white-space:pre-wrap;background:#f6f8fa;padding:.5em;margin:.2em 0 1em}
svg{display:block;margin:.5em 0}.note{color:#59636e}"""


class _Markup(str):
    """HTML that is already escaped; any other str is text and gets escaped."""


def _text(value) -> str:
    return html.escape(xml_safe(str(value)), quote=True)


def _el(tag: str, *children, **attrs) -> _Markup:
    """<tag attrs>children</tag>; `class_` names the class attribute, `x_y` an x-y one."""
    attr = "".join(f' {k.rstrip("_").replace("_", "-")}="{_text(v)}"' for k, v in attrs.items() if v is not None)
    inner = "".join(c if isinstance(c, _Markup) else _text(c) for c in children if c is not None)
    return _Markup(f"<{tag}{attr}>{inner}</{tag}>")


def _table(header: list[str], rows: list[list], id_: str | None = None, row_classes: list[str] | None = None) -> _Markup:
    classes = row_classes or [None] * len(rows)
    body = [_el("tr", *(_el("td", c, class_="num" if _numeric(c) else None) for c in row), class_=cls)
            for row, cls in zip(rows, classes)]
    return _el("table", _el("thead", _el("tr", *(_el("th", h) for h in header))), _el("tbody", *body), id=id_)


def _numeric(cell) -> bool:
    return isinstance(cell, str) and re.fullmatch(r"\d+(\.\d+)?(x|%| us| ms| s)?", cell) is not None


# ---- charts -------------------------------------------------------------------

def _log_ticks(lo: float, hi: float) -> list[float]:
    """Round speedups (0.8x, 1.5x, 2x, ...), as many as fit: fewer per decade on wider ranges."""
    decades = range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1)
    for steps in ((1, 1.2, 1.5, 2, 3, 5, 7, 8), (1, 2, 5), (1,)):
        ticks = [round(m * 10.0 ** e, 6) for e in decades for m in steps if lo <= m * 10.0 ** e <= hi]
        if len(ticks) <= 10:
            break
    return ticks


def speedup_chart(run: RunResults, policy: GatePolicy) -> _Markup:
    """A dot per timed task on a log axis, one lane per solution set; the 1x line is the reference."""
    points = [(r, verdict(r, policy).passed) for r in run.results
              if r.speedup is not None and 0 < r.speedup < math.inf]  # a log axis has no room for 0 or inf
    infinite = sum(1 for r in run.results if r.speedup is not None and math.isinf(r.speedup))
    left_out = (_el("p", f"{infinite} task{'s' * (infinite != 1)} with an infinite speedup (a solution time of 0) "
                         "not shown.", class_="note") if infinite else None)
    if not points:
        return _el("div", _el("p", "No task has a speedup (none was correct and timed).", class_="note"), left_out)
    sets = list(dict.fromkeys(r.solution_set for r, _ in points))
    lo = min([r.speedup for r, _ in points] + [1.0]) / 1.3
    hi = max([r.speedup for r, _ in points] + [1.0]) * 1.3
    left, width, lane = 140, 560, 28
    height = 40 + lane * len(sets)
    x = lambda s: left + width * (math.log(s) - math.log(lo)) / (math.log(hi) - math.log(lo))  # noqa: E731
    parts = []
    for t in _log_ticks(lo, hi):
        parts += [_el("line", x1=f"{x(t):.1f}", x2=f"{x(t):.1f}", y1="10", y2=height - 25, stroke="#d0d7de"),
                  _el("text", f"{t:g}x", x=f"{x(t):.1f}", y=height - 8, text_anchor="middle", font_size="11")]
    parts.append(_el("line", x1=f"{x(1):.1f}", x2=f"{x(1):.1f}", y1="5", y2=height - 25, stroke="#1f2328",
                     stroke_dasharray="4 3"))
    for i, name in enumerate(sets):
        parts.append(_el("text", name[:20], x=left - 8, y=25 + lane * i, text_anchor="end", font_size="12"))
    for r, ok in points:
        y = 20 + lane * sets.index(r.solution_set)
        tip = f"{r.problem} ({r.solution_set}, {PurePath(r.solution_path).name}): {r.speedup:.3f}x, {'pass' if ok else 'fail'}"
        parts.append(_el("circle", _el("title", tip), cx=f"{x(r.speedup):.1f}", cy=y, r="5",
                         fill=PASS if ok else FAIL, fill_opacity="0.75"))
    svg = _el("svg", *parts, id="speedup-chart", xmlns="http://www.w3.org/2000/svg", width=left + width + 20,
              height=height, role="img", aria_label="speedup per task, log axis")
    return _Markup(svg + left_out) if left_out else svg


def roofline_chart(run: RunResults) -> tuple[_Markup, int]:
    """Achieved bandwidth (bytes that must move / solution median) per task, against the
    device's copy bandwidth that its HBM floor was computed from. Returns (chart, tasks left out)."""
    rows = []
    for r in run.results:
        t = r.timing
        if t and t.bytes_moved and t.floor_ms and 0 < t.sol.median_ms < math.inf:
            rows.append((r, t.bytes_moved / t.sol.median_ms / 1e6, t.bytes_moved / t.floor_ms / 1e6))  # GB/s
    skipped = len(run.results) - len(rows)
    if not rows:
        return _el("p", "No task has bytes_moved and floor_ms (not timed, or no bandwidth measured).", class_="note"), skipped
    top = max(max(a, b) for _, a, b in rows) * 1.15
    left, width, lane = 300, 420, 22
    height = 55 + lane * len(rows)
    x = lambda gbs: left + width * gbs / top  # noqa: E731
    parts = []
    for i, (r, achieved, peak) in enumerate(rows):
        y = 10 + lane * i
        over = achieved > peak  # faster than the copy bandwidth allows: flagged below_roofline
        label = f"{r.problem} ({r.solution_set})"
        parts += [
            _el("text", label if len(label) <= 44 else label[:43] + "\u2026", x=left - 8, y=y + 13, text_anchor="end",
                font_size="12"),
            _el("rect", _el("title", f"{label}: {achieved:.0f} GB/s of {peak:.0f} GB/s"), x=left, y=y + 2,
                width=f"{x(achieved) - left:.1f}", height="14", fill=FAIL if over else "#0969da", fill_opacity="0.75"),
            _el("line", x1=f"{x(peak):.1f}", x2=f"{x(peak):.1f}", y1=y, y2=y + 18, stroke="#1f2328", stroke_width="2"),
            _el("text", f"{achieved / peak:.0%}", x=f"{x(max(achieved, peak)) + 6:.1f}", y=y + 13, font_size="11"),
        ]
    axis_y = 15 + lane * len(rows)
    parts.append(_el("line", x1=left, x2=left + width, y1=axis_y, y2=axis_y, stroke="#59636e"))
    step = 10 ** math.floor(math.log10(top / 2))
    step *= 5 if top / step > 25 else 2 if top / step > 10 else 1
    for k in range(0, int(top / step) + 1):
        parts.append(_el("text", f"{k * step:g}", x=f"{x(k * step):.1f}", y=axis_y + 14, text_anchor="middle",
                         font_size="11"))
    parts.append(_el("text", "achieved GB/s (bar) vs device copy bandwidth (line)", x=left, y=axis_y + 30,
                     font_size="11"))
    return _el("svg", *parts, id="roofline-chart", xmlns="http://www.w3.org/2000/svg", width=left + width + 60,
               height=height, role="img", aria_label="achieved bandwidth per task"), skipped


# ---- page ---------------------------------------------------------------------

def _problem_errors(run: RunResults) -> list:
    rows = report.problem_errors(run)
    if not rows:
        return []
    return [_el("h2", "Problem files that failed"), _el("p", report.PROBLEM_ERRORS_NOTE, class_="note"),
            _table(["problem", "tasks", "error"], [[p, str(n), m] for p, n, m in rows], id_="problem-errors")]


def render(run: RunResults, policy: GatePolicy) -> str:
    info, s = run.run, report.summary(run, policy)
    df = report.table(run, policy)
    fmt = report._fmt  # the number formats of report.md
    gm = f"{fmt(s['geomean_speedup'], '.3f')}x (n={s['geomean_n']})" if s["geomean_speedup"] else "n/a (n=0)"
    roofline, left_out = roofline_chart(run)
    task_rows = [
        [r["problem"], r["solution_set"], PurePath(r["solution_path"]).name, r["status"], r["flags"].replace(";", ", "),
         duration(r["ref_ms"]), duration(r["sol_ms"]), fmt(r["speedup"], ".3f"),
         duration(r["ref_host_ms"]), duration(r["sol_host_ms"]),
         f"{fmt(r['speedup_ci_low'], '.3f')}-{fmt(r['speedup_ci_high'], '.3f')}" if fmt(r["speedup_ci_low"], ".3f") else "",
         r["clock"] if isinstance(r["clock"], str) else "", r["verdict"]]
        for r in df.to_dict("records")
    ]
    failures = []
    for r in run.results:
        if r.status is Status.OK and not r.flags:
            continue
        reasons = verdict(r, policy).reasons
        why = ("fails the gate: " + "; ".join(reasons) if reasons
               else "passes the gate; flags: " + ", ".join(f.value for f in r.flags))
        failures += [_el("h3", f"{r.status.value}: {r.problem} ({r.solution_set})"),
                     _el("p", f"{r.solution_path} \u2014 {why}"), _el("pre", r.message) if r.message else None]
    body = [
        _el("h1", f"kbench report: {info.run_id}"),
        _el("p", f"device {info.device}; precision {info.precision}; torch {info.torch_version}" + (f", CUDA {info.cuda_version}" if info.cuda_version else "")
            + f"; kbench {info.kbench_version}; started {info.started}; "
            + (f"finished {info.finished}" if info.finished else "not finished (interrupted or still running)")),
        _el("h2", "Summary"),
        _table(["status", "tasks"], [[k, str(v)] for k, v in s["counts"].items() if v] + [["total", str(s["tasks"])]],
               id_="status-counts"),
        _table(["metric", "value"], [[f"fast_{p:g}", f"{v:.1%}"] for p, v in s["fast_p"].items()]
               + [["geomean speedup (correct tasks)", gm]], id_="metrics"),
        _el("p", "fast_p: share of all tasks that are correct (ok, and no flag that fails the gate) and more than p "
                 "times faster than the reference.", class_="note"),
        *_problem_errors(run),
        _el("h2", "Speedup per task"),
        speedup_chart(run, policy),
        _el("p", "Log axis; the dashed line is the reference (1x). Green passes the gate, red fails it.", class_="note"),
        _el("h2", "Roofline"),
        roofline,
        _el("p", f"{left_out} of {len(run.results)} tasks not shown: no bytes_moved or floor_ms (not timed, failed "
                 "before timing, or the device bandwidth was not measured).", class_="note") if left_out else None,
        _el("h2", "Results"),
        _table(["problem", "set", "solution", "status", "flags", "ref time", "sol time", "speedup", "ref host", "sol host",
                "95% CI", "clock", "verdict"],
               task_rows, id_="tasks", row_classes=[f"task {r[-1]}" for r in task_rows]),
        _el("h2", "Failures and flags") if failures else None,
        _el("div", *failures, id="failures") if failures else None,
        _el("h2", "Solution files that match no problem") if info.unmatched else None,
        _el("ul", *(_el("li", u) for u in info.unmatched)) if info.unmatched else None,
    ]
    head = _el("head", _Markup('<meta charset="utf-8"/>'), _el("title", f"kbench report: {info.run_id}"),
               _el("style", _Markup(CSS)))
    return "<!DOCTYPE html>\n" + _el("html", head, _el("body", *body), lang="en") + "\n"
