"""python -m harness.judge RESULT_FD

The candidate process starts first, before this process imports torch, so that
their two imports overlap (judge/spawn.py says why). Its parent-death signal,
the judge's undumpability and subreaping are set before it exists.
"""
import os

from harness.shared import sandbox
from harness.judge.spawn import spawn_candidate

sandbox.set_parent_death_signal(int(os.environ.get("KBENCH_PARENT_PID", os.getppid())))
sandbox.make_undumpable()  # the candidate runs as the same user: no ptrace, no /proc/<pid>/fd
sandbox.become_subreaper()  # whatever the candidate starts and orphans comes back here, to be killed
if os.environ.get("KBENCH_DEVICE") == "cpu":
    sandbox.disable_huge_pages()  # both sides alike: the candidate inherits it (sandbox.py says why)
_spawned = spawn_candidate()

from harness.judge.main import main  # noqa: E402 - after the candidate is started, on purpose

main(_spawned)
