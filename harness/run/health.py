"""Whether a GPU can take the next task after one that crashed, hung or raised.

A fresh process must allocate and compute on it: a task's broken CUDA context
dies with its processes, but a fault can leave the device itself unusable, and
the next task must not be judged on it. The process is started ahead, per GPU,
and waits with torch imported and no CUDA context: on an H100 host `import
torch` took seconds of a check that otherwise takes well under one, and a cold
run's lane paid it after every hang and crash.
"""
from __future__ import annotations

import os
import tempfile
import threading
import time
from pathlib import Path

from .gpus import visible_device
from ..shared.isolate import Child
from ..records import Status, TaskResult

# It waits for one line, then makes its context and computes. A fresh interpreter
# each time: only a context made after the fault says whether the device is sound.
_PROBE = (
    "import sys, torch\nif not sys.stdin.readline(): sys.exit(3)  # kbench went away: make no context\n"
    "x = torch.ones(1 << 20, device='cuda'); "
    "assert float(x.sum()) == float(1 << 20); torch.cuda.synchronize()"
)
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
    return Path(tempfile.gettempdir()) / f"kbench-health-{os.getpid()}.log"
