"""Every adversarial fixture gets the verdict it declares, and the run never stops
early: one class of cheat or fault per set folder, plus no-false-alarm cases
(set 00_legit) that must stay ok. CPU variants run in CI; CUDA variants need a GPU."""
import json

import pytest

from conftest import ROOT, kill_pids, marker_pids, pwned_files
from expect import mismatches

ADVERSARIAL = ROOT / "tests" / "fixtures" / "adversarial"


def _run(run_cli, out, device: str, solutions: str):
    markers, pwned = marker_pids(), pwned_files()
    try:
        proc = run_cli("run", "--problems", str(ADVERSARIAL / "problems"), "--solutions", str(ADVERSARIAL / solutions),
                       "--out", str(out), "--device", device, "--time-budget", "1", "--timeout", "120")
    finally:  # escape fixtures may leave processes and files behind (tests/test_escapes.py asserts they do not)
        kill_pids(marker_pids() - markers)
        for path in pwned_files() - pwned:
            path.unlink(missing_ok=True)
    data = json.loads((out / "results.json").read_text())
    expected = sum(1 for _ in (ADVERSARIAL / solutions).rglob("*.py"))
    assert len(data["results"]) == expected, proc.stderr[-3000:]
    assert data["run"]["finished"], "the run stopped early"
    return data["results"]


def test_cpu_fixtures_get_their_verdicts(run_cli, tmp_path):
    assert mismatches(_run(run_cli, tmp_path / "r", "cpu", "cpu")) == []


@pytest.mark.gpu
def test_cuda_fixtures_get_their_verdicts(run_cli, tmp_path):
    assert mismatches(_run(run_cli, tmp_path / "r", "cuda", "cuda")) == []
