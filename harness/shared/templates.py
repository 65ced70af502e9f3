"""kbench's side of the judge templates (harness/judge/template.py): judges forked, not exec'd.

One template per environment a run's judges are started with, less
CUDA_VISIBLE_DEVICES (a template serves every GPU of a host). It is started at
the first judge asked for and imports torch meanwhile. A judge started ahead of
its task never waits for it: asked for before it is ready, or after it failed,
it is exec'd as before. A judge a task needs at once waits for its imports
(wait_ready), which take about what an exec'd judge's would. Only isolate.Child
calls this module, with its spawn lock held while it forks: a judge is kbench's
child from the moment its intermediate exits, and must be known (isolate._live)
before a sweep could take it for an orphan.
"""
from __future__ import annotations

import json
import os
import select
import socket
import subprocess
import sys
import threading

from .forked import ForkedProcess

PER_JUDGE = ("CUDA_VISIBLE_DEVICES",)  # read by CUDA at its first use, after the fork
ANSWER_S = 5.0  # a template that takes longer to fork (milliseconds, normally) is not used again
MAX_TEMPLATES = 4  # environments a run keeps templates for; judges of others are exec'd


def _key(env: dict[str, str]) -> tuple:
    return tuple(sorted((k, v) for k, v in env.items() if k not in PER_JUDGE))


class Template:
    def __init__(self, env: dict[str, str]):
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        env = {k: v for k, v in env.items() if k not in PER_JUDGE}
        env.setdefault("OPENBLAS_NUM_THREADS", "1")  # template.py: one thread, or no fork
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "harness.judge.template", str(theirs.fileno())],
            pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL, env=env, start_new_session=True,
        )
        theirs.close()
        self.sock, self.ready, self.failed = ours, False, ""
        self.lock = threading.Lock()

    def usable(self, wait_s: float = 0.0) -> bool:
        """Ready (its imports done), waiting at most `wait_s` for it. Call with the lock held."""
        if not self.ready and not self.failed:
            if select.select([self.sock], [], [], wait_s)[0]:  # its word, or its end
                msg = self._answer(0.0)
                self.ready = bool(msg.get("ready"))
                if not self.ready:
                    self._fail(msg.get("why") or msg.get("error") or "not ready")
            elif self.proc.poll() is not None:
                self._fail(f"ended with code {self.proc.returncode} while importing")
        return self.ready and not self.failed

    def wait_ready(self, wait_s: float) -> None:
        with self.lock:
            self.usable(wait_s)

    def _answer(self, timeout: float) -> dict:
        if not select.select([self.sock], [], [], timeout)[0]:
            return {"error": f"no answer within {timeout:.0f} s"}
        try:
            data = self.sock.recv(1 << 16)
            return json.loads(data) if data else {"error": "it ended"}
        except (OSError, ValueError) as e:
            return {"error": str(e)}

    def _fail(self, why: str) -> None:
        self.failed = why
        print(f"[kbench] judges are started by exec from now on: their template failed ({why})", file=sys.stderr)
        self.proc.kill()

    def fork(self, env: dict[str, str], cwd: str, fds: tuple[int, int, int]) -> int | None:
        """A judge's pid, or None (this judge is to be exec'd)."""
        if not self.lock.acquire(blocking=False):  # a judge waits for its import: this one is exec'd
            return None
        try:
            if not self.usable():
                return None
            req = {"env": env, "cwd": cwd, "cpus": sorted(os.sched_getaffinity(0))}
            try:
                socket.send_fds(self.sock, [json.dumps(req).encode()], list(fds))
            except OSError as e:
                self._fail(str(e))
                return None
            answer = self._answer(ANSWER_S)
            if not isinstance(answer.get("pid"), int):
                self._fail(answer.get("error") or "no pid")
                return None
            return answer["pid"]
        finally:
            self.lock.release()


_templates: dict[tuple, Template] = {}
_lock = threading.Lock()


def enabled() -> bool:
    """KBENCH_FORK_JUDGES=0 turns templates off (every judge exec'd), for comparing the two."""
    return os.environ.get("KBENCH_FORK_JUDGES", "1") != "0"


def _template(env: dict[str, str], register) -> tuple[Template | None, bool]:
    """The template for `env`, and whether it was started (and `register`ed) just now,
    there being none."""
    if not enabled():
        return None, False
    key = _key(env)
    with _lock:
        template = _templates.get(key)
        if template is None and len(_templates) < MAX_TEMPLATES:
            template = _templates[key] = Template(env)
            register(template.proc)
            return template, True
        return template, False


def start(env: dict[str, str], register) -> None:
    """A template for `env`, if there is none (call with the caller's spawn lock held)."""
    _template(env, register)


def wait_ready(env: dict[str, str], wait_s: float) -> None:
    """At most `wait_s` for the template of `env` to finish its imports, for a judge that
    is needed now (its task waits for it): one import of torch, where an exec'd judge and
    its candidate would do two. Not under the spawn lock: nothing else waits meanwhile."""
    template = _templates.get(_key(env)) if enabled() else None
    if template is not None:
        template.wait_ready(wait_s)


def fork_judge(env: dict[str, str], cwd: str | None, fds: tuple[int, int, int], register) -> ForkedProcess | None:
    """A judge forked by the template for `env`, with `fds` as its stdin, stdout and
    result pipe; None where it must be exec'd: the template was only started now (it
    imports torch meanwhile, and a judge started ahead does not wait for it), is not
    ready yet, or failed. `register(proc)` is called before this returns, under the
    caller's lock."""
    template, started = _template(env, register)
    if template is None or started:
        return None
    pid = template.fork(env, cwd or os.getcwd(), fds)
    if pid is None:
        return None
    proc = ForkedProcess(pid, ["fork", "harness.judge"])
    register(proc)
    return proc


def close_all() -> list[subprocess.Popen]:
    """End every template (the run is over; a new run starts its own). Returns their processes."""
    with _lock:
        left = list(_templates.values())
        _templates.clear()
    for t in left:
        t.sock.close()
        t.proc.kill()
        t.proc.wait()
    return [t.proc for t in left]
