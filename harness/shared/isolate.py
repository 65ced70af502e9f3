"""The only module of kbench's own process that starts processes.

Each child gets its own process group (so a timeout kills nvcc, ninja and any
thread or grandchild with it), its stdout and stderr go to a size-capped log,
and its death, whatever form it takes, becomes a ChildOutcome, never an
exception in the parent. A judge child also gets a result pipe: JSON lines
that only it can write (see harness/judge/main.py).

kbench is a child subreaper: a process a solution starts and detaches (a
double fork, a new session) is reparented here rather than to init, and
every child that finishes is followed by a sweep that kills such orphans.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from . import sandbox, templates

LOG_HEAD_BYTES = 2 * 1024 * 1024  # what a log keeps from the start of the output
LOG_TAIL_BYTES = 256 * 1024  # and from its end: the last lines often hold the error


@dataclass(frozen=True)
class ChildOutcome:
    returncode: int | None  # None when killed for the timeout
    timed_out: bool
    seconds: float
    dropped_log_bytes: int
    messages: tuple = ()  # JSON objects the child wrote to its result pipe
    after_result_s: float | None = None  # from a judge's result to finish's return: its teardown

    @property
    def death(self) -> str:
        """How the child ended, in words: 'exited with code 3', 'killed by SIGSEGV'."""
        return "timed out" if self.timed_out else describe_exit(self.returncode)


def describe_exit(rc: int | None) -> str:
    """A return code in words: 'exited with code 3', 'killed by SIGSEGV'."""
    if rc is not None and rc < 0:
        try:
            return f"killed by {signal.Signals(-rc).name}"
        except ValueError:
            return f"killed by signal {-rc}"
    return f"exited with code {rc}"


class _CappedLog:
    """Drains a pipe, keeping its head and tail only, so a child that writes
    64 MB (or forever) neither blocks nor fills the disk. The log file is named
    and written at close, so a child may start before its log is known."""

    def __init__(self, pipe):
        self.pipe, self.dropped = pipe, 0
        self.head, self.tail = bytearray(), bytearray()
        self.thread = threading.Thread(target=self._drain, daemon=True)
        self.thread.start()

    def _drain(self) -> None:
        for chunk in iter(lambda: self.pipe.read(65536), b""):
            room = LOG_HEAD_BYTES - len(self.head)
            self.head += chunk[:room]
            rest = chunk[room:] if room < len(chunk) else b""
            if rest:
                self.tail += rest
                if len(self.tail) > LOG_TAIL_BYTES:
                    self.dropped += len(self.tail) - LOG_TAIL_BYTES
                    del self.tail[: len(self.tail) - LOG_TAIL_BYTES]

    def close(self, path: Path | None, timeout: float = 10.0) -> int:
        self.thread.join(timeout)
        if path is not None:
            with open(path, "ab") as f:
                f.write(self.head)
                if self.dropped:
                    f.write(f"\n[kbench: {self.dropped} bytes of output dropped here]\n".encode())
                f.write(self.tail)
        return self.dropped


class _ResultPipe:
    """Reads JSON lines from a child's result pipe (at most MAX_RESULT_BYTES)."""

    MAX_RESULT_BYTES = 64 << 20

    def __init__(self):
        self.read_fd, self.write_fd = os.pipe()
        self.messages: list[dict] = []
        self.last_at = time.monotonic()  # when the last message came (or the pipe was made)
        self.thread = threading.Thread(target=self._drain, daemon=True)

    def start(self) -> None:
        os.close(self.write_fd)  # the child holds the only write end now
        self.thread.start()

    def _drain(self) -> None:
        got = 0
        with os.fdopen(self.read_fd, "rb") as f:
            for line in f:
                got += len(line)
                if got > self.MAX_RESULT_BYTES:
                    break
                try:
                    obj = json.loads(line)
                except ValueError:
                    continue
                if isinstance(obj, dict):
                    self.messages.append(obj)
                    self.last_at = time.monotonic()

    def close(self, timeout: float = 10.0) -> tuple:
        self.thread.join(timeout)
        return tuple(self.messages)


_live: set[subprocess.Popen] = set()
_reaper_ready = False
# A child is in _live from the moment it exists: a sweep in another thread (parallel
# builds, several GPUs) between Popen and the add would take it for an orphan.
_spawn_lock = threading.Lock()


def _become_reaper() -> None:
    """Once per kbench process: orphans of any child come back here to be killed."""
    global _reaper_ready
    if not _reaper_ready:
        sandbox.become_subreaper()
        _reaper_ready = True


def sweep_orphans() -> int:
    """Kill every child of kbench that is not a child it started and still uses:
    processes a solution detached (reparented here, kbench being a subreaper)."""
    with _spawn_lock:
        return sandbox.kill_descendants(exclude={p.pid for p in list(_live)})


