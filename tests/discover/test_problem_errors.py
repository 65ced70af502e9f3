"""A bug in a problem file is the problem's: the task is problem_error, its message names
the problem file (and the line) and says what to fix, JUnit calls it an <error> (the
solution never ran), and a solution's own errors stay the solution's. End to end on
the CPU, over fixture problems that fail in each place the judge runs the problem's code."""
import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from conftest import ROOT
from expect import mismatches

FIXTURES = ROOT / "tests" / "fixtures" / "problem_errors"
PROBLEMS, SOLUTIONS = FIXTURES / "problems", FIXTURES / "solutions"


@pytest.fixture(scope="module")
def broken_run(run_cli, tmp_path_factory):
    out = tmp_path_factory.mktemp("run") / "r"
    proc = run_cli("run", "--problems", str(PROBLEMS), "--solutions", str(SOLUTIONS), "--out", str(out),
                   "--device", "cpu", "--timeout", "60", "--no-timing", "--junit", str(out / "junit.xml"))
    return proc, out, json.loads((out / "results.json").read_text())["results"]


def test_each_task_gets_its_verdict(broken_run):
    proc, _, results = broken_run
    assert len(results) == 7, proc.stderr[-3000:]
    assert mismatches(results) == []  # problem_error for the 5 broken problems; the solutions' own errors stay theirs


@pytest.mark.parametrize("problem,what,line_of", [
    ("1_GetInputsRaises", "get_inputs() raised ValueError: no inputs of size", "raise ValueError"),
    ("2_InitRaises", "get_init_inputs() raised ZeroDivisionError", "1.0 / 0"),
    ("3_ForwardRaises", "the reference Model's forward raised IndexError", "dim=2"),
    ("4_ImportFails", "importing it failed: SyntaxError", "def forward(self, x)"),
    ("5_CheckInputsRaise", "get_check_inputs() raised RuntimeError", ".reshape(256, 1024)"),
])
def test_message_names_the_problem_file_its_line_and_the_fix(broken_run, problem, what, line_of):
    _, _, results = broken_run
    r = next(r for r in results if r["problem"] == f"level1/{problem}")
    path = PROBLEMS / "level1" / f"{problem}.py"
    line = next(i for i, text in enumerate(path.read_text().splitlines(), 1) if line_of in text)
    assert r["status"] == "problem_error"
    assert r["message"].startswith(f"problem file {path}, line {line}: {what}"), r["message"]
    assert r["message"].endswith("; fix the problem file (the solution was not judged)")
    assert "\n" not in r["message"]
    assert "Traceback" in Path(r["log_path"]).read_text()  # the whole traceback is in the task's log


def test_junit_reports_the_problems_as_errors_and_the_solutions_as_failures(broken_run):
    _, out, _ = broken_run
    root = ET.fromstring((out / "junit.xml").read_text())
    errors = {c.get("name").split("/")[1] for c in root.iter("testcase") if c.find("error") is not None}
    failures = {c.get("name").split("/", 2)[2] for c in root.iter("testcase") if c.find("failure") is not None}
    assert errors == {"1_GetInputsRaises", "2_InitRaises", "3_ForwardRaises", "4_ImportFails", "5_CheckInputsRaise"}
    assert failures == {"forward_raises.py", "init_raises.py"}
    assert (root.get("errors"), root.get("failures")) == ("5", "2")


def test_report_console_and_gate_name_the_problems(broken_run):
    proc, out, _ = broken_run
    assert proc.returncode == 1  # nothing was shown to pass: the gate fails
    assert "gate: 7 of 7 tasks failed" in proc.stderr
    assert "problem_error level1/1_GetInputsRaises" in proc.stderr  # the line printed as the task ends
    md = (out / "report.md").read_text()
    assert "| problem_error | 5 |" in md and "## Problem files that failed" in md


def test_a_cuda_error_in_the_problems_code_is_not_blamed_on_the_problem_alone():
    """The candidate shares the GPU: a CUDA error in the reference may be a fault it left
    behind. It stays runtime_error (the executor then checks the GPU), naming the problem file."""
    from harness.judge.task import ProblemFailed
    from harness.records import Status

    plain = ProblemFailed("problems/level1/1_A.py", "the reference Model's forward raised", ValueError("bad dim"))
    assert plain.status is Status.PROBLEM_ERROR
    assert plain.message == ("problem file problems/level1/1_A.py: the reference Model's forward raised ValueError: "
                             "bad dim; fix the problem file (the solution was not judged)")
    cuda = ProblemFailed("problems/level1/1_A.py", "the reference Model's forward raised",
                         RuntimeError("CUDA error: an illegal memory access was encountered"))
    assert cuda.status is Status.RUNTIME_ERROR
    assert cuda.message.startswith("problem file problems/level1/1_A.py: the reference Model's forward raised "
                                   "RuntimeError: CUDA error: an illegal memory access was encountered; a CUDA error")
