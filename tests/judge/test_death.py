"""How a candidate that broke the channel ended, and how long the judge waits to say so."""
import os
import signal
import subprocess
import sys
import time

from harness.judge import remote
from harness.shared import sandbox


def _remote(cmd: str) -> remote.Remote:
    """A stand-in candidate running `cmd` once it has said it is up (its start-up, slow on
    a busy host, is not what is measured)."""
    r = object.__new__(remote.Remote)
    r.proc = subprocess.Popen([sys.executable, "-c", "import sys; print(flush=True); sys.stdin.read(1)\n" + cmd],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    r.proc.stdout.readline()
    return r


def _go(r: remote.Remote) -> None:
    r.proc.stdin.write(b"x")
    r.proc.stdin.flush()


def test_a_candidate_that_lives_on_after_breaking_the_channel_is_not_waited_for():
    r = _remote("import time; time.sleep(60)")
    try:
        _go(r)
        t0 = time.monotonic()
        said = r.death("message too large")
        assert time.monotonic() - t0 < 2.0, "waited out the whole wait for a process that is not dying"
        assert said == "the candidate broke the channel (message too large)"
    finally:
        r.proc.kill()
        r.proc.wait()


def test_a_candidate_that_dies_is_named_by_how_it_died():
    """Its channel breaks as it dies (the kernel closes its socket on the way out): here
    the judge asks before it has died at all."""
    r = _remote("import os, signal; os.kill(os.getpid(), signal.SIGSEGV)")
    _go(r)
    said = r.death("truncated reply")
    assert "SIGSEGV" in said or "signal 11" in said, said


def test_exiting_is_true_for_a_zombie_and_a_gone_process_and_false_for_a_stopped_one():
    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        time.sleep(0.2)
        assert not sandbox.exiting(p.pid)
        os.kill(p.pid, signal.SIGSTOP)
        time.sleep(0.1)
        assert not sandbox.exiting(p.pid)  # stopped, not dying: nothing to wait for
        os.kill(p.pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while not sandbox.exiting(p.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert sandbox.exiting(p.pid)  # a zombie until reaped
    finally:
        p.kill()
        p.wait()
    assert sandbox.exiting(p.pid)
