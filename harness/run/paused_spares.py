"""On --device cpu, the judges started ahead stand still while a task is timed.

A CPU task's judge times both sides by their processes' CPU time, and a process
importing torch on the other core slows them both: caches and memory are shared
(on the 2-core CI box a reference read 1.65 ms in one task and 1.08 ms in the next
while the other pytest worker ran kbench). Without a judge started ahead, each task
waited for its own: judge_wait summed 190 s of the CPU adversarial run's 450 s
(110 tasks, 2026-11-28). So the lane starts one ahead, and while the task's judge
is in its timing phase (its "time" message) the one ahead is stopped with SIGSTOP,
its candidate too (its own session): neither has run solution code, and neither
holds anything the task needs. They go on at the next phase and when the task ends.

A candidate may not signal processes outside its sandbox where Landlock scopes
signals (ABI 6, Linux 6.12); on older kernels one could continue them, and then
runs beside both sides' batches alike.
"""
from __future__ import annotations

import os
import signal
from pathlib import Path

from ..shared.isolate import Child


def _groups(pid: int) -> list[int]:
    """The process group of `pid` and those of its children (a judge's candidate)."""
    groups = []
    try:
        groups.append(os.getpgid(pid))
        for task in Path(f"/proc/{pid}/task").iterdir():
            for child in (task / "children").read_text().split():
                groups.append(os.getpgid(int(child)))
    except (OSError, ValueError):  # gone meanwhile
        pass
    return list(dict.fromkeys(groups))


class PausedSpares:
    """Called at each poll of a task's judge (isolate.Child.finish's `watch`)."""

    def __init__(self, judge: Child, spares: list[Child]):
        self.judge, self.spares = judge, spares
        self.seen = 0
        self.stopped: list[int] = []  # process groups, in the order stopped

    def __call__(self) -> None:
        messages = self.judge.results.messages if self.judge.results is not None else []
        if len(messages) == self.seen:
            return
        new, self.seen = messages[self.seen:], len(messages)
        for m in new:
            if m.get("phase") == "time":
                self._stop()
            elif "phase" in m or "result" in m:
                self._go_on()

    def _stop(self) -> None:
        if self.stopped:
            return
        for spare in self.spares:
            if spare.proc.poll() is not None:
                continue
            _signal(spare.proc.pid, signal.SIGSTOP, self.stopped)  # first: it starts no child meanwhile
            for group in _groups(spare.proc.pid)[1:]:
                _signal(group, signal.SIGSTOP, self.stopped)

    def _go_on(self) -> None:
        for group in reversed(self.stopped):
            try:
                os.killpg(group, signal.SIGCONT)
            except (ProcessLookupError, PermissionError):
                pass
        self.stopped = []

    def close(self) -> None:
        self._go_on()


def _signal(group: int, sig: int, into: list[int]) -> None:
    try:
        os.killpg(group, sig)
        into.append(group)
    except (ProcessLookupError, PermissionError):
        pass
