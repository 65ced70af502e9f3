"""custom_share: how much of one forward's work the solution's own code did.

Asking only whether an extension was called lets a decoy through (a custom
kernel that touches one element beside torch.softmax doing the work) and a
fallback (a custom kernel refused inside try/except, then PyTorch). So one call
per task runs under a profiler and the work is split in two:
  * CUDA: device time of kernels launched from inside a PyTorch operator
    (aten::*, including cuBLAS/cuDNN calls torch makes) is PyTorch's; kernels
    launched outside any operator (an extension's <<<>>>, Triton, a direct
    cuBLAS call from the solution's C++) are the solution's own;
  * CPU: wall time inside calls into the solution's own compiled code (built
    extensions, ctypes, Triton/CuPy frames) against time inside PyTorch
    operators outside those calls.
This runs in the candidate's process, so a solution that patches the profiler
can forge it: the README says so.
"""
from __future__ import annotations

import sys
import time
from typing import Any, Callable

import torch
from torch.autograd.profiler import profile as _Profile

FOREIGN_PREFIXES = ("triton", "cupy", "ctypes", "_ctypes", "numba", "pycuda", "cuda")
_perf = time.perf_counter  # captured before the solution is imported


class _CallClock:
    """sys.setprofile hook: which custom calls ran and how long they took (outermost only)."""

    def __init__(self, extension_names: set[str]):
        self.extension_names = extension_names
        self.seen: set[str] = set()
        self.depth = 0
        self.started = 0.0
        self.seconds = 0.0

    def _is_custom_c(self, fn: Any) -> str | None:
        mod = getattr(fn, "__module__", None) or ""
        if mod in self.extension_names or mod.split(".")[0] in FOREIGN_PREFIXES:
            return f"{mod}.{getattr(fn, '__name__', '?')}"
        return None

    def __call__(self, frame, event, arg):
        if event in ("c_call", "c_return", "c_exception"):
            name = self._is_custom_c(arg)
            if name is None:
                return
            if event == "c_call":
                self.seen.add(name)
                self._enter()
            else:
                # A call that raised did no work for the output (a refused input
                # before a fallback); building its exception can take milliseconds.
                self._leave(counted=event == "c_return")
        elif event in ("call", "return"):
            mod = (frame.f_globals.get("__name__", "") or "").split(".")[0]
            if mod in FOREIGN_PREFIXES:
                if event == "call":
                    self.seen.add(mod)
                    self._enter()
                else:
                    self._leave()

    def _enter(self) -> None:
        if self.depth == 0:
            self.started = _perf()
        self.depth += 1

    def _leave(self, counted: bool = True) -> None:
        self.depth = max(0, self.depth - 1)
        if self.depth == 0 and counted:
            self.seconds += _perf() - self.started


def measure(fn: Callable[[], Any], device: torch.device, extension_names: set[str]) -> tuple[Any, dict]:
    """Run fn once under the profiler; return its output and what was measured:
    {"share": float | None, "custom_ms", "torch_ms", "seen": [...], "how": str}."""
    clock = _CallClock(extension_names)
    previous = sys.getprofile()
    # The autograd profiler, which torch.profiler.profile wraps: the wrapper's first
    # start asks `hasattr(torch, "_inductor")`, which imports torch._inductor and
    # torch._dynamo (1.1 s on a 2-core host, ~5 s on an H100 host) into every task.
    with _Profile(use_cpu=True, use_device="cuda" if device.type == "cuda" else None, use_kineto=True) as prof:
        sys.setprofile(clock)
        try:
            out = fn()
        finally:
            sys.setprofile(previous)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
    info = {"seen": sorted(clock.seen)[:8]}
    try:
        if device.type == "cuda":
            custom_us, torch_us = _split_device_time(prof.function_events)
            info["how"] = "device time of kernels launched outside / inside PyTorch operators"
        else:
            # Operators run from inside the solution's own calls (an extension may
            # call at::empty) count on both sides; they are small beside real work.
            custom_us, torch_us = clock.seconds * 1e6, _cpu_operator_us(prof.function_events)
            info["how"] = "host time inside the solution's compiled calls / inside PyTorch operators"
    except Exception as e:  # noqa: BLE001 - a profile that cannot be read leaves the share unknown
        info.update(share=None, how=f"profile unreadable: {str(e).splitlines()[0][:120]}")
        return out, info
    total = custom_us + torch_us
    info.update(custom_ms=round(custom_us / 1e3, 6), torch_ms=round(torch_us / 1e3, 6),
                share=round(custom_us / total, 4) if total > 0 else None)
    return out, info


def _is_torch_op(evt) -> bool:
    name = evt.name or ""
    return name.startswith(("aten::", "cudnn", "cublas", "torch::", "autograd::"))


def _under_torch_op(evt) -> bool:
    node = evt
    while node is not None:
        if _is_torch_op(node):
            return True
        node = node.cpu_parent
    return False


def _split_device_time(events) -> tuple[float, float]:
    """(custom us, torch us) of device work. PyTorch's is the kernels linked to a
    CPU event under a PyTorch operator; the solution's is all other device work
    (kernels an extension or Triton launches are often linked to no operator)."""
    total = torch_time = 0.0
    for evt in events:
        if evt.device_type == torch.autograd.DeviceType.CUDA:
            total += evt.time_range.elapsed_us()
            continue
        # Kernels hang on the innermost operator that launched them, and again on
        # bookkeeping events below it (seen on an H100: "Activity Buffer Request"
        # under aten::mm lists aten::mm's kernels): count operators' lists only.
        kernels = getattr(evt, "kernels", None) or []
        if kernels and _is_torch_op(evt):
            torch_time += sum(k.duration for k in kernels)
    return max(0.0, total - torch_time), min(torch_time, total) if total else torch_time


def _cpu_operator_us(events) -> float:
    """Host time inside top-level PyTorch operators (nested ones are inside their parents)."""
    return sum(e.cpu_time_total for e in events
               if _is_torch_op(e) and not (e.cpu_parent and _under_torch_op(e.cpu_parent)))

