"""One kbench run per run folder: `<out>/.lock`, held with flock for the run's life.

The kernel drops a flock when its holder exits however it exits, so a crashed
run leaves no stale lock; the file only says who holds it.
"""
from __future__ import annotations

import contextlib
import fcntl
import os
from datetime import datetime
from pathlib import Path
from typing import Iterator

from ..records import UserError

LOCK_NAME = ".lock"


@contextlib.contextmanager
def folder_lock(folder: Path) -> Iterator[None]:
    path = folder / LOCK_NAME
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)  # not inherited by worker processes
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read(fd)
            os.close(fd)
            raise UserError(f"run folder '{folder}' is in use by {holder}; wait for that run to finish "
                            "or pass another --out") from None
        except OSError as e:
            os.close(fd)
            raise UserError(f"cannot lock run folder '{folder}' ({e.strerror or e})") from None
        try:
            same = os.fstat(fd).st_ino == os.stat(path).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)  # the holder removed the file as we opened it: lock the new one
    try:
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n{datetime.now().astimezone().isoformat(timespec='seconds')}\n".encode())
        yield
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)
        os.close(fd)


def _read(fd: int) -> str:
    try:
        lines = os.pread(fd, 200, 0).decode(errors="replace").split()
    except OSError:
        lines = []
    if len(lines) >= 2 and lines[0].isdigit():
        return f"pid {lines[0]} since {lines[1]}"
    return "another kbench run"
