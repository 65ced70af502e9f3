"""KBENCH_JUDGE_WALK=FILE: the walk of a timed pair through the judge's modules, for issue 30's
"a batch's walk through judge/ enters each room once".

A room is a module of harness/judge. A stay is a run of the walk in one room: it begins when a
call enters that room from another, or when a return comes back to it. A return is a stay in a
room the walk has been in before. Calls into shared/ and torch are inside the stay of the room
that made them. The timing phase writes the walk of its last pair to FILE (JSON: the stays, each
as [room, function], and the count of returns); bench/judge_walk.py runs a task with it and
prints the count. Off by default: the interpreter's profile hook slows the judge's own loop,
which on a GPU is inside its clock."""
from __future__ import annotations

import contextlib
import json
import os
import sys
from pathlib import Path

PATH = os.environ.get("KBENCH_JUDGE_WALK")
PACKAGE = __name__.rsplit(".", 1)[0] + "."  # "harness.judge."


class Walk:
    """The stays of one walk, recorded with sys.setprofile in the calling thread."""

    def __init__(self):
        self.stays: list[tuple[str, str]] = []
        self._stack: list[str | None] = []  # each open frame's room, None outside judge/

    def _room(self, frame) -> str | None:
        name = frame.f_globals.get("__name__") or ""
        return name[len(PACKAGE):] if name.startswith(PACKAGE) and name != __name__ else None

    def _enter(self, room: str, function: str) -> None:
        if not self.stays or self.stays[-1][0] != room:
            self.stays.append((room, function))

    def _hook(self, frame, event, arg) -> None:
        if event == "call":
            room = self._room(frame)
            self._stack.append(room)
            if room is not None:
                self._enter(room, frame.f_code.co_name)
        elif event == "return" and self._stack:
            self._stack.pop()
            back = next((r for r in reversed(self._stack) if r is not None), None)
            if back is not None:
                self._enter(back, "(back)")

    def returns(self) -> int:
        seen: set[str] = set()
        count = 0
        for room, _ in self.stays:
            count += room in seen
            seen.add(room)
        return count

    @contextlib.contextmanager
    def recording(self):
        previous = sys.getprofile()
        sys.setprofile(self._hook)
        try:
            yield self
        finally:
            sys.setprofile(previous)

    def write(self, path: str) -> None:
        Path(path).write_text(json.dumps({"stays": [list(s) for s in self.stays], "returns": self.returns()}))


@contextlib.contextmanager
def pair():
    """Around one timed pair: its walk written to KBENCH_JUDGE_WALK (the last pair's stays)."""
    if not PATH:
        yield
        return
    w = Walk()
    try:
        with w.recording():
            yield
    finally:
        w.write(PATH)
