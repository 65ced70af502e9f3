"""A solution's Triton kernels, compiled once per solution, not once per task.

A candidate's Triton cache (TRITON_CACHE_DIR) lies in its scratch folder, the only
folder it may write, and dies with it: every run compiled every Triton kernel
again in its first call (1.6 s of the check for each of the two Triton tasks of a
warm 20-task rerun on an H200, 2026-11-28). Here the judge, before the candidate
imports the solution, seeds that folder from a store of kbench's, one entry per
solution text and GPU architecture (kbench names it: the spec's "triton_cache"),
and after a task that ended ok, keeps what the candidate's Triton wrote there as
that entry, if it has none yet.

The entry is the candidate's own writing, so only candidates of the same solution
text ever read it: they run that same code anyway, and every call they make is
checked as any other. No other solution's candidate reads it, and no candidate
or build may write the store (it lies beside builds/, outside every sandbox's
writable folders). What is kept is read as untrusted data: plain files only, two
levels deep, names of Triton's own form, no link followed (the folder itself
included: a link there would have the judge read for the candidate's next run what
the candidate may not read), MAX_BYTES in all. The seeding writes only into a
folder that does not exist yet: the candidate has run no solution code when it
happens.
"""
from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

from ..shared import sandbox

MAX_BYTES = 64 << 20
MAX_FILES = 512
# Entries in the store, at most: a training loop's candidates are new every batch, and
# their entries would otherwise grow without end (a full store only means compiling).
MAX_ENTRIES = 2000
_NAME = re.compile(r"[\w+-][\w.+-]{0,199}")  # no leading dot


def _folder(scratch: str) -> Path:
    return Path(sandbox.scratch_env(scratch)["TRITON_CACHE_DIR"])


def seed(store: str | None, scratch: str) -> int:
    """Copy the entry's files into the candidate's Triton cache; returns how many."""
    if not store or not os.path.isdir(store):
        return 0
    target, copied = _folder(scratch), 0
    if os.path.lexists(target):  # the scratch folder is new and no solution code has run yet: never so
        return 0
    try:
        for group in sorted(Path(store).iterdir()):
            if not group.is_dir() or group.is_symlink():
                continue
            shutil.copytree(group, target / group.name, dirs_exist_ok=True)
            copied += sum(1 for _ in (target / group.name).iterdir())
    except OSError:  # a cache that cannot be read is one Triton fills again, never the task's failure
        return copied
    return copied


def keep(store: str | None, scratch: str) -> str:
    """The candidate's Triton cache as the entry `store`, where it has none; says what happened."""
    source = _folder(scratch)
    if not store or os.path.exists(store) or source.is_symlink() or not source.is_dir():
        # A link would have the judge read, for the candidate's next run, what it may not read itself.
        return "nothing to keep"
    try:
        if len(os.listdir(os.path.dirname(store) or ".")) >= MAX_ENTRIES:
            return "the store is full"
    except OSError:
        pass  # no store yet
    files = _files(source)
    if not files:
        return "nothing to keep"
    tmp = Path(f"{store}.{os.getpid()}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        for rel, data in files:
            (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
            (tmp / rel).write_bytes(data)
        os.rename(tmp, store)  # whole or not at all; a second judge of the same solution finds it made
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
        return "not kept"
    return f"kept {len(files)} files"


def _files(source: Path) -> list[tuple[str, bytes]] | None:
    """(relative path, bytes) of every plain file one level below `source`, or None when
    anything there is not of Triton's form or it holds too much."""
    out, total = [], 0
    try:
        groups = list(os.scandir(source))
        for group in groups:
            if not (group.is_dir(follow_symlinks=False) and _NAME.fullmatch(group.name)):
                return None
            for entry in os.scandir(group.path):
                if not (entry.is_file(follow_symlinks=False) and _NAME.fullmatch(entry.name)):
                    return None
                data = sandbox.read_written(entry.path, limit=MAX_BYTES - total)
                if data is None or len(out) >= MAX_FILES:
                    return None
                total += len(data)
                out.append((f"{group.name}/{entry.name}", data))
    except OSError:
        return None
    return out
