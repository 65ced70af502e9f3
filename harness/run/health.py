"""Whether a GPU can take the next task after one that crashed, hung or raised.

A fresh process must make a context on it, write, copy and read back its memory:
a task's broken CUDA context dies with its processes, but a fault can leave the
device itself unusable, and the next task must not be judged on it. The probe
calls the driver itself (libcuda through ctypes), not torch: with torch it
started in 3.5 s on an H200 host (its import), so the check after a second
failure within seconds of the first, its successor still importing, took 3.6 s
where a ready one took 0.7 s (a warm 20-task run, 2026-11-28); most model-written
candidates fail, often back to back. It is still started ahead, per GPU, and
waits for its line with no context made.
"""
from __future__ import annotations

import os
import threading
import time
from pathlib import Path

from .gpus import visible_device
from ..shared import scratch_root
from ..shared.isolate import Child
from ..records import Status, TaskResult

# It waits for one line, then makes its context (the device's primary one: the same call
# on every driver version), fills 4 MB with a pattern, copies it on the device and back,
# and checks every word. A fresh interpreter each time: only a context made after the
# fault says whether the device is sound. Exit codes: 3 kbench went away (no context
# made), 4 the words differ, 10 + n the n-th driver call failed.
_PROBE = """import ctypes, sys
if not sys.stdin.readline(): sys.exit(3)  # kbench went away: make no context
cu = ctypes.CDLL("libcuda.so.1")
step = 0
def ok(status):
    global step
    step += 1
    if status != 0:
        sys.exit(10 + step)
n, word = 1 << 20, 0x3F800000
dev, ctx, a, b = ctypes.c_int(), ctypes.c_void_p(), ctypes.c_uint64(), ctypes.c_uint64()
ok(cu.cuInit(0)); ok(cu.cuDeviceGet(ctypes.byref(dev), 0))
ok(cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev)); ok(cu.cuCtxSetCurrent(ctx))
ok(cu.cuMemAlloc_v2(ctypes.byref(a), 4 * n)); ok(cu.cuMemAlloc_v2(ctypes.byref(b), 4 * n))
ok(cu.cuMemsetD32_v2(a, word, n)); ok(cu.cuMemcpyDtoD_v2(b, a, 4 * n))
host = (ctypes.c_uint32 * n)()
ok(cu.cuMemcpyDtoH_v2(host, b, 4 * n)); ok(cu.cuCtxSynchronize())
sys.exit(0 if host[:].count(word) == n else 4)
"""
_ready: dict[int | None, Child] = {}
_lock = threading.Lock()


def keep_ready(gpu: int | None) -> None:
    """Start this GPU's next check now, unless one is waiting already."""
    with _lock:
        if gpu not in _ready or _ready[gpu].proc.poll() is not None:
            _ready[gpu] = _start(gpu)


def discard(gpu: int | None) -> None:
    """End the check started ahead for this GPU (its lane is done)."""
    with _lock:
        child = _ready.pop(gpu, None)
    if child is not None:
        child.discard()


def healthy(gpu: int | None = None, timeout: float = 60.0) -> bool:
    """Three tries, 5 s apart, the first in the process started ahead if there is one."""
    for attempt in range(3):
        with _lock:
            child = _ready.pop(gpu, None) if attempt == 0 else None
        outcome = (child or _start(gpu)).finish(_scratch_log(), timeout, line="go")
        if outcome.returncode == 0:
            return True
        time.sleep(5)
    return False


def after(result: TaskResult, gpu: int | None) -> bool:
    """Whether `gpu` can take the next task after `result`: checked only after a task
    that crashed, hung or raised, which may have broken it; then the next check is
    started ahead."""
    if result.status not in (Status.CRASHED, Status.TIMEOUT, Status.RUNTIME_ERROR):
        return True
    ok = healthy(gpu)
    if ok:
        keep_ready(gpu)
    return ok


def _start(gpu: int | None) -> Child:
    env = dict(os.environ)
    if gpu is not None:
        env["CUDA_VISIBLE_DEVICES"] = visible_device(gpu)
    return Child(["-c", _PROBE], env=env)


def _scratch_log() -> Path:
    # In kbench's own temporary folder, removed at its exit: one per process in /tmp stayed there
    return Path(scratch_root.for_children()) / "health.log"
