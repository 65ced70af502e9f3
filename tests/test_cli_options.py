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
    from harness import pipeline

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
