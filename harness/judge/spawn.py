"""Start a candidate process: stdlib only, so that `python -m harness.judge` can
start its candidate before it imports torch itself.

Both processes import torch (seconds each on a GPU host, more while builds run).
Started one after the other, a judge started ahead was ready ~8 s after it was
started, and on the H100 tasks of ~1.5 s waited for it ("handoff") even four
judges ahead; started together, the two imports overlap. A judge forked from a
template (template.py) has torch imported already and forks its candidate
instead (fork_candidate): no import at all.
"""
from __future__ import annotations

import os
import runpy
import socket
import subprocess
import sys
import tempfile
from dataclasses import dataclass

from ..shared import forked, sandbox, scratch_root


@dataclass
class Spawned:
    proc: subprocess.Popen | forked.ForkedProcess
    sock: socket.socket  # the judge's end of the channel
    scratch: str  # the only folder the candidate may write


def protect() -> None:
    """What a judge does to itself before its candidate exists: die with kbench, be
    unreadable by the candidate, and inherit whatever the candidate orphans."""
    sandbox.set_parent_death_signal(int(os.environ.get("KBENCH_PARENT_PID", os.getppid())))
    sandbox.make_undumpable()  # the candidate runs as the same user: no ptrace, no /proc/<pid>/fd
    sandbox.become_subreaper()  # whatever the candidate starts and orphans comes back here, to be killed
    if os.environ.get("KBENCH_DEVICE") == "cpu":
        sandbox.disable_huge_pages()  # both sides alike: the candidate inherits it (sandbox.py says why)


def _candidate_env(scratch: str) -> dict[str, str]:
    return {**sandbox.scratch_env(scratch), "KBENCH_JUDGE_PID": str(os.getpid())}


def spawn_candidate() -> Spawned:
    """A candidate process started now, in its own session and scratch folder."""
    scratch = tempfile.mkdtemp(prefix="kbench-candidate-", dir=scratch_root.inherited())
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    env = {**os.environ, **_candidate_env(scratch)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "harness.candidate", str(theirs.fileno()), scratch],
        pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL, cwd=scratch, env=env,
        start_new_session=True,  # its own group: killed whole at the end of the task
    )
    theirs.close()
    return Spawned(proc, ours, scratch)


def as_if_started_with_env() -> None:
    """What an exec'd process takes from its environment once, at its start, and a fork
    inherits from its parent instead: tempfile's folder (the judge's mkdtemp cached
    /tmp, which the sandbox does not let the candidate write: Triton's autotuner and
    any mkstemp failed with PermissionError on an H100) and PYTHONDONTWRITEBYTECODE."""
    tempfile.tempdir = None  # found again from TMPDIR at its next use
    sys.dont_write_bytecode = os.environ.get("PYTHONDONTWRITEBYTECODE", "") != ""


def fork_candidate() -> Spawned:
    """The candidate as a fork of this judge, made before the judge reads its spec, so
    that it holds nothing of the task (the judge's memory then is the template's:
    kbench's and torch's code). It keeps only its end of the channel and the log
    (stdout, stderr): not the judge's stdin (the spec) nor its result pipe. It then
    runs `python -m harness.candidate` as an exec'd one would, which confines it
    before anything else; fork left it one thread, so the confinement covers every
    thread it will have."""
    scratch = tempfile.mkdtemp(prefix="kbench-candidate-", dir=scratch_root.inherited())
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    env = _candidate_env(scratch)  # here: it names this process, the judge
    pid = os.fork()
    if pid == 0:
        def become() -> None:
            os.setsid()  # its own group: killed whole at the end of the task
            ours.close()
            null = os.open(os.devnull, os.O_RDONLY)
            os.dup2(null, 0)
            fd = theirs.detach()
            forked.close_fds_except(fd)
            os.chdir(scratch)
            os.environ.update(env)
            as_if_started_with_env()
            sandbox.make_dumpable()  # undumpable came from the judge: the judge reads its memory (read.py)
            sys.argv = ["-m", str(fd), scratch]
            forked.set_command_line(sys.executable, "-m", "harness.candidate", str(fd), scratch)
            runpy.run_module("harness.candidate", run_name="__main__", alter_sys=True)

        forked.run_then_exit(become)
    theirs.close()
    return Spawned(forked.ForkedProcess(pid, ["fork", "harness.candidate"]), ours, scratch)
