"""Start a candidate process: stdlib only, so that `python -m harness.judge` can
start its candidate before it imports torch itself.

Both processes import torch (seconds each on a GPU host, more while builds run).
Started one after the other, a judge started ahead was ready ~8 s after it was
started, and on the H100 tasks of ~1.5 s waited for it ("handoff") even four
judges ahead; started together, the two imports overlap.
"""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
from dataclasses import dataclass

from ..shared import sandbox


@dataclass
class Spawned:
    proc: subprocess.Popen
    sock: socket.socket  # the judge's end of the channel
    scratch: str  # the only folder the candidate may write


def spawn_candidate() -> Spawned:
    """A candidate process started now, in its own session and scratch folder."""
    scratch = tempfile.mkdtemp(prefix="kbench-candidate-")
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    env = dict(os.environ)
    env.update(sandbox.scratch_env(scratch), KBENCH_JUDGE_PID=str(os.getpid()))
    proc = subprocess.Popen(
        [sys.executable, "-m", "harness.candidate", str(theirs.fileno()), scratch],
        pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL, cwd=scratch, env=env,
        start_new_session=True,  # its own group: killed whole at the end of the task
    )
    theirs.close()
    return Spawned(proc, ours, scratch)
