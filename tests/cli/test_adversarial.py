"""Every adversarial fixture gets the verdict it declares, and the run never stops
early: one class of cheat or fault per set folder, plus no-false-alarm cases
(set 00_legit) that must stay ok. CPU variants run in CI; CUDA variants need a GPU."""
import json
from pathlib import Path

import pytest

from conftest import ROOT, kill_pids, marker_pids, pwned_files
from expect import GATE_FLAGS, expected, measure_again, mismatches, timing_only

ADVERSARIAL = ROOT / "tests" / "fixtures" / "adversarial"


def _run(run_cli, out, device: str, solutions: str):
    markers, pwned = marker_pids(), pwned_files()
    try:
        proc = run_cli("run", "--problems", str(ADVERSARIAL / "problems"), "--solutions", str(ADVERSARIAL / solutions),
                       "--out", str(out), "--device", device, "--time-budget", "1", "--timeout", "120")
    finally:  # escape fixtures may leave processes and files behind (tests/cli/test_escapes.py asserts they do not)
        kill_pids(marker_pids() - markers)
        for path in pwned_files() - pwned:
            path.unlink(missing_ok=True)
    data = json.loads((out / "results.json").read_text())
    expected = sum(1 for _ in (ADVERSARIAL / solutions).rglob("*.py"))
    assert len(data["results"]) == expected, proc.stderr[-3000:]
    assert data["run"]["finished"], "the run stopped early"
    return data["results"]


def test_cpu_fixtures_get_their_verdicts(adversarial_cpu, run_cli, tmp_path):
    """The session's run of every CPU fixture (conftest.adversarial_cpu). A fixture whose
    only miss is where the clock decides (a speedup above its bound, an unexpected
    timing_mismatch) is measured once more beside its problem's control (expect.
    measure_again): on a shared 2-core CI machine a stolen reference once read 3.29x against
    itself (1.01x on a rerun). A cheat
    that really is faster is faster again next to a control that reads 1x."""
    data = adversarial_cpu["data"]
    assert data is not None, adversarial_cpu["proc"].stderr[-3000:]
    expected = sum(1 for _ in (ADVERSARIAL / "cpu").rglob("*.py"))
    assert len(data["results"]) == expected, adversarial_cpu["proc"].stderr[-3000:]
    assert data["run"]["finished"], "the run stopped early"
    bad = mismatches(data["results"])
    assert [line for line in bad if not timing_only(line)] == []
    for n, line in enumerate(bad):
        assert measure_again(run_cli, ADVERSARIAL, tmp_path / f"again{n}", line) == [], f"first run: {line}"


def test_a_fixture_measured_again_keeps_its_verdict(run_cli, tmp_path):
    """The rerun above finds its fixture and judges it beside its problem's control (the
    reference's own code) and nothing else (a pure-torch one: fast)."""
    assert measure_again(run_cli, ADVERSARIAL, tmp_path,
                         "level1/2_Affine import_problem_file.py: speedup 3.29 > max_speedup 1.5") == []
    judged = json.loads((tmp_path / "results.json").read_text())["results"]
    assert sorted(Path(r["solution_path"]).name for r in judged) == ["import_problem_file.py", "same_as_reference.py"]


@pytest.mark.gpu
def test_cuda_fixtures_get_their_verdicts(run_cli, tmp_path, escape_watch):
    with escape_watch():
        results = _run(run_cli, tmp_path / "r", "cuda", "cuda")
    assert mismatches(results) == []


def test_every_twin_is_beside_its_fixture_and_declares_a_plain_ok():
    """A fixture held to its honest twin's speedup ("twin" in KBENCH_EXPECT) names a file in its own
    folder, which declares ok with no gate-failing flag (so it has a speedup to compare with).
    Read with ast for the CPU and the CUDA sets alike: no run needed."""
    named = 0
    for path in sorted([*(ADVERSARIAL / "cpu").rglob("*.py"), *(ADVERSARIAL / "cuda").rglob("*.py")]):
        want = expected(path)
        for option in want.get("any_of", [want]):
            if not option.get("twin"):
                continue
            named += 1
            twin = path.with_name(option["twin"])
            assert twin.is_file(), f"{path}: twin {option['twin']} is not beside it"
            assert option.get("max_ratio", 0) >= 1.0, f"{path}: max_ratio below 1 would fail an honest copy"
            declared = expected(twin)
            assert declared.get("status") == "ok" and not set(declared.get("flags", [])) & GATE_FLAGS, twin
    assert named > 0
