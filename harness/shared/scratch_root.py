"""One folder per kbench process for its candidates' scratch folders, removed at its exit.

A judge removes its candidate's scratch folder itself before its verdict leaves
(judge/main.py), but kbench ends a judge as soon as the verdict arrives, kills one
that overruns, and discards judges started ahead that no task took: none of those
runs a line of cleanup. Under one parent folder of kbench's, what they leave goes
with kbench (a CPU run of 12 tasks had left 8 empty kbench-candidate-* folders in
/tmp; the test suite, 11 thousand in a day).
"""
from __future__ import annotations

import atexit
import os
import shutil
import tempfile

ENV = "KBENCH_SCRATCH_ROOT"
_root: str | None = None


def for_children() -> str:
    """This process's folder, made at the first call and removed when the process exits."""
    global _root
    if _root is None:
        atexit.register(remove)  # whichever folder _root names then
    if _root is None or not os.path.isdir(_root):
        _root = tempfile.mkdtemp(prefix="kbench-run-")
    return _root


def remove() -> None:
    """The folder and what is in it, now: at exit, or before an exit that skips atexit
    (os._exit, once the children are killed)."""
    if _root is not None:
        shutil.rmtree(_root, ignore_errors=True)


def inherited() -> str | None:
    """The folder kbench named for this process's scratch folders, if it still exists."""
    root = os.environ.get(ENV)
    return root if root and os.path.isdir(root) else None
