"""The judge's handle on its candidate process: start it, ask, time the asking.

Every request is timed here, from outside, and the candidate runs only while a
request is out: it is continued right before the request and stopped on its
reply (freeze.py). A reply that is not a well-formed message, or a process
that dies, becomes a CandidateGone with the reason; the judge turns it into a
status.
"""
from __future__ import annotations

import math
import os
import select
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from typing import Any, Callable, Optional


from ..shared import channel, sandbox
from ..shared.isolate import describe_exit
from .freeze import Freezer, process_cpu_seconds
from .spawn import Spawned, spawn_candidate

_perf = time.perf_counter
# How often a request past its limit looks again whether the candidate still runs a
# child process (a compiler), which moves the limit on (see Remote.request).
BUILD_POLL_S = 2.0
# Files counted in a candidate's compile caches at most (Remote.compile_files): a JIT writes
# a few per kernel it compiles; the count is read every BUILD_POLL_S past a limit.
MAX_CACHE_FILES = 4096
# How often a first call samples whether the GPU is busy (BusyRule).
BUSY_POLL_S = 0.5
# How often a request with a `watch` calls it while its reply is out (a held batch's queueing).
WATCH_POLL_S = 0.002
# How long a timed request's reply is waited for by polling without sleeping, at most
# (a GPU host has cores to spare; a longer batch meets the scheduler's wake-up once).
SPIN_S = 0.25
# How long the end of a task waits for its killed candidate to be reaped before
# the verdict goes out anyway.
CLOSE_WAIT_S = 2.0
# After a broken channel: how long to wait for the candidate to end before asking the
# kernel whether it is dying at all, and how long one that is dying is waited for.
DEATH_LOOK_S, DEATH_WAIT_S = 0.5, 5.0


class CandidateGone(Exception):
    """The candidate process died or broke the protocol; the message says how."""


class CandidateHung(Exception):
    """The candidate did not answer within the request's limit and was killed."""

    def __init__(self, ran_s: float, busy_s: float | None = None, cpu_used_s: float | None = None):
        super().__init__(f"no reply after {ran_s:.1f} s")
        self.ran_s = ran_s
        self.busy_s = busy_s  # set when it was the GPU-busy rule that ended the request
        self.cpu_used_s = cpu_used_s  # the CPU it used in the request, where a CpuRule read it


@dataclass(frozen=True)
class CpuRule:
    """More time for a request past its wall limit while the candidate computes (a first
    call compiling on a busy host): it runs on while `used` (CPU seconds of the candidate
    and all it started) grows by at least `min_share` of a core between two looks, until
    it has grown by `cpu_s` over the request (limits.PROGRESS_SHARE). Past `cpu_s` it
    runs on only while it also writes its compile caches: `files` (how many files they
    hold) grew within the last `quiet_s` (a JIT writes each stage of each kernel it
    compiles there; a loop that only computes writes nothing)."""

    cpu_s: float
    min_share: float
    used: Callable[[], float]
    files: Optional[Callable[[], int]] = None
    quiet_s: float = 0.0


class _Progress:
    """One request's readings of a CpuRule."""

    def __init__(self, rule: CpuRule, t0: float):
        self.rule = rule
        self.start = self.last = rule.used()
        self.t_last = t0
        self.files = rule.files() if rule.files is not None else 0
        self.t_files = t0 - rule.quiet_s - 1.0  # no write seen yet

    def computing(self, now: float) -> bool:
        used = self.rule.used()
        share = (used - self.last) / max(now - self.t_last, 1e-3)
        self.last, self.t_last = used, now
        if self.rule.files is not None:  # every look: the time of the last write is what counts
            files = self.rule.files()
            if files > self.files:
                self.files, self.t_files = files, now
        if share < self.rule.min_share:
            return False
        if used - self.start < self.rule.cpu_s:
            return True
        return self.rule.files is not None and now - self.t_files <= self.rule.quiet_s

    def spent(self) -> float:
        return self.last - self.start


@dataclass(frozen=True)
class BusyRule:
    """A shorter limit for a request while the GPU is busy (a first call's, limits.py):
    hung once `after_s` have passed and `sample` has said busy, with no child process
    running, for the last `streak_s`. `sample` returns None where it cannot tell,
    which ends the rule for this request."""

    after_s: float
    streak_s: float
    sample: Callable[[], Optional[bool]]


class _GpuHeld(TimeoutError):
    def __init__(self, busy_s: float):
        super().__init__("the GPU has been busy past the request's limit")
        self.busy_s = busy_s


class CandidateError(Exception):
    """The solution raised inside a request; kind is 'exception', 'out_of_memory' or
    'compile_error' (a Triton kernel that does not compile)."""

    def __init__(self, message: str, kind: str, tampered: list):
        super().__init__(message)
        self.kind, self.tampered = kind, tampered


