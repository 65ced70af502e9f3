"""Tamper and escape detection inside the worker.

kbench's own clocks are captured before solution code runs (timer.py), so
tampering cannot change the measurement; this module reports it. It also
watches for work that escapes the timed call (threads left running) and
decides whether a custom kernel actually ran, from the calls made during
forward, not from the source text.
"""
from __future__ import annotations

import importlib
import sys
import threading
from typing import Any, Callable

# Attributes a solution could patch to fake a time, a sync or a comparison.
WATCHED = (
    "time.perf_counter",
    "time.perf_counter_ns",
    "time.time",
    "time.monotonic",
    "torch.cuda.Event",
    "torch.cuda.Event.record",
    "torch.cuda.Event.elapsed_time",
    "torch.cuda.Event.synchronize",
    "torch.cuda.Event.query",
    "torch.cuda.synchronize",
    "torch.cuda.current_stream",
    "torch.cuda.Stream",
    "torch._C._cuda_synchronize",
    "torch.cuda.graph",
    "torch.cuda.CUDAGraph",
    "torch.cuda.CUDAGraph.replay",
    "torch.allclose",
    "torch.equal",
    "torch.isclose",
    "torch.testing.assert_close",
    "torch.Tensor.__eq__",
    "torch.Tensor.clone",
    "torch.Tensor.copy_",
    "torch.Tensor.double",
    "torch.nn.Module.__call__",
)
HARNESS_MODULES = ("harness.timer", "harness.graph_clock", "harness.check", "harness.guard", "harness.worker", "harness.stats")


def _resolve(dotted: str) -> Any:
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for p in parts[i:]:
            obj = getattr(obj, p, None)
        return obj
    return None


def snapshot() -> dict[str, int]:
    """Identity of every watched attribute and every harness module global."""
    snap = {name: id(_resolve(name)) for name in WATCHED}
    for mod_name in HARNESS_MODULES:
        mod = sys.modules.get(mod_name)
        if mod is not None:
            for key, value in vars(mod).items():
                snap[f"{mod_name}.{key}"] = id(value)
    return snap


def changed(before: dict[str, int]) -> list[str]:
    now = snapshot()
    return sorted(k for k, v in before.items() if now.get(k) != v)


def live_threads() -> set[int]:
    return {t.ident for t in threading.enumerate() if t.is_alive()}


def new_threads(before: set[int]) -> list[str]:
    return [t.name for t in threading.enumerate() if t.is_alive() and t.ident not in before]


class CustomCodeWatch:
    """Records calls into code that is not PyTorch during forward: functions of
    extensions built through torch's cpp_extension (their module names come
    from the build hooks), Triton launches, ctypes and CuPy kernels."""

    FOREIGN_PREFIXES = ("triton", "cupy", "ctypes", "_ctypes", "numba", "pycuda", "cuda")

    def __init__(self, extension_names: set[str]):
        self.extension_names = extension_names
        self.seen: set[str] = set()

    def _profile(self, frame, event, arg):
        if event == "c_call":
            mod = getattr(arg, "__module__", None) or ""
            if mod in self.extension_names or mod.split(".")[0] in self.FOREIGN_PREFIXES:
                self.seen.add(f"{mod}.{getattr(arg, '__name__', '?')}")
        elif event == "call":
            mod = frame.f_globals.get("__name__", "") or ""
            if mod.split(".")[0] in self.FOREIGN_PREFIXES:
                self.seen.add(mod.split(".")[0])

    def run(self, fn: Callable[[], Any]) -> Any:
        previous = sys.getprofile()
        sys.setprofile(self._profile)
        try:
            return fn()
        finally:
            sys.setprofile(previous)
