"""How long each request to the candidate may run before it is declared hung.

A hang (a deadlocked kernel, an infinite loop, a sleep) used to cost the whole
--timeout (300 s by default). The judge knows the reference's time per call, so
a call that runs a hundred times longer, and longer than a floor that no honest
call on any host gets near, is hung: the judge kills the candidate then and the
task ends as `timeout` with a message naming the phase and the limit. The
limit is wall time the judge measures around the request on its own clock; the
candidate cannot move it. kbench's --timeout stays the last resort.

The constants are in this one place. Each can be raised (or, in tests, lowered)
through the environment variable named beside it.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, replace
from typing import Any

import torch


def _seconds(name: str, default: float) -> float:
    raw = os.environ.get(name)
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not value > 0:
        print(f"[kbench] ignored {name}={raw!r}: not a positive number of seconds; using {default:g}", flush=True)
        return default
    return value


# A call this many times slower than the reference's is hung or as good as hung:
# far beyond an honest but slow kernel, and too slow to time within a task.
HANG_FACTOR = 100.0
# The floor for any call: the reference may take microseconds, and a loaded host
# (a 2-core CI box running judge and candidate side by side) can stall a 1 ms call
# for hundreds of ms. Seconds are never an honest call's stall.
HANG_MIN_S = _seconds("KBENCH_HANG_MIN_S", 3.0)
# The floor for a first call, which may compile: Triton JIT (cold: each candidate
# has its own cache), cuBLAS and cuDNN heuristics, torch.compile tracing, the
# profiler's start-up (CUPTI's). A call on inputs of a shape, dtype or scalar
# not seen before counts as first (Triton's autotuner and
# torch.compile both specialize on them), and so do a CUDA graph capture and the
# profiled call.
HANG_FIRST_MIN_S = _seconds("KBENCH_HANG_FIRST_MIN_S", 30.0)
# ...unless the GPU says otherwise: a first call that has kept the GPU busy without a
# pause for this long, with no compiler running in the candidate, and has passed the
# limit of a later call (the larger of HANG_MIN_S and 100x the reference), is a
# kernel that does not end, not a compile (gpu_busy.py). Where the GPU's counter
# cannot be read the floor above stands.
HANG_BUSY_S = _seconds("KBENCH_HANG_BUSY_S", 5.0)
# Importing the solution and building its ModelNew (the clock starts once the
# candidate process has imported torch and answered). Extensions were compiled
# by the build stage before the task started, so what is left is loading them,
# creating the CUDA context and importing Triton: seconds. An import that
# compiles all the same (a build that failed inside try/except is tried again
# here) runs a compiler, and gets HANG_BUILD_S below.
HANG_IMPORT_S = _seconds("KBENCH_HANG_IMPORT_S", 30.0)
# An import or a first call that is still running a child process (a compiler: an
# extension built at import because its build failed and was caught, or one built
# lazily in forward; Triton's ptxas) when its limit passes is building, not hung:
# its limit moves on, up to this much. The process table shows the child, not the
# candidate's word; a candidate that starts a child only to wait longer gains at
# most this, which --timeout (300 s by default) bounds anyway.
HANG_BUILD_S = _seconds("KBENCH_HANG_BUILD_S", 300.0)
# A first call past its wall limit that is still computing (Triton's JIT and autotuning
# run in the candidate's own threads, ptxas and inductor's workers in its children) is
# compiling on a host that gives it less than a core: a Triton RMSNorm's first call ran
# 32 s of wall time beside 60 builds (4 x H100, 2026-11-27), past the 30 s floor. It runs
# on while its CPU time (its threads' and its children's) grows by at least this share
# of a core between two looks, until it has used its limit in CPU seconds, within
# HANG_BUILD_S. A sleep, a lock or a wait on the GPU that yields uses none of it; a
# compile niced below busy neighbours still gets more: a duty-cycled process at nice 5
# beside three busy ones on 2 cores read under a tenth of a core over 2 s (2026-11-27).
# A first call that computes without end is hung all the same: once it has used its
# limit in CPU seconds, or at HANG_BUILD_S of wall time, whichever comes first.
PROGRESS_SHARE = 0.02
# ...and past that CPU limit, while it also writes its compile caches (Triton's and inductor's,
# in its scratch folder): a file within this long. Triton writes what it compiles there (its
# stages of each kernel: ttir, ttgir, llir, ptx, cubin); a loop that only computes writes
# nothing. A Triton L2Norm whose eight autotune configs unroll their column loops used all of
# its 30 s of CPU in its first call on an H200 host, compiling (bench/evidence, 2026-11-29);
# with a 30 s window it was cut at 64 s, its writes quiet for 30 s while it still compiled
# (one of its configs took 24 s alone on the 2-core CPU box, bench/evidence/cpu_check.md).
# Within HANG_BUILD_S still: the candidate can write there, as it can start a child.
COMPILE_WRITE_S = _seconds("KBENCH_HANG_COMPILE_WRITE_S", 120.0)
# A later call (not timed) that computes past its wall limit runs on at most this long:
# a busy host's share of a core for an honest call, and what a call that computes
# without end can take before it is hung in any case.
LATER_WALL_S = _seconds("KBENCH_HANG_LATER_WALL_S", 30.0)
# Requests that run no forward (ping, bind, output): the candidate answers at
# once, save for copying a large output back (the reference, writing the same
# output, bounds that through the factor).
HANG_OTHER_MIN_S = 30.0


@dataclass(frozen=True)
class Limit:
    """The wall time one request may take, what the request is, and why the limit is what it is."""

    seconds: float
    what: str  # "a call", "the first call", "a timed call", "importing the solution", ...
    why: str
    first: bool = False
    build_s: float | None = None  # how far the limit may move while the candidate runs a child process
    # A first call's: past `seconds` of wall time it runs on while it computes, until it has
    # used this many CPU seconds (PROGRESS_SHARE); None where the wall limit alone holds.
    cpu_s: float | None = None
    # The limit instead of `seconds` once the GPU has been busy for HANG_BUSY_S straight
    # (a first call's); None where the two are the same.
    busy_after_s: float | None = None
    busy_why: str = ""

    def message(self, phase: str, ran_s: float, busy_s: float | None = None, cpu_used_s: float | None = None) -> str:
        """`busy_s`: the call was ended by the GPU-busy rule, after that many seconds busy.
        `cpu_used_s`: the CPU seconds the candidate used in the request, where they were read."""
        if busy_s is not None:
            return (f"hung: {self.what} during {phase} ran {_duration(ran_s)}, the GPU busy without a pause and "
                    f"no compiler running for the last {_duration(busy_s)} (KBENCH_HANG_BUSY_S), past "
                    f"{_duration(self.busy_after_s or 0.0)} ({self.busy_why}); candidate killed")
        building = (f"; up to {_duration(self.build_s)} while it runs a child process"
                    + (" or writes those caches" if self.first and self.cpu_s else "") if self.build_s else "")
        computing = (f"; longer while it computes, until it has used {_duration(self.cpu_s)} of CPU"
                     + (f", then while it also writes its compile caches (a file within "
                        f"{_duration(COMPILE_WRITE_S)})" if self.first else "") if self.cpu_s else "")
        used = f" and used {_duration(cpu_used_s)} of CPU" if cpu_used_s is not None else ""
        return (f"hung: {self.what} during {phase} ran {_duration(ran_s)}{used}, past its limit of "
                f"{_duration(self.seconds)} ({self.why}{computing}{building}); candidate killed")


# The time budget is a hard cap: no task's timing phase runs more than this past it.
# A timed batch on the GPU still running this long after the budget's end is hung,
# where it has also run HANG_FACTOR x the reference's time for its calls: near the end
# the floor of a call (HANG_MIN_S, seconds) gives way to the budget, the 100x rule
# never does. The timed side runs on reserved cores there (run/cores.py), which the
# floor's 2-core stall was not; the CPU path keeps the floor.
BUDGET_OVERRUN_S = _seconds("KBENCH_BUDGET_OVERRUN_S", 1.0)

# Before the import: the candidate process importing torch is kbench's own start-up,
# which only --timeout bounds.
STARTUP = Limit(float("inf"), "starting the candidate process", "unbounded")


def for_import() -> Limit:
    return Limit(HANG_IMPORT_S, "importing the solution", "the limit for an import, KBENCH_HANG_IMPORT_S",
                 build_s=max(HANG_BUILD_S, HANG_IMPORT_S))


def for_calls(ref_s: float | None, what: str, calls: int = 1, first: bool = False, timed: bool = False) -> Limit:
    """A request that runs `calls` forward calls, given the reference's seconds per call.
    A later call outside the timing phase runs on past its wall limit while it computes,
    as a first call does (PROGRESS_SHARE), within LATER_WALL_S: a busy host slows it and
    must not make it `timeout` (an attack's honest calls ran 3.0 s on the 2-core CI box
    with two compilers beside the tests, 2026-11-28). A timed batch (`timed`) keeps its
    wall limit: the time budget is a hard cap."""
    ref_s = ref_s or 0.0
    scaled = HANG_FACTOR * ref_s * calls
    floor = HANG_FIRST_MIN_S if first else HANG_MIN_S
    per = f"{HANG_FACTOR:g}x the reference's {_duration(ref_s)}" + (f" x {calls} calls" if calls > 1 else "")
    build_s = max(HANG_BUILD_S, scaled, floor) if first else None if timed else max(LATER_WALL_S, scaled)
    cpu_s = None if timed and not first else max(scaled, floor)
    if scaled >= floor:
        return Limit(scaled, what, per, first, build_s, cpu_s)
    kind = "a first call, which may compile, KBENCH_HANG_FIRST_MIN_S" if first else "a call, KBENCH_HANG_MIN_S"
    why = f"the floor for {kind}; {per} is {_duration(scaled)}"
    if not first:
        return Limit(floor, what, why, first, build_s, cpu_s)
    later = max(scaled, HANG_MIN_S)
    busy_why = per if scaled >= HANG_MIN_S else f"the floor for a call, KBENCH_HANG_MIN_S; {per} is {_duration(scaled)}"
    return Limit(floor, what, why, first, build_s, cpu_s, busy_after_s=later, busy_why=busy_why)


def near_budget_end(limit: Limit, seconds_left: float, scaled_s: float) -> Limit:
    """A timed batch's limit, `seconds_left` before the time budget's end, for a batch
    whose calls take the reference `scaled_s` / HANG_FACTOR seconds: at most the budget's
    end plus BUDGET_OVERRUN_S, never below `scaled_s` (BUDGET_OVERRUN_S above)."""
    cap = max(seconds_left, 0.0) + BUDGET_OVERRUN_S
    if limit.first or cap >= limit.seconds or scaled_s >= limit.seconds:
        return limit
    return replace(limit, seconds=max(cap, scaled_s),
                   why=f"the time budget's end + {BUDGET_OVERRUN_S:g} s, KBENCH_BUDGET_OVERRUN_S; {HANG_FACTOR:g}x "
                       f"the reference's time for its calls is {_duration(scaled_s)}")


def for_other(ref_s: float | None, op: str) -> Limit:
    scaled = HANG_FACTOR * (ref_s or 0.0)
    seconds = max(HANG_OTHER_MIN_S, scaled)
    return Limit(seconds, f"a {op!r} request", "a request that runs no forward: the larger of "
                 f"{HANG_OTHER_MIN_S:g} s and {HANG_FACTOR:g}x the reference's call")


def signature(inputs: list) -> tuple:
    """What a compiler specializes a call on: each tensor's shape, dtype and device,
    each plain value itself."""
    out: list[Any] = []
    for x in inputs:
        if isinstance(x, torch.Tensor):
            out.append((tuple(x.shape), str(x.dtype), x.device.type))
        elif x is None or isinstance(x, (bool, int, float, str)):
            out.append((type(x).__name__, x))
        else:
            out.append((type(x).__name__,))
    return tuple(out)


def _duration(s: float) -> str:
    if s >= 10:
        return f"{s:.0f} s"
    if s >= 1:
        return f"{s:.1f} s"
    if s >= 1e-4:
        return f"{s * 1e3:.3g} ms"
    return f"{s * 1e6:.3g} us"
