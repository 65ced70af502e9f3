"""The GPU check after a task that crashed, hung or raised (harness/run/health.py):
its process is started ahead, so the check costs a CUDA context, not an interpreter
start; what it runs is swapped here for a CPU probe, but for the real probe's own tests."""
import sys
import time

import pytest

from harness.run import health
from harness.records import Status, TaskResult


@pytest.fixture
def cpu_probe(monkeypatch, tmp_path):
    marker = tmp_path / "ran"
    monkeypatch.setattr(health, "_PROBE", "import sys, pathlib, torch\nif not sys.stdin.readline(): sys.exit(3)\n"
                        f"pathlib.Path({str(marker)!r}).write_text('ran')")
    yield marker
    health.discard(None)


def _result(status: Status) -> TaskResult:
    return TaskResult(problem="p", solution_set="s", solution_path="s/p.py", status=status, message="")


def test_a_check_started_ahead_is_used_and_replaced(cpu_probe):
    health.keep_ready(None)
    first = health._ready[None]
    time.sleep(0.5)
    assert first.proc.poll() is None  # waiting for its line, torch imported or importing
    assert health.after(_result(Status.TIMEOUT), None) is True
    assert first.proc.returncode == 0 and cpu_probe.read_text() == "ran"
    assert health._ready[None] is not first and health._ready[None].proc.poll() is None  # the next one, started


def test_only_a_task_that_failed_is_checked(cpu_probe):
    assert health.after(_result(Status.OK), None) is True
    assert health.after(_result(Status.INCORRECT), None) is True
    assert not cpu_probe.exists() and None not in health._ready


def test_a_failing_device_is_not_healthy(monkeypatch):
    monkeypatch.setattr(health, "_PROBE", "import sys; sys.exit(1)")
    monkeypatch.setattr(health.time, "sleep", lambda s: None)
    assert health.healthy(None) is False


def test_a_check_whose_kbench_went_away_touches_no_device(cpu_probe):
    """Its stdin closes without a line (kbench died): it exits without running the probe."""
    health.keep_ready(None)
    child = health._ready.pop(None)
    child.proc.stdin.close()
    assert child.proc.wait(timeout=60) == 3 and not cpu_probe.exists()
    child.discard()


def _has_driver() -> bool:
    try:
        import ctypes

        ctypes.CDLL("libcuda.so.1")
        return True
    except OSError:
        return False


@pytest.mark.skipif(_has_driver(), reason="this host has a CUDA driver")
def test_without_a_driver_the_real_probe_says_not_healthy(monkeypatch):
    monkeypatch.setattr(health.time, "sleep", lambda s: None)
    assert health.healthy(None, timeout=60) is False


def test_the_real_probe_starts_without_torch():
    """Its start is an interpreter's, not torch's import (3.5 s on an H200 host): a second
    failure right after a first found its successor still importing."""
    import subprocess

    done = subprocess.run([sys.executable, "-X", "importtime", "-c", health._PROBE], input="", text=True,
                          capture_output=True, timeout=60)
    assert done.returncode == 3  # no line: kbench went away, no context made
    assert "torch" not in done.stderr, done.stderr[-500:]


@pytest.mark.gpu
def test_the_real_probe_finds_a_sound_gpu_healthy():
    import torch

    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    assert health.healthy(None, timeout=60) is True
