"""JUnit XML: one testcase per task, a failure or error where the gate's verdict fails,
<skipped> for a skipped task; from `kbench report --format junit` and `kbench run --junit PATH`."""
import xml.etree.ElementTree as ET

import pytest
from click.testing import CliRunner

import cli
from harness.report import junit, write as report
from harness.report.gate import GatePolicy, gate
from harness.records import RunResults, Status, TaskResult
from test_report import check_golden, golden_run

COMPILER = 'kernel.cu(3): error: expected a ";" <near> `x & y` \x1b[1m\x00'
PROBLEM_BUG = ("problem file problems/level1/98_KLDivLoss.py, line 21: get_inputs() raised ValueError: bad shape; "
               "fix the problem file (the solution was not judged)")


def junit_run() -> RunResults:
    """The report's golden run, a skipped task, a compiler message XML cannot hold as is, and a
    task whose problem file failed."""
    base = golden_run()
    extra = (
        TaskResult(problem="level1/23_Softmax", solution_set="gpt", solution_path="solutions/gpt/level1/23_Softmax/b.py",
                   status=Status.SKIPPED, message="CUDA solution on a --device cpu run", phase="build"),
        TaskResult(problem="level1/23_Softmax", solution_set="gpt", solution_path="solutions/gpt/level1/23_Softmax/c.py",
                   status=Status.BUILD_ERROR, message=COMPILER, phase="build", seconds=12.5),
        TaskResult(problem="level1/98_KLDivLoss", solution_set="claude",
                   solution_path="solutions/claude/level1/98_KLDivLoss.py", status=Status.PROBLEM_ERROR,
                   message=PROBLEM_BUG, phase="check", seconds=4.0),
    )
    return RunResults(base.run, base.results + extra)


def cases(xml: str) -> dict[str, ET.Element]:
    root = ET.fromstring(xml)
    return {f"{c.get('classname')}::{c.get('name')}": c for c in root.iter("testcase")}


def test_golden():
    check_golden("junit.xml", junit.render(junit_run(), GatePolicy()))


def test_one_testcase_per_task_named_by_set_problem_and_file():
    got = cases(junit.render(junit_run(), GatePolicy()))
    assert len(got) == len(junit_run().results) == 11
    assert "claude::level1/23_Softmax/23_Softmax.py" in got
    assert {"gpt::level1/23_Softmax/b.py", "gpt::level1/23_Softmax/c.py"} <= set(got)  # candidates stay apart
    assert got["claude::level1/23_Softmax/23_Softmax.py"].get("time") == "21.456"


def test_failures_follow_the_gate_verdict():
    got = cases(junit.render(junit_run(), GatePolicy()))
    failed = {k for k, c in got.items() if c.find("failure") is not None}
    assert failed == {
        "claude::level1/95_CrossEntropyLoss/95_CrossEntropyLoss.py",  # ok, but below_roofline fails the gate
        "gpt::level1/95_CrossEntropyLoss/95_CrossEntropyLoss.py", "gpt::level1/98_KLDivLoss/98_KLDivLoss.py",
        "gpt::level1/100_HingeLoss/100_HingeLoss.py", "gpt::level2/1_Conv2d_ReLU_BiasAdd/1_Conv2d_ReLU_BiasAdd.py",
        "gpt::level1/23_Softmax/c.py",  # b.py was skipped: <skipped>, not a failure
    }
    incorrect = got["gpt::level1/95_CrossEntropyLoss/95_CrossEntropyLoss.py"].find("failure")
    assert incorrect.get("type") == "incorrect" and incorrect.text == "output shape [1] vs reference [] | trial 1"
    assert got["claude::level1/95_CrossEntropyLoss/95_CrossEntropyLoss.py"].find("failure").get("message") == \
        "flag below_roofline"
    relaxed = cases(junit.render(junit_run(), GatePolicy(fail_flags=frozenset())))
    assert relaxed["claude::level1/95_CrossEntropyLoss/95_CrossEntropyLoss.py"].find("failure") is None


def test_skipped_task_is_skipped_with_its_reason():
    """A skipped task did not run: a dashboard lists it as skipped, with why, not among the failures."""
    case = cases(junit.render(junit_run(), GatePolicy()))["gpt::level1/23_Softmax/b.py"]
    assert case.find("failure") is None and case.find("error") is None
    assert case.find("skipped").get("message") == "CUDA solution on a --device cpu run"


