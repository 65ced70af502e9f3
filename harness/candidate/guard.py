"""Tamper and escape detection inside the candidate's process.

Nothing here decides a verdict or a figure: the judge lives in another process,
reads the outputs itself and times every request on its own clock, so a patch
cannot change a comparison, a reference time or a solution time. What a patch
can change is what this process says of itself (its own events, its profiler
share), so every replacement of a torch function, a Tensor method or a kbench
module global is reported as `tampering`, which fails the gate. It can only add
that flag: a solution that patches this module too silences it, and loses
nothing the judge relies on.
"""
from __future__ import annotations

import importlib
import sys
import threading
import types
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
# Namespaces whose every public callable is watched: a solution that wraps
# torch.softmax (to slow a reference it hopes shares its process) or
# torch.isnan (to blind a checker) replaces one of these.
NAMESPACES = ("torch", "torch.nn.functional", "torch.Tensor", "torch._C.TensorBase", "torch.cuda", "torch.linalg", "torch.fft",
              "torch.special", "torch.nn.Module", "torch.autograd", "torch.testing", "time", "gc", "os")
HARNESS_PREFIX = "harness."


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
    """Identity of every watched attribute, every public callable of the watched
    namespaces and every global of kbench's modules loaded in this process."""
    snap = {name: id(_resolve(name)) for name in WATCHED}
    for ns_name in NAMESPACES:
        ns = _resolve(ns_name)
        if ns is None:
            continue
        # dir(), not vars(): a class's inherited methods count (torch.Tensor.abs_ comes
        # from the C base class, and assigning it adds a name vars() never had).
        for key in dir(ns):
            if key.startswith("_"):
                continue
            try:
                value = getattr(ns, key)
            except Exception:  # noqa: BLE001 - lazy attributes may fail to load
                continue
            if callable(value):
                snap[f"{ns_name}.{key}"] = id(value)
    for mod_name, mod in list(sys.modules.items()):
        if mod_name.startswith(HARNESS_PREFIX) and mod is not None:
            for key, value in list(vars(mod).items()):
                if not (key.startswith("__") and key.endswith("__")):
                    _record(snap, f"{mod_name}.{key}", value)
                    # A method replaced on one of kbench's classes (a clock's finish, say)
                    # leaves the class, the global above, where it was.
                    if isinstance(value, type) and value.__module__ == mod_name:
                        for attr, member in list(vars(value).items()):
                            _record(snap, f"{mod_name}.{key}.{attr}", member)
    return snap


def _record(snap: dict[str, int], name: str, value: Any) -> None:
    """The object's identity and, for a function of kbench's, its code and defaults:
    assigning a function's __code__ changes what it does and not which object it is."""
    snap[name] = id(value)
    fn = getattr(value, "__func__", value)  # staticmethod, classmethod
    if isinstance(fn, types.FunctionType):
        snap[f"{name}.__code__"] = id(fn.__code__)
        snap[f"{name}.__defaults__"] = id(fn.__defaults__)
        snap[f"{name}.__kwdefaults__"] = id(fn.__kwdefaults__)


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
