"""What the terminal shows: every task names its solution file, names are never cut
at 80 columns, and times read in the unit that fits."""
import dataclasses
import io

import pytest
from rich.console import Console

from harness import console
from harness.gate import GatePolicy
from harness.records import RunResults, Status, Task
from harness.units import duration
from test_report import golden_run

LONG_PROBLEM = "level2/9_Matmul_Subtract_Multiply_ReLU_AvgPool"
LONG_FILE = "verbose_build_error_candidate_3.py"


def long_names_run() -> RunResults:
    run = golden_run()
    first = dataclasses.replace(run.results[0], problem=LONG_PROBLEM, solution_path=f"solutions/claude/level2/x/{LONG_FILE}")
    return RunResults(run.run, (first,) + run.results[1:])


@pytest.fixture
def narrow(monkeypatch):
    """Both consoles as an 80-column terminal."""
    buf = io.StringIO()
    for name in ("out", "err"):
        monkeypatch.setattr(console, name, Console(file=buf, width=80, highlight=False, color_system=None))
    return buf


def test_final_table_at_80_columns_keeps_every_name_whole(narrow):
    run = long_names_run()
    console.print_results(run, GatePolicy())
    text = narrow.getvalue()
    assert "…" not in text and "..." not in text
    assert LONG_PROBLEM in text and LONG_FILE in text
    for r in run.results:
        line = next(ln for ln in text.splitlines() if r.problem in ln and r.solution_set in ln
                    and r.solution_path.rsplit("/", 1)[1] in ln)  # problem, set and file on one row
        assert line
    assert "below_roofline" in text  # flags whole too
    assert "5.00 us" in text and "12.50 us" in text and "8.640 ms" in text  # the golden run's 5 us kernel


def test_task_lines_name_the_solution_file(narrow):
    reporter = console.RichReporter(GatePolicy())
    r = long_names_run().results[0]
    task = Task(r.problem, "problems/x.py", r.solution_set, r.solution_path)
    with reporter:
        reporter.build_started(1)
        reporter.build_done(task, None)
        reporter.task_started(task, 0, 1)
        reporter.task_done(r)
    text = narrow.getvalue().replace("\n", "")
    assert LONG_FILE in text and LONG_PROBLEM in text


@pytest.mark.parametrize("ms, text", [
    (0.005, "5.00 us"), (0.00042, "0.42 us"), (0.158, "158.00 us"), (1.0, "1.000 ms"), (8.64, "8.640 ms"),
    (12345.0, "12.345 s"), (None, ""), (float("nan"), ""), (float("inf"), "inf"),
])
def test_duration_in_the_unit_that_fits(ms, text):
    assert duration(ms) == text


def test_a_problem_that_failed_reads_as_the_problems(narrow):
    from test_report import problem_error

    reporter = console.RichReporter(GatePolicy())
    r = problem_error("solutions/m/level1/98_KLDivLoss.py")
    task = Task(r.problem, "problems/level1/98_KLDivLoss.py", r.solution_set, r.solution_path)
    with reporter:
        reporter.build_started(1)
        reporter.task_done(r)
    text = narrow.getvalue().replace("\n", "")
    assert "problem_error level1/98_KLDivLoss" in text and "problem file problems/level1/98_KLDivLoss.py, line 21" in text
    assert console._STYLE[r.status] != console._STYLE.get(Status.RUNTIME_ERROR, "red")  # set apart from the solutions'
