"""Bad option values are refused before anything runs: one line on stderr naming the
option (and for --out the path and what to do), exit code 2, no traceback."""
import os
import stat

import pytest
from click.testing import CliRunner

import cli
from conftest import ROOT

FIXTURES = ROOT / "tests" / "fixtures" / "cpu"
FOLDERS = ["--problems", str(FIXTURES / "problems"), "--solutions", str(FIXTURES / "solutions"), "--device", "cpu"]


def run(*args: str):
    return CliRunner().invoke(cli.main, ["run", *FOLDERS, *args])


def one_line(res) -> str:
    assert res.exit_code == 2, res.output
    assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    assert "Traceback" not in res.output and "Usage:" not in res.output
    return lines[0]


@pytest.mark.parametrize("option, value", [
    ("--timeout", "0"), ("--timeout", "-5"), ("--time-budget", "0"), ("--time-budget", "-1"),
    ("--time-budget", "nan"), ("--time-budget", "inf"), ("--build-timeout", "0"), ("--timeout", "soon"),
])
def test_bad_seconds_are_one_line_usage_errors(option, value):
    line = one_line(run(option, value))
    assert option in line and value in line and "seconds" in line


@pytest.mark.parametrize("value", ["fp8", "float16", "FP16", ""])
def test_bad_precision_is_a_one_line_usage_error(value):
    line = one_line(run("--precision", value))
    assert "--precision" in line and "fp32" in line and "fp16" in line and "bf16" in line


def test_out_on_an_existing_file(tmp_path):
    f = tmp_path / "results.txt"
    f.write_text("mine")
    line = one_line(run("--out", str(f)))
    assert str(f) in line and "is a file" in line and "pass a new folder" in line
    assert f.read_text() == "mine"


def test_out_below_a_file(tmp_path):
    f = tmp_path / "results.txt"
    f.write_text("mine")
    line = one_line(run("--out", str(f / "run1")))
    assert str(f) in line and "is a file" in line


