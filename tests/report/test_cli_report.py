"""`kbench report`: re-render a saved run to stdout, as md, csv or json."""
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

import cli
from harness.report import write as report
from harness.report.gate import GatePolicy
from harness.records import results_from_json
from test_report import GOLDEN, golden_run


@pytest.fixture
def results_json(tmp_path) -> Path:
    path = tmp_path / "run" / "results.json"
    report.write_json(golden_run(), path)
    return path


def invoke(*args: str):
    return CliRunner().invoke(cli.main, ["report", *args])


def test_md_is_the_report(results_json):
    res = invoke(str(results_json))  # md is the default
    assert res.exit_code == 0, res.output
    assert res.stdout.rstrip("\n") == report.render_markdown(golden_run(), GatePolicy()).rstrip("\n")
    assert invoke(str(results_json), "--format", "md").stdout == res.stdout


def test_md_matches_the_golden_file(results_json):
    res = invoke(str(results_json), "--format", "md")
    assert res.stdout.rstrip("\n") == (GOLDEN / "report.md").read_text().rstrip("\n")


def test_csv_matches_the_golden_file(results_json):
    res = invoke(str(results_json), "--format", "csv")
    assert res.exit_code == 0, res.output
    assert res.stdout == (GOLDEN / "results.csv").read_text()


def test_json_reads_back_as_the_same_run(results_json):
    res = invoke(str(results_json), "--format", "json")
    assert res.exit_code == 0, res.output
    assert results_from_json(json.loads(res.stdout)) == golden_run()


def test_run_folder_works_as_well_as_the_file(results_json):
    assert invoke(str(results_json.parent), "--format", "csv").stdout == invoke(str(results_json), "--format", "csv").stdout


def test_fail_on_changes_the_verdicts(results_json):
    default = invoke(str(results_json), "--format", "csv").stdout
    relaxed = invoke(str(results_json), "--format", "csv", "--fail-on", "none").stdout
    row = next(line for line in relaxed.splitlines() if "claude/level1/95_CrossEntropyLoss" in line)
    assert ",ok,pass,below_roofline," in row
    row = next(line for line in default.splitlines() if "claude/level1/95_CrossEntropyLoss" in line)
    assert ",ok,fail,below_roofline," in row


def one_line_error(res) -> str:
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, res.stderr
    assert lines[0].startswith("error: ")
    assert "Traceback" not in res.output
    assert res.stdout == ""
    return lines[0]


def test_missing_file_exits_2_with_one_line(tmp_path):
    missing = tmp_path / "results.json"
    res = invoke(str(missing))
    assert res.exit_code == 2
    assert str(missing) in one_line_error(res)


def test_invalid_json_exits_2_with_one_line(tmp_path):
    bad = tmp_path / "results.json"
    bad.write_text("not json")
    res = invoke(str(bad), "--format", "csv")
    assert res.exit_code == 2
    assert str(bad) in one_line_error(res)


def test_newer_schema_exits_2_with_one_line(tmp_path, results_json):
    data = json.loads(results_json.read_text())
    data["schema_version"] = 99
    results_json.write_text(json.dumps(data))
    res = invoke(str(results_json))
    assert res.exit_code == 2
    assert "schema_version 99" in one_line_error(res)


def test_bad_fail_on_flag_exits_2_naming_it(results_json):
    res = invoke(str(results_json), "--fail-on", "tampering,cheating")
    assert res.exit_code == 2
    assert "'cheating'" in one_line_error(res)


def test_bad_format_is_a_usage_error(results_json):
    res = invoke(str(results_json), "--format", "pdf")
    assert res.exit_code == 2
    assert "pdf" in res.output
