"""--precision fp16|bf16: inputs and weights cast on both sides, tolerances for the dtype
from the float64 reference, the precision recorded and shown.

On the CPU, pure-torch solutions (set `torch`); on a CUDA GPU, also a CUDA kernel that
reads and writes __half (set `cuda`). Each fixture declares its verdict (tests/expect.py).
"""
import json
from pathlib import Path

import pytest

from conftest import ROOT
from expect import mismatches, verdict_mismatches
from harness.report import html
from harness.report import write as writers
from harness.report.gate import GatePolicy

FIXTURES = ROOT / "tests" / "fixtures" / "precision"
PROBLEMS, SOLUTIONS = FIXTURES / "problems", FIXTURES / "solutions"
# The reference's own relative L2 error vs float64 when it runs in the dtype: one
# rounding of the output, ~2e-4 (fp16) and ~2e-3 (bf16); an fp32 reference's is ~1e-7.
OWN_ERROR_ABOVE = {"fp16": 5e-5, "bf16": 5e-4}


def _results(out: Path) -> list[dict]:
    return json.loads((out / "results.json").read_text())["results"]


@pytest.fixture(scope="module", params=["fp16", "bf16"])
def half_run(request, run_cli, tmp_path_factory):
    out = tmp_path_factory.mktemp(request.param) / "r"
    proc = run_cli("run", "--problems", str(PROBLEMS), "--solutions", str(SOLUTIONS), "-s", "torch", "--out", str(out),
                   "--device", "cpu", "--precision", request.param, "--trials", "2", "--time-budget", "0.5")
    return request.param, proc, out


def test_honest_half_solutions_pass_and_a_coarse_one_fails(half_run):
    """Each honest solution checks that its inputs and weights came in the half dtype
    (and class targets as int64) and works in fp32 inside; the coarse one keeps 3
    mantissa bits fewer than the dtype."""
    precision, proc, out = half_run
    results = _results(out)
    assert len(results) == 4, proc.stderr[-3000:]
    assert verdict_mismatches(results) == []
    coarse = next(r for r in results if r["solution_path"].endswith("coarse.py"))
    assert f"{precision} reference's own error" in coarse["message"] and "x 4" in coarse["message"]
    for r in results:
        if r["status"] == "ok":  # the reference ran in the dtype: its own error is the dtype's rounding
            assert r["check"]["ref_rel_l2_err_fp64"] > OWN_ERROR_ABOVE[precision], r
            # timed on cast inputs too (as many pairs as --time-budget 0.5 holds: a hard cap now)
            assert r["timing"] and r["timing"]["sol"]["n"] >= 1 and r["timing"]["speedup"] > 0
    assert proc.returncode == 1  # the coarse one fails the gate


def test_precision_is_recorded_and_shown(half_run):
    precision, proc, out = half_run
    data = json.loads((out / "results.json").read_text())
    assert data["run"]["options"]["precision"] == precision
    assert f" on cpu at {precision}" in proc.stdout  # the final table's title
    assert f"- device: cpu; precision {precision};" in (out / "report.md").read_text()
    assert f"device cpu; precision {precision};" in html.render(writers.load_run(out), GatePolicy())


def test_precision_is_part_of_the_resume_fingerprint(tmp_path):
    from harness.run import pipeline
    from harness.records import Options, Task

    problem, solution = tmp_path / "p.py", tmp_path / "s.py"
    problem.write_text("# problem\n")
    solution.write_text("# solution\n")
    task = Task("level1/1_P", str(problem), "set", str(solution))
    fp32, fp16 = (pipeline.RunConfig(tmp_path, tmp_path, options=Options(precision=p)) for p in ("fp32", "fp16"))
    assert pipeline.fingerprint(task, fp32) != pipeline.fingerprint(task, fp16)
    assert pipeline._changed_options(fp32.options_record(), fp16.options_record()) == ["precision fp32 -> fp16"]


@pytest.mark.gpu
def test_fp16_on_a_cuda_gpu(run_cli, tmp_path):
    """A CUDA kernel on __half inputs passes; one that truncates 3 mantissa bits fails;
    the pure-torch solutions pass on the GPU too (cuBLAS fp16 GEMM for the linear layer)."""
    out = tmp_path / "r"
    proc = run_cli("run", "--problems", str(PROBLEMS), "--solutions", str(SOLUTIONS), "--out", str(out),
                   "--precision", "fp16", "--trials", "3", "--time-budget", "2", "--exit-zero")
    results = _results(out)
    assert len(results) == 6, proc.stderr[-3000:]
    assert mismatches(results) == []
    kernel = next(r for r in results if r["solution_path"].endswith("half_kernel.py"))
    assert kernel["speedup"] is not None and kernel["custom_share"] and kernel["custom_share"] > 0.5, kernel
    assert json.loads((out / "results.json").read_text())["run"]["options"]["precision"] == "fp16"
