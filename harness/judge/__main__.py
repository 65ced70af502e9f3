"""python -m harness.judge RESULT_FD

The candidate process starts first, before this process imports torch, so that
their two imports overlap (judge/spawn.py says why). Its parent-death signal,
the judge's undumpability and subreaping are set before it exists. A judge
forked from a template (template.py) does the same, with torch imported already.
"""
from harness.judge.spawn import protect, spawn_candidate

protect()
_spawned = spawn_candidate()

from harness.judge.main import main  # noqa: E402 - after the candidate is started, on purpose

main(_spawned)
