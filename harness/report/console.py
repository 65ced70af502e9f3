"""The one place that prints: progress and messages on stderr, tables on stdout."""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path, PurePath

from rich.console import Console
from rich.markup import escape
from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn,
                           TimeRemainingColumn)
from rich.table import Table

from ..discover.folders import Discovery
from .gate import GatePolicy, verdict
from ..records import BuildResult, RunResults, Status, Task, TaskResult
from .units import duration

# Outside a terminal (CI logs, pipes) rich would wrap at 80 columns; tables and
# messages read better whole. An explicit COLUMNS is obeyed everywhere.
_WIDTH = None if os.environ.get("COLUMNS") else 200
err = Console(stderr=True, highlight=False, width=None if sys.stderr.isatty() else _WIDTH)
out = Console(highlight=False, width=None if sys.stdout.isatty() else _WIDTH)

_STYLE = {Status.OK: "green", Status.SKIPPED: "yellow", Status.PROBLEM_ERROR: "magenta"}  # magenta: not the solution's


def error(text: str) -> None:
    err.print(f"[bold red]error:[/] {escape(text)}", soft_wrap=True)


def note(text: str) -> None:
    err.print(f"[dim]{escape(text)}[/]", soft_wrap=True)


def warning(text: str) -> None:
    err.print(f"[yellow]warning:[/] {escape(text)}", soft_wrap=True)


class RichReporter:
    """Draws the pipeline's progress: a build bar, then a task bar with a line per task."""

    def __init__(self, policy: GatePolicy):
        self.policy = policy
        self.progress = Progress(
            TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
            TextColumn("eta"), TimeRemainingColumn(), TextColumn("[dim]{task.fields[current]}"), console=err,
            transient=False,
        )
        self.build_bar = self.eval_bar = None
        self.out_dir: Path | None = None  # the run folder, once the pipeline has made it (for the Ctrl-C line)
        self.total = self.finished = 0
        self.first_start: float | None = None

    def run_folder(self, path: Path) -> None:
        self.out_dir = path

    def devices(self, text: str) -> None:
        err.print(escape(text))  # the run's first line: which GPUs, before the bars start

    def __enter__(self):
        return self  # the bars start with the first build: an early error prints one clean line

    def __exit__(self, *exc):
        if self.progress.live.is_started:
            self.progress.stop()

    def discovered(self, discovery: Discovery, todo: int, reused: int) -> None:
        sets = ", ".join(discovery.sets) or "-"
        msg = f"{len(discovery.tasks)} tasks: {len(discovery.problems)} problems x sets [{sets}]"
        if reused:
            msg += f"; {reused} reused from the earlier run, {todo} to run"
        err.print(escape(msg))
        for u in discovery.unmatched:
            err.print(f"[yellow]unmatched:[/] {escape(u.path)}: {escape(u.reason)}")

    def build_started(self, count: int) -> None:
        self.total = count
        self.progress.start()
        # Both bars from the start: a task is judged as soon as its own build is done.
        self.build_bar = self.progress.add_task("build", total=count, current="")
        self.eval_bar = self.progress.add_task("evaluate", total=count, current="")

    def build_done(self, task: Task, result: BuildResult) -> None:
        self.progress.advance(self.build_bar)
        self.progress.update(self.build_bar, current=_task_name(task))
        if result is not None and not result.cached and result.seconds >= 1:
            # A compile takes tens of seconds, and on --device cpu no task starts while one
            # runs: without these lines a CI log (no live bar) is silent for minutes.
            done = "built" if result.ok else "build failed:"
            self.progress.console.print(f"[dim]{done} {escape(_task_name(task))} in {result.seconds:.0f} s[/]")

    def task_started(self, task: Task, index: int, total: int) -> None:
        if self.first_start is None:
            self.first_start = time.monotonic()
        self.progress.update(self.eval_bar, current=_task_name(task))

    def task_done(self, r: TaskResult) -> None:
        self.progress.advance(self.eval_bar)
        self.finished += 1
        style = _STYLE.get(r.status, "red")
        speed = f" {r.speedup:.2f}x" if r.speedup is not None else ""
        flags = f" [{', '.join(f.value for f in r.flags)}]" if r.flags else ""
        msg = f": {r.message}" if r.message and r.status is not Status.OK else ""
        if r.sandbox is None and r.status in (Status.OK, Status.INCORRECT, Status.RUNTIME_ERROR):
            flags += " [unconfined]"  # its candidate ran where Landlock was not (the run's first lines say so)
        # The count and ETA on every line as well as on the bar: in a CI log (no terminal) the bar
        # is drawn only at the end, and these lines are all there is.
        self.progress.console.print(
            f"[dim]{self.finished:>{len(str(self.total))}}/{self.total} {eta(self.first_start, self.finished, self.total)}[/] "
            f"[{style}]{r.status.value:>13}[/] {escape(r.problem)} [dim]{escape(r.solution_set)}[/] "
            f"{escape(PurePath(r.solution_path).name)}{speed}{escape(flags)}{escape(msg[:300])}"
        )

    def note(self, text: str) -> None:
        self.progress.console.print(f"[yellow]{escape(text)}[/]")


