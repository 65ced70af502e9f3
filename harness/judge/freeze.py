"""The candidate runs only while the judge waits for its reply.

After every reply the judge stops (SIGSTOP) the candidate and every process it
started, and continues them (SIGCONT) right before the next request. So
nothing of the solution's runs while the judge times the reference (no
co-tenant thread or process on the host or the GPU), while it reads the
candidate's outputs (no output finished after the reply), or between two
timed batches (no work moved out of the time the judge measures).

Who is frozen: every descendant of the judge outside the judge's own session.
The candidate starts in a session of its own, the judge is a child subreaper
(whatever the candidate orphans comes back to it), and no process can move
into another session, so a double fork, setsid or a daemon stays in the set;
the judge's own helpers (torch.compile's workers for --compile-baseline) are
in its session and are not frozen.

Freezing does not stop work already queued on the GPU: judge/drain.py waits
that out, observed from the judge.
"""
from __future__ import annotations

import ctypes
import os
import signal
import time

from ..shared import sandbox

_libc = ctypes.CDLL(None, use_errno=True)

STOP_WAIT_S = 2.0  # a thread in the driver stops when it returns to user space: milliseconds


class Freezer:
    def __init__(self, candidate_pid: int):
        self.candidate = candidate_pid
        self.me = os.getpid()
        self.own_session = os.getsid(0)
        # Members found so far, each by a pidfd: a member that ends and is reaped frees its
        # pid for any other process, and a signal by pid could then stop a stranger.
        self.known: dict[int, _Handle] = {}
        self._learn([candidate_pid])
        self.stopped: list[int] = []  # signalled with SIGSTOP and not continued since
        self.unstoppable: list[int] = []  # members that did not stop within STOP_WAIT_S, for a note

    def members(self) -> list[int]:
        """The candidate and every process it started, now (a walk of the process
        tree from the judge through /proc's child lists)."""
        found, todo = [], [self.me]
        while todo:
            pid = todo.pop()
            for child in _children(pid):
                if child == self.me or child in found:
                    continue
                if child == self.candidate or _session(child) not in (None, self.own_session):
                    found.append(child)
                    todo.append(child)
        return found

    def _learn(self, pids: list[int]) -> None:
        for pid in pids:
            if pid not in self.known:
                self.known[pid] = _Handle(pid)

    def stop(self) -> None:
        """Send SIGSTOP to the members known so far (the candidate, and whatever the
        last wait_stopped found): microseconds, so that it can end a timed request.
        Does not wait for them to stop, nor look for new members: wait_stopped does."""
        for pid, handle in list(self.known.items()):
            if pid not in self.stopped:
                if handle.signal(signal.SIGSTOP):
                    self.stopped.append(pid)
                else:
                    handle.close()
                    del self.known[pid]

    def wait_stopped(self) -> float:
        """Stop every member, again until no member escaped by forking between the
        listing and its signal, and wait until all have stopped (all their threads);
        seconds waited."""
        t0 = time.perf_counter()
        for _ in range(8):
            fresh = [p for p in self.members() if p not in self.stopped]
            if not fresh:
                break
            self._learn(fresh)
            self.stop()
        deadline = t0 + STOP_WAIT_S
        waiting = list(self.stopped)
        while waiting and time.perf_counter() < deadline:
            waiting = [p for p in waiting if not _stopped(p, p == self.candidate)]
            if waiting:
                time.sleep(0)  # yield: on a busy host the threads to stop need the core
        self.unstoppable = waiting
        return time.perf_counter() - t0

    def cpu_seconds(self) -> float:
        """CPU time the candidate and every process it started have used (each process's
        CPU clock: all its threads, those that ended included)."""
        return sum(self.cpu_by_member().values())

    def cpu_by_member(self) -> dict[int, float]:
        """Each of those processes' CPU clock now, by pid: between two readings a member
        that is gone takes its CPU out of a sum, but not out of a comparison by pid."""
        return {pid: process_cpu_seconds(pid) for pid in self.members()}

    def thaw(self) -> None:
        for pid in self.stopped:
            if pid in self.known:
                self.known[pid].signal(signal.SIGCONT)
        self.stopped = []

    def close(self) -> None:
        for handle in self.known.values():
            handle.close()
        self.known.clear()


def cpu_used(before: dict[int, float], after: dict[int, float]) -> float:
    """CPU seconds used between two Freezer.cpu_by_member readings (a process that
    started between them counts whole)."""
    return sum(max(cpu - before.get(pid, 0.0), 0.0) for pid, cpu in after.items())


def process_cpu_seconds(pid: int) -> float:
    """A process's CPU clock (clock_getcpuclockid): nanosecond resolution, unlike the
    10 ms ticks of /proc/<pid>/stat; 0.0 once it is gone."""
    clock = ctypes.c_int()
    if _libc.clock_getcpuclockid(pid, ctypes.byref(clock)) != 0:
        return 0.0
    try:
        return time.clock_gettime(clock.value)
    except OSError:
        return 0.0


class _Handle:
    """A process, by pidfd where the kernel has them (5.3+), else by pid."""

    def __init__(self, pid: int):
        self.pid = pid
        try:
            self.fd: int | None = os.pidfd_open(pid)
        except (AttributeError, OSError):
            self.fd = None

    def signal(self, sig: int) -> bool:
        """Send `sig`; False once the process is gone."""
        try:
            if self.fd is not None:
                signal.pidfd_send_signal(self.fd, sig)
            else:
                os.kill(self.pid, sig)
            return True
        except (ProcessLookupError, PermissionError):
            return False

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def _children(pid: int) -> list[int]:
    """Children of `pid` from /proc/<pid>/task/<tid>/children (each thread's own);
    where the kernel lacks those files, from a scan of every process."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []
    out: list[int] = []
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                out += [int(x) for x in f.read().split()]
        except FileNotFoundError:
            if not os.path.exists(f"/proc/{pid}/task/{tid}"):
                continue  # the thread ended
            return sandbox.children(pid)  # no CONFIG_PROC_CHILDREN
        except OSError:
            continue
    return out


def _session(pid: int) -> int | None:
    try:
        return os.getsid(pid)
    except OSError:
        return None


def _stopped(pid: int, own_child: bool) -> bool:
    """Whether every thread of `pid` has stopped (or the process is gone). The
    judge's own children report their stop to waitid once the last thread has
    stopped; for the others each thread's state is read."""
    if own_child:
        try:
            # WNOWAIT: the report stays; SIGCONT clears it, so it never describes an earlier stop.
            return os.waitid(os.P_PID, pid, os.WSTOPPED | os.WNOHANG | os.WNOWAIT) is not None or not _alive(pid)
        except ChildProcessError:
            pass  # not our child after all (or already reaped): read /proc
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return True
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                state = sandbox._fields(f.read())[0]  # noqa: SLF001 - the stat parser lives there
        except (OSError, ValueError):
            continue
        if state not in ("T", "t", "Z", "X"):
            return False
    return True


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return sandbox._fields(f.read())[0] not in ("Z", "X")  # noqa: SLF001
    except OSError:
        return False