def test_out_where_nothing_can_be_written():
    line = one_line(run("--out", "/proc/kbench-results"))  # read-only even for root
    assert "/proc/kbench-results" in line and "cannot write" in line and "pass a folder you can write" in line


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_out_in_a_read_only_folder(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(stat.S_IRUSR | stat.S_IXUSR)
    try:
        line = one_line(run("--out", str(ro / "run1")))
        assert str(ro / "run1") in line and "cannot write" in line
    finally:
        ro.chmod(stat.S_IRWXU)


def test_good_values_pass_the_checks(monkeypatch, tmp_path):
    """Valid values reach the pipeline unchanged (stopped there: nothing runs)."""
    from harness.run import pipeline

    seen = {}

    def fake_run(cfg, reporter):
        seen["cfg"] = cfg
        raise cli.UserError("stop here")

    monkeypatch.setattr(pipeline, "run", fake_run)
    res = run("--timeout", "0.5", "--time-budget", "2", "--build-timeout", "60", "--out", str(tmp_path / "new" / "r"),
              "--precision", "bf16")
    assert "stop here" in one_line(res)
    cfg = seen["cfg"]
    assert (cfg.options.timeout, cfg.options.timing.budget_s, cfg.options.build_timeout) == (0.5, 2.0, 60.0)
    assert cfg.options.precision == "bf16" and cfg.options_record()["precision"] == "bf16"
    assert cfg.out_dir == tmp_path / "new" / "r" and not (tmp_path / "new").exists()  # nothing created by the check


@pytest.fixture
def no_task_runs(monkeypatch):
    """Usage errors must be found before any build or task: reaching one fails the test."""
    from harness.run import pipeline

    def refuse(*args, **kwargs):
        raise AssertionError("a task ran before the usage error was found")

    monkeypatch.setattr(pipeline, "_run_tasks", refuse)


@pytest.mark.parametrize("value", ["-1", "0", "two"])
def test_build_jobs_below_one_is_a_usage_error(value, no_task_runs):
    """-1 used to abort the run with SIGABRT after discovery; 0 was taken as the default."""
    line = one_line(run("--build-jobs", value))
    assert "--build-jobs" in line and "at least 1" in line and value in line


@pytest.mark.parametrize("value", ["nan", "inf", "0", "-1"])
def test_min_speedup_must_be_a_positive_finite_number(value, no_task_runs):
    """nan compares false with every speedup: the check would be off without a word."""
    line = one_line(run("--min-speedup", value))
    assert "--min-speedup" in line and value in line and "finite number above 0" in line


def test_min_speedup_without_timing_is_refused(no_task_runs):
    """Every ok task would fail the gate as 'unmeasured'."""
    line = one_line(run("--min-speedup", "0.5", "--no-timing"))
    assert "--min-speedup 0.5" in line and "--no-timing" in line and "drop one" in line


@pytest.mark.parametrize("value", ["nan", "-0.1", "inf"])
def test_compare_threshold_must_be_finite(value, tmp_path):
    from harness.report import write as report
    from test_report import golden_run

    report.write_json(golden_run(), tmp_path / "results.json")
    res = CliRunner().invoke(cli.main, ["compare", str(tmp_path / "results.json"), str(tmp_path / "results.json"),
                                        "--threshold", value])
    line = one_line(res)
    assert "--threshold" in line and value in line and "at least 0" in line


def test_junit_into_a_missing_folder_creates_nothing(tmp_path, no_task_runs):
    target = tmp_path / "nonexistent" / "dir" / "x.xml"
    line = one_line(run("--junit", str(target)))
    assert str(target) in line and "does not exist" in line and "create it first" in line
    assert not (tmp_path / "nonexistent").exists()


def test_junit_where_nothing_can_be_written(no_task_runs):
    line = one_line(run("--junit", "/proc/kbench-junit.xml"))
    assert "--junit /proc/kbench-junit.xml" in line and "cannot write" in line


def test_junit_inside_the_run_folder_it_creates_is_fine(monkeypatch, tmp_path):
    """CI writes --junit into the --out folder the run is about to make."""
    from harness.run import pipeline

    seen = {}

    def fake_run(cfg, reporter):
        seen["cfg"] = cfg
        raise cli.UserError("stop here")

    monkeypatch.setattr(pipeline, "run", fake_run)
    out = tmp_path / "r"
    assert "stop here" in one_line(run("--out", str(out), "--junit", str(out / "junit.xml")))
    assert seen["cfg"].junit_path == out / "junit.xml" and not out.exists()


def test_report_out_into_a_missing_folder_creates_nothing(tmp_path):
    from harness.report import write as report
    from test_report import golden_run

    report.write_json(golden_run(), tmp_path / "results.json")
    target = tmp_path / "nonexistent" / "report.md"
    line = one_line(CliRunner().invoke(cli.main, ["report", str(tmp_path / "results.json"), "--out", str(target)]))
    assert str(target) in line and "does not exist" in line
    assert not target.parent.exists()
    line = one_line(CliRunner().invoke(cli.main, ["report", str(tmp_path / "results.json"), "--out",
                                                  "/proc/kbench-report.md"]))
    assert "cannot write" in line


@pytest.mark.parametrize("marker", ["results.jsonl", "results.json"])
def test_out_on_an_earlier_run_is_refused_and_left_alone(tmp_path, marker, no_task_runs):
    """Reusing an earlier run's --out without --resume replaced its results."""
    earlier = tmp_path / "r"
    earlier.mkdir()
    (earlier / marker).write_text("earlier\n")
    line = one_line(run("--out", str(earlier)))
    assert f"--resume {earlier}" in line and "new folder" in line
    assert (earlier / marker).read_text() == "earlier\n" and sorted(p.name for p in earlier.iterdir()) == [marker]


def test_out_beside_resume_is_refused(tmp_path, no_task_runs):
    line = one_line(run("--out", str(tmp_path / "a"), "--resume", str(tmp_path / "b")))
    assert "--resume" in line and "drop --out" in line


def test_problem_filter_that_matches_nothing_lists_what_exists(no_task_runs):
    line = one_line(run("-p", "NoSuchThing"))
    assert "-p NoSuchThing matched none of the" in line and "level1/2_Hinge" in line


def test_set_filter_that_matches_nothing_lists_the_sets(no_task_runs):
    line = one_line(run("-s", "nosuchset"))
    assert "-s nosuchset matched none of the solution sets" in line and "basic" in line


def test_problems_given_a_file(no_task_runs):
    problem = next((FIXTURES / "problems" / "level1").glob("*.py"))
    res = CliRunner().invoke(cli.main, ["run", "--problems", str(problem), "--solutions",
                                        str(FIXTURES / "solutions"), "--device", "cpu"])
    line = one_line(res)
    assert str(problem) in line and "is a file, not a folder" in line and "<level>/<name>.py" in line


def test_solution_file_that_makes_no_task_is_named(tmp_path, no_task_runs):
    line = one_line(run("--solution", str(tmp_path / "missing.py")))
    assert "--solution" in line and "no such file" in line
    stray = tmp_path / "mine.py"
    stray.write_text("")
    line = one_line(run("--solution", str(stray)))
    assert f"--solution {stray} is not under --solutions" in line
    orphan = next((FIXTURES / "solutions" / "orphans").rglob("*.py"))
    line = one_line(run("--solution", str(orphan)))
    assert "matches no problem" in line