def eta(started: float | None, done: int, total: int, now: float | None = None) -> str:
    """'eta 3m10s': the tasks left at the mean pace of those finished since the first began
    (builds that run beside the tasks are in that pace)."""
    if started is None or done == 0:
        return "eta ?"
    left = (total - done) * ((now if now is not None else time.monotonic()) - started) / done
    if left <= 0:
        return "eta 0s"
    minutes, seconds = divmod(round(left), 60)
    return f"eta {minutes}m{seconds:02d}s" if minutes else f"eta {seconds}s"


def _task_name(task: Task) -> str:
    return f"{task.solution_set}/{task.problem} {PurePath(task.solution_path).name}"


def _name_column(t: Table, name: str, cells) -> None:
    """A column whose cells are names a reader greps for: never cut to 'level1/...' or
    folded; the table grows past the terminal's width instead (see _print_table)."""
    t.add_column(name, no_wrap=True, min_width=max([len(name)] + [len(c) for c in cells]))


def _print_table(console: Console, t: Table) -> None:
    """Print at the console's width, or wider when the columns' minimum widths need it
    (the terminal wraps the lines): rich would otherwise shrink every column, names
    included, to fit."""
    need = sum(c.min_width or 1 for c in t.columns) + 3 * len(t.columns) + 1  # "│ " and " " per column, "│"
    if console.width >= need:
        console.print(t)
        return
    wide = Console(file=console.file, width=need, highlight=False, color_system=console.color_system,
                   force_terminal=console.is_terminal, no_color=console.no_color)
    wide.print(t)


def print_results(run: RunResults, policy: GatePolicy) -> None:
    at = f" at {run.run.precision}" if run.run.precision != "fp32" else ""  # --precision, when not the default
    t = Table(title=f"kbench {run.run.run_id} on {run.run.device}{at}", title_justify="left")
    _name_column(t, "problem", [r.problem for r in run.results])
    _name_column(t, "set", [r.solution_set for r in run.results])
    _name_column(t, "solution", [PurePath(r.solution_path).name for r in run.results])
    longest_flag = max([len(f.value) for r in run.results for f in r.flags], default=5)
    for col, just, least in (("status", "left", 13), ("flags", "left", longest_flag), ("ref", "right", 9),
                             ("sol", "right", 9), ("speedup", "right", 8), ("verdict", "left", 7)):
        t.add_column(col, justify=just, min_width=least)  # wraps between flags, never inside a word or a time
    for r in run.results:
        v = verdict(r, policy)
        style = _STYLE.get(r.status, "red")
        t.add_row(
            escape(r.problem), escape(r.solution_set), escape(PurePath(r.solution_path).name),
            f"[{style}]{r.status.value}[/]", ", ".join(f.value for f in r.flags),
            duration(r.ref_ms), duration(r.sol_ms), f"{r.speedup:.3f}x" if r.speedup is not None else "",
            "[green]pass[/]" if v.passed else f"[red]fail[/]{escape(_why(r, v.reasons))}",
        )
    _print_table(out, t)


def _why(r: TaskResult, reasons: tuple[str, ...]) -> str:
    """The gate's reasons beside 'fail' that the row does not already show: a failing
    flag or a missed --min-speedup ('ok' in the status column is no reason to fail)."""
    extra = [x for x in reasons if x != r.status.value]
    return f": {'; '.join(extra)}" if extra else ""


def print_discovery(found: Discovery, facts: dict, cached: int = 0) -> None:
    """The problems with their facts (discover.facts.facts_of_files: by problem path, a
    ProblemFacts or a line saying why there is none), the sets and unmatched files."""
    per_problem: dict[str, list[str]] = {}
    for t in found.tasks:
        per_problem.setdefault(t.problem, []).append(t.solution_set)
    t = Table(title=f"{len(found.problems)} problems", title_justify="left")
    _name_column(t, "problem", [p.name for p in found.problems])
    for col, just in (("inputs", "left"), ("outputs", "left"), ("in GB", "right"),
                      ("out GB", "right"), ("GFLOP (mm/conv)", "right"), ("solutions", "right"), ("sets", "left")):
        t.add_column(col, justify=just)
    for p in found.problems:
        sets = per_problem.get(p.name, [])
        shape = facts[p.path]
        if isinstance(shape, str):
            style = "yellow" if shape.startswith("needs ") else "red"
            cells = [f"[{style}]{escape(shape[:80])}[/]", "", "", "", ""]
        else:
            flops = "?" if shape.flops is None else f"{shape.flops / 1e9:.1f}"
            cells = [", ".join(shape.inputs), ", ".join(shape.outputs), f"{shape.input_bytes / 1e9:.3f}",
                     f"{shape.output_bytes / 1e9:.3f}", flops]
        t.add_row(escape(p.name), *cells, str(len(sets)), ", ".join(sorted(set(sets))))
    _print_table(out, t)
    if found.problems:
        note(f"problem facts: {cached} of {len(found.problems)} from the cache")
    s = Table(title=f"{len(found.sets)} solution sets, {len(found.tasks)} tasks", title_justify="left")
    s.add_column("set")
    s.add_column("solutions", justify="right")
    for name in found.sets:
        s.add_row(name, str(sum(1 for x in found.tasks if x.solution_set == name)))
    out.print(s)
    if found.unmatched:
        u = Table(title=f"{len(found.unmatched)} solution files match no problem", title_justify="left")
        u.add_column("file")
        u.add_column("why")
        for x in found.unmatched:
            u.add_row(x.path, x.reason)
        out.print(u)
