"""What the terminal shows: every task names its solution file, names are never cut
at 80 columns, and times read in the unit that fits."""
import dataclasses
import io

import pytest
from rich.console import Console

from harness.report import console
from harness.report.gate import GatePolicy
from harness.records import RunResults, Status, Task
from harness.report.units import duration
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


def test_eta_is_the_tasks_left_at_the_pace_so_far():
    assert console.eta(None, 0, 10) == "eta ?"  # nothing finished: no pace yet
    assert console.eta(100.0, 2, 10, now=130.0) == "eta 2m00s"  # 15 s a task, 8 left
    assert console.eta(100.0, 9, 10, now=109.0) == "eta 1s"
    assert console.eta(100.0, 10, 10, now=200.0) == "eta 0s"


def test_each_task_line_shows_the_count_and_an_eta(narrow):
    """In a CI log the bar is drawn only at the end: each finished task's line carries them."""
    reporter = console.RichReporter(GatePolicy())
    results = golden_run().results[:3]
    with reporter:
        reporter.build_started(len(results))
        for i, r in enumerate(results):
            task = Task(r.problem, "problems/x.py", r.solution_set, r.solution_path)
            reporter.task_started(task, i, len(results))
            reporter.task_done(r)
    lines = [ln for ln in narrow.getvalue().splitlines() if "level1/" in ln and "ok" in ln or "incorrect" in ln]
    assert lines[0].startswith("1/3 eta ") and lines[1].startswith("2/3 eta ")
    assert "eta" in narrow.getvalue().split("evaluate", 1)[1]  # and the bar has an ETA column


def test_a_fail_in_the_table_says_why_where_the_status_does_not(monkeypatch):
    """--min-speedup and failing flags fail an `ok` task: the verdict cell gives the reason."""
    buf = io.StringIO()
    monkeypatch.setattr(console, "out", Console(file=buf, width=300, highlight=False, color_system=None))
    console.print_results(golden_run(), GatePolicy(min_speedup=2.0))
    rows = {tuple(c.strip() for c in ln.split("│")[1:4]): ln.split("│")[-2].strip()
            for ln in buf.getvalue().splitlines() if ln.startswith("│ level")}
    assert rows["level1/23_Softmax", "gpt", "23_Softmax.py"] == "fail: speedup 0.90x < --min-speedup 2"
    assert rows["level2/1_Conv2d_ReLU_BiasAdd", "gpt", "1_Conv2d_ReLU_BiasAdd.py"] == "fail: flag tampering"
    assert rows["level1/95_CrossEntropyLoss", "gpt", "95_CrossEntropyLoss.py"] == "fail"  # status incorrect says why
    assert rows["level1/100_HingeLoss", "claude", "100_HingeLoss.py"] == "fail: speedup unmeasured < --min-speedup 2"


def test_gate_summary_counts_the_reasons():
    from harness.report.gate import gate, reasons_summary

    summary = reasons_summary(gate(golden_run().results, GatePolicy(min_speedup=2.0)))
    assert summary.startswith("3 speedup below --min-speedup 2, ")  # most common first (1.8x, 0.9x, unmeasured)
    assert "1 incorrect" in summary and "1 build_error" in summary and "1 timeout" in summary
    assert "1 flag tampering" in summary and "1 flag below_roofline" in summary


def test_a_compile_says_when_it_ends_and_a_cached_build_does_not(narrow):
    """On --device cpu no task starts while a compile runs: in a CI log, where the bar is
    drawn only at the end, these lines are all that moves for minutes."""
    from harness.records import BuildResult

    reporter = console.RichReporter(GatePolicy())
    task = Task("level1/1_AddReLU", "problems/x.py", "basic", "solutions/basic/level1/1_AddReLU/cpp_ok.py")
    with reporter:
        reporter.build_started(3)
        reporter.build_done(task, BuildResult(True, None, "", 38.4, False, "/cache/x"))
        reporter.build_done(task, BuildResult(False, Status.BUILD_ERROR, "error: x", 21.0, False, "/cache/y"))
        reporter.build_done(task, BuildResult(True, None, "", 0.0, True, "/cache/z"))  # cached: nothing to say
    lines = [ln for ln in narrow.getvalue().splitlines() if "cpp_ok.py in" in ln]
    assert [ln.split(" ")[0] for ln in lines] == ["built", "build"]
    assert "in 38 s" in lines[0] and lines[1].startswith("build failed: basic/level1/1_AddReLU cpp_ok.py in 21 s")
