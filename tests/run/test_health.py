"""The GPU check after a task that crashed, hung or raised (harness/run/health.py):
its process is started ahead with torch imported, so the check costs a CUDA
context, not an interpreter start; what it runs is swapped here for a CPU probe."""
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
