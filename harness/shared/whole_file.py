"""A file written whole: a reader sees the old file or the new one, never a part.

Each writer writes its own temporary file beside the target (tempfile names it, so
threads of one process do not share it) and renames it over the target. A name made
of the process id alone was shared by a run's build threads, which start together:
on a 32-core host (2 x H200, 2026-11-29) one thread renamed another's unfinished,
not yet executable file over the compiler stand-in, and every C++ compile of that
run failed with "Permission denied". stdlib only: confined processes import it.
"""
from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

FILE_MODE = 0o644  # what a plain open() gives under the usual umask; mkstemp's own is 0o600


def replace_whole(path: Path, data: bytes | str, mode: int = FILE_MODE) -> None:
    """Write `data` to `path` with `mode`, whole. Raises OSError as open() would."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode("utf-8", "surrogateescape") if isinstance(data, str) else data)
            os.fchmod(f.fileno(), mode)  # before the rename: the target is never seen without it
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
