"""On a CUDA GPU: the founding problems against CUDA fixtures of every failure
kind (set `faults`) and of the styles models write (set `styles`: verbose builds,
flags given to the wrong compiler, a missing include, a removed torch API, a Triton
compile error, METR's Model-only files), and kbench's own solution set. Skipped
(visibly) without a GPU."""
import json
import shutil

import pytest

from conftest import ROOT
from expect import mismatches

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def faults_run(run_cli, tmp_path_factory):
    out = tmp_path_factory.mktemp("gpu") / "faults"
    proc = run_cli("run", "--solutions", str(ROOT / "tests" / "fixtures" / "gpu" / "solutions"), "--out", str(out),
                   "--timeout", "45", "--time-budget", "2")
    return proc, out


def test_every_cuda_fixture_gets_its_verdict(faults_run):
    proc, out = faults_run
    results = json.loads((out / "results.json").read_text())["results"]
    assert len(results) == 15, proc.stderr[-3000:]  # faults (9) and styles (6: model-written build errors, METR)
    assert mismatches(results) == []


def test_gpu_is_healthy_after_the_faults(faults_run):
    """The hang and the illegal address come before later tasks; those still run and pass."""
    _, out = faults_run
    results = json.loads((out / "results.json").read_text())["results"]
    assert not any("health check" in r["message"] for r in results)


def test_shipped_solutions_are_ok(run_cli, tmp_path):
    proc = run_cli("run", "--solutions", str(ROOT / "solutions"), "--set", "kbench", "--out", str(tmp_path / "r"),
                   "--time-budget", "3")
    results = json.loads((tmp_path / "r" / "results.json").read_text())["results"]
    assert len(results) == 4, proc.stderr[-3000:]
    # noisy and host_bound describe the host, not the kernel (host_bound: the host's time to
    # issue a call, read while this run's builds load it, exceeds the device's): no gate fails on them.
    bad = [(r["problem"], r["status"], r["flags"], r["message"][:200]) for r in results
           if r["status"] != "ok" or set(r["flags"]) - {"noisy", "host_bound"}]
    assert bad == []
    assert proc.returncode == 0


GRAPHS = ROOT / "tests" / "fixtures" / "gpu" / "graphs"


def test_microsecond_kernels_are_timed_as_device_time(run_cli, tmp_path):
    """auto mode: a few-us task is timed in held batches (many calls queued behind a
    hold the judge releases, the legacy default stream included): the device's time,
    not the host's launches. A forward that synchronizes cannot queue: eager batches,
    and the note says why; one that returns one buffer for every call, one call per
    batch. --timing-mode graph: a solution that behaves differently while captured is
    refused a graph and timed in eager batches; events: eager batches only."""
    proc = run_cli("run", "--problems", str(GRAPHS / "problems"), "--solutions", str(GRAPHS / "solutions"),
                   "--out", str(tmp_path / "auto"), "--time-budget", "2", "--exit-zero")
    results = json.loads((tmp_path / "auto" / "results.json").read_text())["results"]
    assert len(results) == 5, proc.stderr[-3000:]
    assert mismatches(results) == []
    by_name = {r["solution_path"].rsplit("/", 1)[-1]: r["timing"] for r in results}
    # A held batch holds many calls, the shared buffer one.
    assert by_name["fused.py"]["calls_per_batch"] > 100 and by_name["one_output_buffer.py"]["calls_per_batch"] == 1
    assert by_name["legacy_stream.py"]["calls_per_batch"] > 100
    assert "| clock |" in (tmp_path / "auto" / "report.md").read_text()  # mixed clocks: one column says which

    one = tmp_path / "one" / "graphs" / "level1" / "1_TinyAffine"
    one.mkdir(parents=True)
    shutil.copy(GRAPHS / "solutions" / "graphs" / "level1" / "1_TinyAffine" / "capture_aware.py", one)
    proc = run_cli("run", "--problems", str(GRAPHS / "problems"), "--solutions", str(tmp_path / "one"),
                   "--out", str(tmp_path / "graph"), "--time-budget", "2", "--exit-zero", "--timing-mode", "graph")
    results = json.loads((tmp_path / "graph" / "results.json").read_text())["results"]
    assert [r["timing"]["clock"] for r in results] == ["cuda_burst"], proc.stderr[-3000:]
    assert "the graph does not recompute the output from new inputs" in results[0]["message"]

    proc = run_cli("run", "--problems", str(GRAPHS / "problems"), "--solutions", str(GRAPHS / "solutions"),
                   "-p", "TinyAffine", "--out", str(tmp_path / "events"), "--time-budget", "2", "--exit-zero",
                   "--timing-mode", "events")
    results = json.loads((tmp_path / "events" / "results.json").read_text())["results"]
    assert {r["timing"]["clock"] for r in results} == {"cuda_burst"}, proc.stderr[-3000:]


def _gpu_count() -> int:
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


@pytest.mark.skipif(_gpu_count() < 2, reason="needs two CUDA GPUs")
def test_two_gpus_share_the_tasks(run_cli, tmp_path):
    """--gpus 0,1: one worker per GPU takes tasks from the same queue; every
    verdict is as on one GPU, and each task records the GPU it ran on."""
    proc = run_cli("run", "--problems", str(GRAPHS / "problems"), "--solutions", str(GRAPHS / "solutions"),
                   "--gpus", "0,1", "--out", str(tmp_path / "r"), "--time-budget", "2", "--exit-zero")
    results = json.loads((tmp_path / "r" / "results.json").read_text())["results"]
    assert len(results) == 5, proc.stderr[-3000:]
    assert mismatches(results) == []
    assert {r["gpu"] for r in results} == {0, 1}  # both took a task: each pops one as it starts


def test_a_bare_run_uses_every_visible_gpu_and_says_so(run_cli, tmp_path):
    """No --gpus: every GPU kbench sees takes tasks; the first line names them and their
    card, and report.md's header names the card."""
    import torch

    count, name = _gpu_count(), torch.cuda.get_device_name(0)
    proc = run_cli("run", "--problems", str(GRAPHS / "problems"), "--solutions", str(GRAPHS / "solutions"),
                   "--out", str(tmp_path / "r"), "--time-budget", "2", "--exit-zero")
    first = proc.stderr.strip().splitlines()[0]
    assert first.startswith(f"using {count} of {count} visible GPUs" if count > 1 else "using GPU"), proc.stderr[:2000]
    assert name in first
    results = json.loads((tmp_path / "r" / "results.json").read_text())["results"]
    assert mismatches(results) == []
    assert len({r["gpu"] for r in results}) >= min(2, count)  # more than the first GPU took tasks
    assert name in (tmp_path / "r" / "report.md").read_text().split("## Summary")[0]
