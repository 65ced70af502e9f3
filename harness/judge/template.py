"""python -m harness.judge.template SOCKET_FD: judges made by fork, torch imported once.

Every judge and every candidate used to import torch (harness.judge, then
harness.candidate): two imports a task, about 5 CPU-s on a GPU host, and on 4
H200s the first tasks of each lane waited 4-6 s for judges started in one burst
of 36 imports (bench/gpu_scaling_d0df543_4xH200.json). A template imports torch
and kbench's judge and candidate modules once, per run and environment, and
forks a judge for each request kbench sends (shared/templates.py); the judge
forks its candidate (spawn.fork_candidate). A fork costs milliseconds.

What the template holds is what an exec'd judge holds before its spec: kbench's
and torch's code, no task, no CUDA context (CUDA cannot be used across a fork,
so it refuses to fork once CUDA is initialised), one thread (a fork keeps only
the calling one, so nothing else can hold a lock the child needs; numpy's BLAS
pool is kept from starting: OPENBLAS_NUM_THREADS=1, set by kbench). It runs no
solution code, is undumpable, dies with kbench, and is not a subreaper: its
judges are forked through an intermediate process that exits, so each is
reparented to kbench (the subreaper), which waits for it as for any child.
The candidate's modules are imported here by name, for their code to be in
memory; the judge's process never calls them, its forked candidate does, after
confining itself as an exec'd one would (candidate/__main__.py).

A request: one SOCK_SEQPACKET message, JSON {env, cwd, cpus}, carrying three
descriptors: the judge's stdin (its spec), its stdout (the log) and its result
pipe. The answer: {"pid": N}, the judge's pid, or {"error": why}. The judge
takes the request's environment whole; the template was started with the
same one but for CUDA_VISIBLE_DEVICES, which CUDA reads at its first use (and
OPENBLAS_NUM_THREADS, read by numpy's BLAS as it loads).
"""
from __future__ import annotations

import contextlib
import fcntl
import importlib
import json
import os
import socket
import sys
import time

from typing import NoReturn

from ..shared import forked, sandbox
from . import spawn

RESULT_FD = 3  # where a forked judge finds its result pipe (argv[1] of an exec'd judge)
REPARENT_S = 5.0  # a judge whose intermediate has not exited by then gives up


@contextlib.contextmanager
def driver_untouched():
    """torch.utils.cpp_extension's import asks torch.cuda.is_available(), only to warn
    where CUDA_HOME is set and no runtime found; asking initialises the CUDA driver,
    which starts a thread and leaves torch refusing CUDA in every fork ("Cannot
    re-initialize CUDA in forked subprocess", seen on 4 H200s). Answered yes, unasked,
    for that import only; a judge or candidate that asks later gets the real answer."""
    import torch

    real = torch.cuda.is_available
    torch.cuda.is_available = lambda: True
    try:
        yield
    finally:
        torch.cuda.is_available = real


def _cannot_fork() -> str | None:
    import torch

    threads = forked.thread_count()
    if threads != 1:
        return f"the template has {threads} threads"
    if torch.cuda.is_initialized():
        return "CUDA is initialised in the template"
    return None


def _become_judge(req: dict, fds: list[int], sock: socket.socket, said: int) -> NoReturn:
    """In the forked judge: its own group, the request's descriptors, environment and
    folder; then, once it is kbench's child, it starts as `python -m harness.judge`
    does, and says its pid on `said` once its candidate exists. kbench learns the pid
    only then: a kill of its group cannot come before the group exists, and kbench's
    move of the task's processes to their lane's cores (run/cores.py pin_tree) finds the
    candidate already forked, not one that inherits the judge's cores mid-move. It was
    born on the request's cores (_fork_judge)."""
    def become() -> None:
        os.setsid()  # its own group: kbench kills it whole
        said_fd = fcntl.fcntl(said, fcntl.F_DUPFD, RESULT_FD + 1)  # above the numbers the dup2s below take
        stdin_fd, out_fd, result_fd = fds
        os.dup2(stdin_fd, 0)
        os.dup2(out_fd, 1)
        os.dup2(out_fd, 2)
        os.dup2(result_fd, RESULT_FD)
        sock.detach()  # closed below with the rest; the object must not close a reused number later
        forked.close_fds_except(RESULT_FD, said_fd)
        os.environ.clear()
        os.environ.update(req["env"])
        spawn.as_if_started_with_env()
        os.chdir(req["cwd"])
        parent, end = int(os.environ["KBENCH_PARENT_PID"]), time.monotonic() + REPARENT_S
        while os.getppid() != parent:  # the intermediate's exit hands it to kbench, the subreaper
            if time.monotonic() > end:
                raise RuntimeError(f"not reparented to kbench ({parent}) within {REPARENT_S:.0f} s")
            time.sleep(0.0002)
        sys.argv = ["-m", str(RESULT_FD)]
        forked.set_command_line(sys.executable, "-m", "harness.judge", str(RESULT_FD))
        spawn.protect()
        spawned = spawn.fork_candidate()
        os.write(said_fd, str(os.getpid()).encode())
        os.close(said_fd)
        from .main import main

        main(spawned, forked=True)  # ends the process itself

    forked.run_then_exit(become)


def _fork_judge(req: dict, fds: list[int], sock: socket.socket) -> int:
    r, w = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    middle = os.fork()
    if middle == 0:
        try:
            os.close(r)
            if req.get("cpus"):  # the judge is born on them, as an exec'd one is: kbench moves it later (run/cores.py)
                os.sched_setaffinity(0, req["cpus"])
            if os.fork() == 0:
                _become_judge(req, fds, sock, w)
        finally:
            os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        pid = f.read()  # until the judge has said it and the intermediate has exited
    os.waitpid(middle, 0)  # once it is reaped, its child is kbench's
    if not pid:
        raise RuntimeError("the forked judge died before it said its pid")
    return int(pid)


def serve(sock: socket.socket) -> None:
    sandbox.set_parent_death_signal(int(os.environ["KBENCH_PARENT_PID"]))
    sandbox.make_undumpable()
    if os.environ.get("KBENCH_DEVICE") == "cpu":
        sandbox.disable_huge_pages()  # as a judge does before its candidate exists (spawn.protect)
    with driver_untouched():
        import torch.utils.cpp_extension  # noqa: F401 - as the candidate's serve.main imports it

    from . import main as judge_main

    importlib.import_module("harness.candidate.serve")  # by name: judge/ never calls candidate/ (module docstring)
    judge_main._settle_imports()
    why = _cannot_fork()
    sock.send(json.dumps({"ready": why is None, "why": why, "pid": os.getpid()}).encode())
    if why:
        return
    while True:
        msg, fds, _flags, _addr = socket.recv_fds(sock, 1 << 20, 8)
        if not msg:
            return  # kbench closed its end
        try:
            req = json.loads(msg)
            why = _cannot_fork() or (None if len(fds) == 3 else f"{len(fds)} descriptors, not 3")
            answer = {"error": why} if why else {"pid": _fork_judge(req, fds, sock)}
        except Exception as e:  # noqa: BLE001 - kbench starts this judge by exec instead
            answer = {"error": f"{type(e).__name__}: {e}"}
        finally:
            for fd in fds:
                os.close(fd)
        sock.send(json.dumps(answer).encode())


if __name__ == "__main__":
    serve(socket.socket(fileno=int(sys.argv[1])))
    os._exit(0)
