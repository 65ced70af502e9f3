"""The README's first command on a machine without a GPU: `kbench run`, no flags, runs
the CPU demo set (demo/: CPU-sized problems, C++ and PyTorch solutions), says so in one
line, writes a report a reviewer can read, and exits 0. On a GPU machine it stays the
shipped CUDA run, so these tests skip there."""
import json
import warnings
from pathlib import Path

import pytest

from conftest import ROOT

DEMO = ROOT / "demo"


@pytest.fixture(scope="module")
def demo_run(run_cli, tmp_path_factory):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU: `kbench run` runs the shipped CUDA set")
    where = tmp_path_factory.mktemp("fresh")  # no problems/ or solutions/ here: exactly the bare command
    proc = run_cli("run", cwd=where)
    runs = sorted((where / "results").iterdir())
    return proc, runs


def test_bare_run_without_a_gpu_is_green_on_the_demo_set(demo_run):
    proc, runs = demo_run
    assert len(runs) == 1, proc.stderr[-3000:]
    results = json.loads((runs[0] / "results.json").read_text())["results"]
    solutions = sorted(DEMO.glob("solutions/*/level1/*.py"))
    assert sorted(Path(r["solution_path"]).name for r in results) == sorted(p.name for p in solutions)
    assert all(r["status"] == "ok" for r in results), [(r["solution_path"], r["message"]) for r in results]
    disturbed = [Path(r["solution_path"]).name for r in results if "timing_mismatch" in r["flags"]]
    if disturbed:  # the CPU clock on a loaded machine (the judge's bound, not the demo): the gate fails on it
        warnings.warn(f"demo tasks flagged timing_mismatch on this machine, exit {proc.returncode}: {disturbed}")
        return
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert all(r["speedup"] for r in results)


def test_says_in_one_line_why_and_how_to_run_the_real_set(demo_run):
    proc, _ = demo_run
    lines = [ln for ln in proc.stderr.splitlines() if "demo" in ln and "no CUDA GPU" in ln]
    assert len(lines) == 1, proc.stderr[:2000]
    assert "kbench run --device cpu --problems DIR --solutions DIR" in lines[0] and "problems/ and solutions/" in lines[0]


def test_the_demo_has_our_own_cpp_and_pure_torch_solutions():
    sources = [p.read_text() for p in DEMO.glob("solutions/*/level1/*.py")]
    assert sum("load_inline" in s for s in sources) >= 1  # C++ kernels, built by the run
    assert sum("load_inline" not in s for s in sources) >= 1  # and pure PyTorch
    assert not any("cuda_sources" in s or "<<<" in s for s in sources)  # nothing a CPU cannot run


def test_its_report_reads_as_a_cpu_run(demo_run):
    _, runs = demo_run
    md = (runs[0] / "report.md").read_text()
    assert "device: cpu" in md and "| ok | 4 |" in md
    assert "CPU time each side's processes used for a batch of calls" in md and "CUDA events" not in md
