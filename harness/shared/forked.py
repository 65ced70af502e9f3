"""A process made by fork, handled as a subprocess.Popen is: pid, poll, wait, kill.

Stdlib only: the judge uses it for a candidate it forks (judge/spawn.py) before
anything else is imported, and kbench for a judge a template forked
(templates.py), which is kbench's child once reparented to it, kbench being a
child subreaper. Exit codes read as Popen's do: negative for a signal.
"""
from __future__ import annotations

import ctypes
import os
import select
import signal
import subprocess
import sys
import threading
import time
import traceback
from typing import Callable, NoReturn

# The code of a child that was reaped by someone else: its real code is lost.
REAPED_ELSEWHERE = 255


class ForkedProcess:
    """A child of this process, known by pid (Popen's interface, as far as kbench uses it)."""

    def __init__(self, pid: int, args=(), stdin=None, stdout=None):
        self.pid, self.args, self.stdin, self.stdout = pid, list(args), stdin, stdout
        self.returncode: int | None = None
        self._lock = threading.Lock()

    def poll(self) -> int | None:
        with self._lock:
            if self.returncode is None:
                try:
                    pid, status = os.waitpid(self.pid, os.WNOHANG)
                except ChildProcessError:
                    self.returncode = REAPED_ELSEWHERE
                else:
                    if pid:
                        self.returncode = os.waitstatus_to_exitcode(status)
            return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        """Woken by the exit itself (a pidfd), as sandbox.wait_exit is; polls where
        the kernel has no pidfds. Raises subprocess.TimeoutExpired as Popen does."""
        end = None if timeout is None else time.monotonic() + timeout
        try:
            fd = os.pidfd_open(self.pid)
        except (AttributeError, OSError):
            fd = None
        try:
            while self.poll() is None:
                left = None if end is None else end - time.monotonic()
                if left is not None and left <= 0:
                    raise subprocess.TimeoutExpired(self.args, timeout)
                if fd is not None:
                    select.select([fd], [], [], left)
                else:
                    time.sleep(min(0.005, left) if left is not None else 0.005)
        finally:
            if fd is not None:
                os.close(fd)
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:  # never signal a pid that may have been reused
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:
                pass

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


def run_then_exit(body: Callable[[], None]) -> NoReturn:
    """The rest of a forked child's life: `body`, then _exit with its code (SystemExit's,
    0 on return, 1 on any other exception, whose traceback goes to the log). Never the
    parent's interpreter teardown, atexit hooks or finally blocks up its stack."""
    code = 1
    try:
        body()
        code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
    except BaseException:  # noqa: BLE001 - said in the log; the exit code says the rest
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def close_fds_except(*keep: int) -> None:
    """Close every descriptor from 3 up but `keep` (close_range where the kernel has it)."""
    low = 3
    for fd in sorted(k for k in keep if k >= 3):
        os.closerange(low, fd)
        low = fd + 1
    os.closerange(low, os.sysconf("SC_OPEN_MAX"))


def thread_count() -> int:
    """Threads of this process, by the kernel's count."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return threading.active_count()


def set_command_line(*args: str) -> None:
    """Rewrite this process's command line (/proc/<pid>/cmdline, what ps and kbench's own
    tools read) in place, as far as the original's room allows: a forked process keeps
    the one it was forked from (`-m harness.judge.template`), and a judge or candidate
    should read as the exec'd one it replaces. Python keeps no pointer into that memory
    once started. Best effort: a kernel that hides the addresses leaves it as it was."""
    try:
        with open("/proc/self/stat", "rb") as f:
            fields = f.read().rpartition(b")")[2].split()
        start, end = int(fields[45]), int(fields[46])  # arg_start, arg_end (fields 48 and 49)
    except (OSError, ValueError, IndexError):
        return
    if not start or end <= start:
        return
    room = end - start
    data = b"\0".join(a.encode() for a in args)[: room - 1].ljust(room, b"\0")
    ctypes.memmove(start, data, room)