class Remote:
    """A candidate process started now (it imports torch while the judge loads the
    problem) in its own session and scratch folder; killed with the judge."""

    def __init__(self, spawned: Spawned | None = None):
        """`spawned`: the candidate process, if it was started already (judge/__main__.py)."""
        spawned = spawned or spawn_candidate()
        self.proc, self.sock, self.scratch = spawned.proc, spawned.sock, spawned.scratch
        self.freezer = Freezer(self.proc.pid)
        self.last_wall_s = 0.0

    def request(self, header: dict, fds: list[int] = (), limit_s: float | None = None,
                build_s: float | None = None, busy: BusyRule | None = None,
                spin: bool = False, cpu: CpuRule | None = None,
                watch: Callable[[], None] | None = None) -> tuple[dict, list[bytes]]:
        """Send one request, wait for its reply; the wall time is in last_wall_s.
        Past `limit_s` seconds (the judge's clock, from the send) the candidate is
        killed and CandidateHung raised: no reply, however it trickles in, moves that.
        With `build_s`, a candidate that is still running a child process when the
        limit passes (a compiler: an import or a first call may build) gets more
        time, BUILD_POLL_S at a time, up to build_s from the send, and so does one that
        is still computing (`cpu`: CpuRule). With `busy`, it is
        hung sooner while the GPU is busy without a pause (BusyRule). The candidate
        is continued first and stopped again (signalled, not waited for: see
        wait_stopped) once its reply is in. With `spin`, the reply is waited for by
        polling without sleeping (a timed request: no wake-up in its measure). `watch`
        is called every WATCH_POLL_S while the reply is out (it may act, not decide)."""
        self.freezer.thaw()
        t0 = _perf()
        progress = _Progress(cpu, t0) if cpu is not None and limit_s is not None and build_s is not None else None
        try:
            if limit_s is None:
                channel.send(self.sock, header, fds=list(fds))
                reply, blobs, extra_fds = channel.recv(self.sock)
            else:
                channel.send(_Bounded(self.sock, t0 + limit_s), header, fds=list(fds))
                if spin:
                    self._spin(t0 + min(limit_s, SPIN_S))
                deadline = self._wait_for_reply(t0, t0 + limit_s, build_s, busy, progress, watch)
                reply, blobs, extra_fds = channel.recv(_Bounded(self.sock, deadline))
        except TimeoutError as e:
            self.last_wall_s = _perf() - t0
            self.kill()
            raise CandidateHung(self.last_wall_s, getattr(e, "busy_s", None),
                                progress.spent() if progress is not None else None) from None
        except (channel.ChannelError, OSError) as e:
            self.last_wall_s = _perf() - t0
            self.freezer.stop()
            raise CandidateGone(self.death(str(e))) from None
        self.last_wall_s = _perf() - t0
        self.freezer.stop()
        self.sock.settimeout(None)
        for fd in extra_fds:  # the candidate has no reason to send descriptors
            os.close(fd)
        if "error" in reply:
            raise CandidateError(str(reply["error"]), str(reply.get("kind")), _strings(reply.get("tampered")))
        return reply, blobs

    def _spin(self, until: float) -> None:
        """Poll for the reply's first byte without sleeping, until `until`."""
        poller = select.poll()
        poller.register(self.sock, select.POLLIN)
        while _perf() < until and not poller.poll(0):
            pass

    def _wait_for_reply(self, t0: float, deadline: float, build_s: float | None,
                        busy: BusyRule | None = None, progress: _Progress | None = None,
                        watch: Callable[[], None] | None = None) -> float:
        """Wait until the reply starts (or the channel closes); returns the deadline the
        rest of the reply must meet. Nothing is read here, so waiting on is safe."""
        poller = select.poll()
        poller.register(self.sock, select.POLLIN)
        busy_since = None  # when the GPU's current unbroken run of busy samples began
        while True:
            left = deadline - _perf()
            if left > 0:
                wait_s = left if busy is None else min(left, BUSY_POLL_S)
                if watch is not None:
                    wait_s = min(wait_s, WATCH_POLL_S)
                if poller.poll(math.ceil(wait_s * 1e3)):
                    return deadline
                if watch is not None:
                    watch()
                if busy is not None:
                    held = busy.sample()
                    if held is None:
                        busy = None  # the counter cannot be read: the request's own limit stands
                        continue
                    now = _perf()
                    busy_since = (busy_since or now) if held and not self.building() else None
                    if busy_since is not None and now - t0 >= busy.after_s and now - busy_since >= busy.streak_s:
                        raise _GpuHeld(now - busy_since)
                continue
            if build_s is None or _perf() - t0 >= build_s:
                raise TimeoutError("the request's limit has passed")
            # Each look asks both: a compile's CPU time is the reference for the next look.
            computing = progress is not None and progress.computing(_perf())
            if not (self.building() or computing):
                raise TimeoutError("the request's limit has passed")
            deadline = min(_perf() + BUILD_POLL_S, t0 + build_s)

    def wait_stopped(self) -> None:
        """Until the candidate and all it started have stopped (after a reply)."""
        self.freezer.wait_stopped()

    def cpu_used(self) -> float:
        """CPU seconds the candidate (all its threads) and every process it started
        (their threads, and those they reaped; those it reaped itself, and detached)
        have used so far: the kernel's accounting, not the candidate's word."""
        return process_cpu_seconds(self.proc.pid) + sandbox.started_by(os.getpid(), self.proc.pid)

    def compile_files(self) -> int:
        """Files in the candidate's compile caches (Triton's and inductor's, in its scratch
        folder), counted up to MAX_CACHE_FILES without following links: a JIT's progress
        that the kernel's file system shows. The candidate can write there, so this buys
        it at most what a child process does (HANG_BUILD_S); a count held at the cap
        gives no more time."""
        env = sandbox.scratch_env(self.scratch)
        return _count_files([env["TRITON_CACHE_DIR"], env["TORCHINDUCTOR_CACHE_DIR"]], MAX_CACHE_FILES)

    def building(self) -> bool:
        """Whether the candidate runs a child process now: torch's extension builder
        runs ninja and the compiler, Triton runs ptxas, inductor its compile workers.
        The kernel's process table says so, not the candidate."""
        return bool(sandbox.children(self.proc.pid))

    def death(self, fallback: str) -> str:
        """How the process ended, in words, waiting for it to finish dying (up to
        DEATH_WAIT_S: a crash may tear down a GPU context for seconds), but not for
        one that is not dying: a candidate that wrote garbage into the channel and
        lives on waited out the whole wait (13_forged_verdict/fd_overwrite.py: 5 s)."""
        for wait_s in (DEATH_LOOK_S, DEATH_WAIT_S):
            try:
                rc = self.proc.wait(timeout=wait_s)
                return f"the candidate process {'was ' if rc < 0 else ''}{describe_exit(rc)}"
            except subprocess.TimeoutExpired:
                if not sandbox.exiting(self.proc.pid):
                    break
        return f"the candidate broke the channel ({fallback})"

    def kill(self) -> None:
        """Kill the candidate's process group now, without waiting: a process stuck
        in the GPU driver may take long to die (close waits for it, boundedly, and
        sweeps what it started)."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.proc.kill()

    def close(self, wait_s: float = CLOSE_WAIT_S) -> None:
        """End the candidate and everything it started (its session's group and
        any orphan, which this subreaper inherits) now: its work is done, and a
        polite exit would only wait for it (it skips its own teardown either way).
        Waits at most `wait_s` for it to be reaped: a process killed while its
        kernel spins on the GPU dies only when the driver lets it go, and then
        kbench's own sweep reaps it. The judge calls this after its verdict has
        left (main.py): kill() alone comes before it."""
        self.kill()
        self.freezer.close()
        sandbox.wait_exit(self.proc, wait_s)
        # Its group's other members and any orphan it left; not the candidate itself
        # while it is still dying (waiting on it here would be the wait just bounded).
        sandbox.kill_descendants(exclude={self.proc.pid} if self.proc.poll() is None else frozenset(),
                                 deadline_s=wait_s)
        self.sock.close()
        self.remove_scratch()

    def remove_scratch(self) -> None:
        """The candidate's scratch folder, once it is killed (its Triton and inductor
        caches: a session of thousands of tasks would keep them all until kbench exits)."""
        import shutil

        shutil.rmtree(self.scratch, ignore_errors=True)


def _strings(value: Any) -> list[str]:
    return [str(v)[:200] for v in value[:8]] if isinstance(value, list) else []


class _Bounded:
    """The judge's socket with one deadline over a whole request: each send and
    receive channel.py makes may wait only for what is left of it, so a reply sent
    a byte at a time cannot stretch the limit. TimeoutError once it has passed."""

    def __init__(self, sock: socket.socket, deadline: float):
        self.sock, self.deadline = sock, deadline

    def _arm(self) -> None:
        left = self.deadline - _perf()
        if left <= 0:
            raise TimeoutError("the request's limit has passed")
        self.sock.settimeout(left)

    def sendmsg(self, *args):
        self._arm()
        return self.sock.sendmsg(*args)

    def sendall(self, *args):
        self._arm()
        return self.sock.sendall(*args)

    def recvmsg(self, *args):
        self._arm()
        return self.sock.recvmsg(*args)

    def recv_into(self, *args):
        self._arm()
        return self.sock.recv_into(*args)


def _count_files(tops: list[str], cap: int) -> int:
    """Plain files beneath `tops`, links neither followed nor counted; at most `cap`."""
    count, stack = 0, list(tops)
    while stack and count < cap:
        try:
            with os.scandir(stack.pop()) as entries:
                for entry in entries:
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(entry.path)
                    elif entry.is_file(follow_symlinks=False):
                        count += 1
                        if count >= cap:
                            break
        except OSError:  # not there yet, or gone: nothing to count
            continue
    return count
