"""A KernelBench checkout's problem folder and a KernelBench generation folder run unchanged."""
import json

from conftest import ROOT
from expect import verdict_mismatches

KB = ROOT / "tests" / "fixtures" / "kernelbench"


def test_kernelbench_layouts_run_unchanged(run_cli, tmp_path):
    out = tmp_path / "r"
    proc = run_cli("run", "--problems", str(KB / "KernelBench"), "--solutions", str(KB / "runs"), "--out", str(out),
                   "--device", "cpu", "--no-timing")  # layouts and verdicts; timing adds nothing here
    data = json.loads((out / "results.json").read_text())
    results = data["results"]
    assert len(results) == 3, proc.stderr[-2000:]
    assert {r["solution_set"] for r in results} == {"runs"}  # the generation folder is one set
    assert {r["problem"] for r in results} == {"level1/1_Scale_tensor", "level1/2_Sum_rows"}
    assert verdict_mismatches(results) == []
    assert any("level_1_problem_9_sample_0_kernel.py" in u and "no problem numbered 9" in u for u in data["run"]["unmatched"])
    md = (out / "report.md").read_text()
    assert "Several candidates per problem" in md  # two samples of problem 1: pass@k


def test_list_shows_shapes_bytes_and_flops(run_cli):
    proc = run_cli("list", "--problems", str(KB / "KernelBench"), "--solutions", str(KB / "runs"))
    assert proc.returncode == 0, proc.stderr
    assert "float32[512, 256]" in proc.stdout and "level1/2_Sum_rows" in proc.stdout
    assert "match no problem" in proc.stdout