@pytest.mark.parametrize("policy", [GatePolicy(), GatePolicy(fail_flags=frozenset()), GatePolicy(min_speedup=1.0)])
def test_junit_failures_errors_and_skips_are_exactly_the_gates(policy):
    """Every task the gate fails is a failure or an error, or skipped (which the gate fails too)."""
    run = junit_run()
    root = ET.fromstring(junit.render(run, policy))
    failed = {c.get("file") for c in root.iter("testcase")
              if any(c.find(tag) is not None for tag in ("failure", "error", "skipped"))}
    assert failed == {key for key, _ in gate(run.results, policy).failed}
    counted = int(root.get("failures")) + int(root.get("errors")) + int(root.get("skipped"))
    assert counted == len(gate(run.results, policy).failed)


def test_a_problem_file_that_failed_is_an_error_not_the_solutions_failure():
    """JUnit's <error> is a test that could not run; <failure> one that ran and failed."""
    case = cases(junit.render(junit_run(), GatePolicy()))["claude::level1/98_KLDivLoss/98_KLDivLoss.py"]
    assert case.find("failure") is None
    error = case.find("error")
    assert error.get("type") == "problem_error" and error.text == PROBLEM_BUG
    assert error.get("message").startswith("problem_error: problem file problems/level1/98_KLDivLoss.py, line 21: ")
    root = ET.fromstring(junit.render(junit_run(), GatePolicy()))
    claude = next(s for s in root.findall("testsuite") if s.get("name") == "claude")
    assert (claude.get("failures"), claude.get("errors")) == ("1", "1")
    assert (root.get("failures"), root.get("errors")) == ("6", "1")


def test_all_skipped_cpu_run_counts_skipped_and_still_fails_the_gate():
    run = RunResults(golden_run().run, tuple(
        TaskResult(problem="level1/23_Softmax", solution_set="cuda", solution_path=f"solutions/cuda/level1/{i}.py",
                   status=Status.SKIPPED, message="the solution builds CUDA code; this is a --device cpu run")
        for i in range(4)))
    root = ET.fromstring(junit.render(run, GatePolicy()))
    assert gate(run.results, GatePolicy()).exit_code == 1
    assert (root.get("tests"), root.get("failures"), root.get("skipped")) == ("4", "0", "4")
    assert len(root.findall(".//testcase/skipped")) == 4


def test_suite_counts_add_up():
    root = ET.fromstring(junit.render(junit_run(), GatePolicy()))
    suites = {s.get("name"): s for s in root.findall("testsuite")}
    assert list(suites) == ["claude", "gpt"]
    assert (suites["gpt"].get("tests"), suites["gpt"].get("failures"), suites["gpt"].get("skipped")) == ("7", "5", "1")
    assert (root.get("tests"), root.get("failures"), root.get("errors"), root.get("skipped")) == ("11", "6", "1", "1")


def test_messages_survive_markup_and_control_characters():
    case = cases(junit.render(junit_run(), GatePolicy()))["gpt::level1/23_Softmax/c.py"]
    assert case.find("failure").text == COMPILER.replace("\x1b", "\\x1b").replace("\x00", "\\x00")


def test_report_format_junit(tmp_path):
    src = tmp_path / "results.json"
    report.write_json(junit_run(), src)
    res = CliRunner().invoke(cli.main, ["report", str(src), "--format", "junit"])
    assert res.exit_code == 0, res.output
    assert res.stdout == junit.render(junit_run(), GatePolicy())
    out = tmp_path / "junit.xml"
    res = CliRunner().invoke(cli.main, ["report", str(src), "--format", "junit", "--out", str(out)])
    assert res.exit_code == 0 and res.stdout == "" and out.read_text() == junit.render(junit_run(), GatePolicy())


def test_run_junit_writes_the_file_with_the_runs_policy(tmp_path, monkeypatch):
    """`kbench run --junit PATH` with the pipeline replaced: only the CLI's part is under test.
    The pipeline writes the file with results.json (tests/report/test_store.py: also when cut short)."""
    from harness.run import pipeline

    def fake_run(cfg, reporter):
        pipeline._write_reports(junit_run(), tmp_path / "run", cfg)
        return junit_run(), tmp_path / "run"

    monkeypatch.setattr(pipeline, "run", fake_run)
    path = tmp_path / "ci" / "junit.xml"
    path.parent.mkdir()
    res = CliRunner().invoke(cli.main, ["run", "--junit", str(path), "--fail-on", "none"])
    assert res.exit_code == 1, res.output  # the gate still decides the exit code
    assert path.read_text() == junit.render(junit_run(), GatePolicy(fail_flags=frozenset()))
    assert f"wrote {path}" in res.stderr
    assert "claude::level1/95_CrossEntropyLoss/95_CrossEntropyLoss.py" not in {
        k for k, c in cases(path.read_text()).items() if c.find("failure") is not None}  # --fail-on none applied
