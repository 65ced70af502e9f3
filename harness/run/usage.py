"""Checks of the user's paths and numbers, made before anything runs.

Each failure is a UserError: one line naming the flag, the path or value, and what
to do (exit code 2). Found after the builds and the tasks, the same mistake costs
the whole run and ends in a traceback. Runs in the kbench process; imports no torch.
"""
from __future__ import annotations

import math
import os
import tempfile
from pathlib import Path

from ..records import UserError
from ..report.store import STORE_NAME

# Files that make a folder an earlier run's: results.jsonl is written first, results.json at the end.
RUN_MARKERS = (STORE_NAME, "results.json")


def _nearest_existing(path: Path) -> Path:
    existing = path
    while not existing.exists():
        existing = existing.parent
    return existing


def _can_create_in(folder: Path) -> str | None:
    """None where a file can be created in `folder`, else why not."""
    try:
        with tempfile.TemporaryFile(dir=folder, prefix=".kbench-write-check-"):
            return None
    except OSError as e:
        return e.strerror or str(e)


def writable_folder(path: Path, flag: str) -> Path:
    """A folder kbench will create (or fill) and write in: it may not exist yet, but
    nothing on the way may be a file, and kbench must be able to write where it starts."""
    if path.exists() and not path.is_dir():
        raise UserError(f"{flag} {path} is a file, not a folder; pass a new folder (or an earlier run's) for the results")
    existing = _nearest_existing(path)
    if not existing.is_dir():
        raise UserError(f"{flag} {path}: {existing} is a file, not a folder; pass a folder path for the results")
    why = _can_create_in(existing)
    if why:
        raise UserError(f"{flag} {path}: cannot write in {existing} ({why}); "
                        "pass a folder you can write, e.g. --out results/mine")
    return path


def writable_file(path: Path, flag: str, created_by_run: Path | None = None) -> Path:
    """A file kbench will write at the end (--junit, report --out). Its folder must exist
    already, since a typo in it should not create folders, unless it is (or lies inside)
    `created_by_run`, the run folder kbench creates itself."""
    if path.is_dir():
        raise UserError(f"{flag} {path} is a folder; pass a file path, e.g. {path / 'kbench.xml'}")
    folder = path.parent if str(path.parent) else Path(".")
    if created_by_run is not None and _inside(folder, created_by_run) and not folder.exists():
        return path  # the run creates it; --out's own check covers where it starts
    if not folder.exists():
        raise UserError(f"{flag} {path}: folder {folder} does not exist; create it first or pass a path in a folder "
                        "that exists")
    if not folder.is_dir():
        raise UserError(f"{flag} {path}: {folder} is a file, not a folder; pass a path in a folder")
    why = _can_create_in(folder)
    if why is None and path.exists() and not os.access(path, os.W_OK):
        why = "the file is read-only"
    if why:
        raise UserError(f"{flag} {path}: cannot write it ({why}); pass a path you can write")
    return path


def _inside(path: Path, folder: Path) -> bool:
    path, folder = path.resolve(), folder.resolve()
    return path == folder or folder in path.parents


def not_an_earlier_run(out: Path) -> None:
    """--out on a folder that holds an earlier run would replace its results: say how to
    continue it, or to pick another folder, instead."""
    found = [name for name in RUN_MARKERS if (out / name).is_file()]
    if found:
        raise UserError(f"--out {out} holds an earlier run ({found[0]}); continue it with --resume {out}, "
                        "or pass a new folder to --out")


def positive_number(value: float, flag: str) -> float:
    """A finite number above 0: nan compares false with everything, so a check against
    it would be switched off without a word."""
    if not math.isfinite(value) or value <= 0:
        raise UserError(f"{flag} takes a positive number, not {value}")
    return value