class Child:
    """`python args...` in a new process group, started now. A child may be
    started before its work is known (it imports torch meanwhile, seconds on a
    GPU host) and wait for one line on stdin; `finish` sends that line, names
    the log, and waits at most `timeout` seconds from then."""

    def __init__(self, args: list[str], env: dict[str, str] | None = None, cwd: str | None = None,
                 result_pipe: bool = False, forkable: bool = False, template_wait_s: float = 0.0):
        """`forkable`: a judge (`-m harness.judge` with a result pipe), which a template
        forks where one is ready (templates.py), else it is exec'd; `template_wait_s`: how
        long a judge needed now waits for the template's imports rather than be exec'd."""
        _become_reaper()
        self.results = _ResultPipe() if result_pipe else None
        forking = forkable and self.results is not None
        judge_env = dict(os.environ if env is None else env) if forking else {}
        if forking and template_wait_s > 0:
            with _spawn_lock:
                templates.start(judge_env, _live.add)
            templates.wait_ready(judge_env, template_wait_s)
        with _spawn_lock:
            proc = self._fork(judge_env, cwd) if forking else None
            if proc is None:
                proc = subprocess.Popen(
                    [sys.executable, *args, *([str(self.results.write_fd)] if self.results is not None else [])],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,  # own process group: kill it whole, and Ctrl-C is ours to handle
                    env=env,
                    cwd=cwd,
                    pass_fds=(self.results.write_fd,) if self.results is not None else (),
                )
                _live.add(proc)
            self.proc = proc
        if self.results is not None:
            self.results.start()
        self.log = _CappedLog(self.proc.stdout)
        self.result_seen: float | None = None

    def _fork(self, env: dict[str, str], cwd: str | None):
        """The judge forked by a template, with pipes made here as Popen would make
        them; None where it must be exec'd."""
        stdin_r, stdin_w = os.pipe()
        out_r, out_w = os.pipe()
        proc = templates.fork_judge(env, cwd, (stdin_r, out_w, self.results.write_fd), _live.add)
        os.close(stdin_r)
        os.close(out_w)
        if proc is None:
            os.close(stdin_w)
            os.close(out_r)
            return None
        proc.stdin, proc.stdout = os.fdopen(stdin_w, "wb"), os.fdopen(out_r, "rb")
        return proc

    def tell(self, line: str) -> None:
        """One line on its stdin, ahead of the one `finish` sends."""
        try:
            self.proc.stdin.write(line.encode() + b"\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            pass  # it died waiting; `finish` will say how

    def finish(self, log_path: Path, timeout: float, line: str | None = None,
               stop: Callable[[], bool] | None = None) -> ChildOutcome:
        """`stop`: polled while the child runs; when it says so the child's group is
        killed and its outcome is what it had said by then (a build process whose
        extensions are built and whose import goes on: harness/build/stage.py)."""
        log_path.parent.mkdir(parents=True, exist_ok=True)
        start = time.monotonic()
        proc = self.proc
        try:
            if line is not None:
                proc.stdin.write(line.encode() + b"\n")
            proc.stdin.close()
        except (BrokenPipeError, OSError):
            pass  # it died waiting; its exit code says how
        timed_out = False
        try:
            self._wait(timeout, stop)
        except subprocess.TimeoutExpired:
            timed_out = True
            kill_group(proc)
            proc.wait()
        finally:
            if proc.returncode is None:  # interrupted (Ctrl-C): take the child down with us
                kill_group(proc)
                proc.wait()
            _live.discard(proc)
        sweep_orphans()
        messages = self.results.close() if self.results is not None else ()
        dropped = self.log.close(log_path)
        end = time.monotonic()
        return ChildOutcome(
            returncode=None if timed_out else proc.returncode,
            timed_out=timed_out,
            seconds=end - start,
            dropped_log_bytes=dropped,
            messages=messages,
            after_result_s=None if self.result_seen is None else round(end - self.result_seen, 3),
        )

    def _wait(self, timeout: float, stop: Callable[[], bool] | None = None) -> None:
        """Until the child exits, `stop` says so, or, for a judge, its result has
        arrived (what it does after that is cleanup, which killing its group does faster)."""
        if self.results is None and stop is None:
            self.proc.wait(timeout=timeout)
            return
        deadline = time.monotonic() + timeout
        while self.proc.poll() is None:
            if stop is not None and stop():
                kill_group(self.proc)
                self.proc.wait()
                return
            if self.results is not None and any("result" in m for m in list(self.results.messages)):
                # A judge sends its result once it has killed its candidate; what it
                # would do after is its own teardown, which a kill ends sooner, and the
                # sweep below reaps the candidate too. Not left to a thread while the
                # next task starts: on an H100 that moved the ~0.1 s of its CUDA
                # context's teardown into the next task's check.
                self.result_seen = time.monotonic()
                kill_group(self.proc)
                self.proc.wait()
                return
            if time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(self.proc.args, timeout)
            # A judge's result is handed on within 5 ms; a build's progress (stop) needs no such haste,
            # and dozens of builds polling at 200 Hz would take the interpreter from the lanes.
            time.sleep(0.005 if stop is None else 0.1)

    def discard(self) -> None:
        """Kill a child that was started and never used."""
        kill_group(self.proc)
        self.proc.wait()
        _live.discard(self.proc)
        if self.results is not None:
            self.results.close(1.0)
        self.log.close(None)


def run_child(
    args: list[str], log_path: Path, timeout: float, env: dict[str, str] | None = None, cwd: str | None = None
) -> ChildOutcome:
    """Run `python args...` in a new process group; wait at most `timeout` seconds."""
    return Child(args, env, cwd).finish(log_path, timeout)


def kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def end_templates() -> None:
    """End the judge templates (templates.py): the run that used them is over."""
    for proc in templates.close_all():
        _live.discard(proc)


def kill_all() -> None:
    """Kill every child still running (called when the run is interrupted)."""
    for proc in list(_live):
        kill_group(proc)


def child_env(env: dict[str, str]) -> dict[str, str]:
    """Children run `python -m harness...` from the user's folder (solution paths
    stay relative to it), so the package must be importable from anywhere."""
    root = str(Path(sys.modules["harness"].__file__).resolve().parent.parent)  # the folder holding the package
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
    return env
