"""On --device cpu the judge started ahead, and the candidate it started, stand still while
the task's judge is in its timing phase (harness/run/paused_spares.py), and go on after it:
a process importing torch on the other core slows the timed processes' CPU time."""
import os
import signal
import time
from pathlib import Path
from types import SimpleNamespace

from harness.run.paused_spares import PausedSpares
from harness.shared.isolate import Child

# A stand-in for a judge started ahead: it starts a child in its own session, as a judge
# starts its candidate, then both wait for their task.
SPARE = """
import subprocess, sys, time
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
time.sleep(60)
"""


def _state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def _stopped(pid: int) -> bool:
    """Whether `pid` stops within a second (a signal is delivered as the process next runs)."""
    deadline = time.monotonic() + 1
    while _state(pid) != "T" and time.monotonic() < deadline:
        time.sleep(0.01)
    return _state(pid) == "T"


def _running(pid: int) -> bool:
    deadline = time.monotonic() + 1
    while _state(pid) == "T" and time.monotonic() < deadline:
        time.sleep(0.01)
    return _state(pid) != "T"


def _children(pid: int) -> list[int]:
    return [int(c) for t in Path(f"/proc/{pid}/task").iterdir() for c in (t / "children").read_text().split()]


def test_the_spare_and_its_candidate_stop_for_the_timing_phase_only(tmp_path):
    spare = Child(["-c", SPARE])
    try:
        deadline = time.monotonic() + 30
        while not _children(spare.proc.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        (candidate,) = _children(spare.proc.pid)
        judge = SimpleNamespace(results=SimpleNamespace(messages=[]))
        watch = PausedSpares(judge, [spare])

        judge.results.messages += [{"phase": "import"}, {"phase": "check"}]
        watch()
        assert _running(spare.proc.pid) and _running(candidate)

        judge.results.messages.append({"phase": "time"})
        watch()
        assert _stopped(spare.proc.pid) and _stopped(candidate)

        judge.results.messages.append({"phase": "profile"})
        watch()
        assert _running(spare.proc.pid) and _running(candidate)

        judge.results.messages.append({"phase": "time"})  # a task that ends inside its timing phase
        watch()
        assert _stopped(spare.proc.pid)
        watch.close()
        assert _running(spare.proc.pid) and _running(candidate)
    finally:
        for pid in _children(spare.proc.pid):
            os.kill(pid, signal.SIGKILL)
        spare.discard()
