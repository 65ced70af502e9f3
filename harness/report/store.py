"""results.jsonl: the run folder's append-only store of finished tasks.

results.json is one document for the whole run, so writing it costs time in
proportion to the run (about 1.4 s at 1000 timed tasks); rewritten after every
task, saving grew quadratically. The store appends one line per finished task
instead: a task's save costs its own line whatever the run's size. The pipeline
writes results.json and the other reports from its records at the start, at the
end and when a run is interrupted; a run killed outright (SIGKILL, a power cut)
leaves only the store, and `kbench report` and `--resume` rebuild the run from it.

One JSON object per line:
  {"schema_version": N, "run": RunInfo, "order": [task keys]}   first
  {"result": TaskResult}      one per finished task; a later line for a key replaces an earlier one
  {"run": RunInfo}            the run's final info (finished, build stage)
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Callable, Iterable, Sequence

from ..records import SCHEMA_VERSION, RunInfo, RunResults, TaskResult, UserError, results_from_json, to_json_dict

STORE_NAME = "results.jsonl"
# Each line reaches the kernel at once (a killed kbench loses at most the line it was
# writing); fsync, which costs milliseconds on a disk, waits until this long has passed
# since the last one, so that a power cut loses at most about this many seconds.
FSYNC_EVERY_S = 1.0


def _line(obj: dict) -> bytes:
    return (json.dumps(obj, separators=(",", ":")) + "\n").encode()


class ResultStore:
    """Open for appending; `create` starts it with the results a run carries over."""

    def __init__(self, path: Path, fd: int):
        self.path, self.fd = path, fd
        self.synced = time.monotonic()

    @classmethod
    def create(cls, folder: Path, info: RunInfo, order: Sequence[str], carried: Iterable[TaskResult]) -> "ResultStore":
        """A new store holding `carried` (a resumed run's earlier results), written whole
        and renamed into place: a kill leaves the old store or the new one, never half."""
        path = folder / STORE_NAME
        tmp = folder / f".{STORE_NAME}.tmp"
        with open(tmp, "wb") as f:
            f.write(_line({"schema_version": SCHEMA_VERSION, "run": to_json_dict(info), "order": list(order)}))
            for r in carried:
                f.write(_line({"result": to_json_dict(r)}))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        return cls(path, os.open(path, os.O_WRONLY | os.O_APPEND))

    def append(self, result: TaskResult) -> None:
        self._write({"result": to_json_dict(result)})

    def set_run(self, info: RunInfo) -> None:
        self._write({"run": to_json_dict(info)})

    def _write(self, obj: dict) -> None:
        data = memoryview(_line(obj))
        while data:  # one write(2) per line unless the kernel takes less
            data = data[os.write(self.fd, data):]
        if time.monotonic() - self.synced >= FSYNC_EVERY_S:
            os.fsync(self.fd)
            self.synced = time.monotonic()

    def close(self) -> None:
        if self.fd < 0:
            return
        try:
            os.fsync(self.fd)
        finally:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> "ResultStore":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def read(path: Path, warn: Callable[[str], None]) -> RunResults:
    """The run a store holds. A last line cut short (kbench was killed while writing
    it) is left out, with a warning through `warn`; any other bad line is an error."""
    header, info, results = None, None, {}
    with open(path, "rb") as f:
        lines = enumerate(f, 1)
        pending = next(lines, None)
        while pending is not None:
            number, raw = pending
            pending = next(lines, None)
            try:
                obj = json.loads(raw)
                if not isinstance(obj, dict):
                    raise ValueError("not a JSON object")
            except ValueError as e:
                if pending is None and header is not None:
                    warn(f"{path}: line {number}, the last, was cut short (the run was killed while writing it) "
                         "and is left out; --resume reruns that task")
                    break
                raise UserError(f"{path}: line {number} is not a kbench results line ({_why(e)}); "
                                "was the file changed after kbench wrote it?") from None
            if header is None:
                if "run" not in obj or "order" not in obj:
                    raise UserError(f"{path}: line 1 is not a kbench results header; pass a run folder kbench wrote")
                header, info = obj, obj["run"]
            elif "result" in obj:
                results[obj["result"].get("solution_path")] = obj["result"]  # TaskResult.key
            elif "run" in obj:
                info = obj["run"]
    if header is None:
        raise UserError(f"{path} is empty; pass a run folder kbench wrote")
    position = {key: i for i, key in enumerate(header["order"])}
    ordered = sorted(results.values(), key=lambda r: position.get(r.get("solution_path"), len(position)))
    return results_from_json({"schema_version": header.get("schema_version"), "run": info, "results": ordered})


def _why(e: ValueError) -> str:
    return f"{e.msg} at column {e.colno}" if isinstance(e, json.JSONDecodeError) else str(e)
