"""kbench's side of a task: start the judge, hand it the spec, read its result, name its death.

The judge (harness.judge) starts the candidate (harness.candidate) itself; the
result comes back on a pipe only the judge holds, never through a file a
solution could find and write.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from . import cores, gpus
from .. import build
from ..shared import scratch_root
from ..shared.isolate import Child, child_env
from ..records import (
    PREPARE_LINE, BuildResult, CheckResult, Flag, Options, Status, Task, TaskResult, Timing, from_json_dict,
)

_CUDA_ERROR = re.compile(r"(CUDA error: .*|.*device-side assert.*|.*illegal memory access.*|Segmentation fault.*)")


@dataclass(frozen=True)
class EvalConfig:
    """A task's options (the same everywhere) and what the host that runs it knows."""

    options: Options
    arch: str = ""
    bandwidth_gbs: float | None = None  # copy: the basis of the HBM floor
    read_gbs: float | None = None  # a read-only pass: with the copy, the bound below_roofline uses
    gpu_index: int | None = None
    builds_dir: str = ""  # the build cache: torch's loader locks files beside a built extension
    # cores.py: the CPUs a judge and its candidate move to when their task starts (their
    # lane's own), and those a judge is started on to wait (everything but the lanes');
    # () each where none are reserved.
    cpus: tuple[int, ...] = ()
    spare_cpus: tuple[int, ...] = ()

    @property
    def device(self) -> str:
        return self.options.device

    @property
    def timeout(self) -> float:
        return self.options.timeout


# 32 MB, glibc's largest mmap threshold on 64-bit hosts; 1 GB of freed heap kept before trimming.
MALLOC_TUNABLES = "glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=1073741824"


# How long a judge needed at once (no judge was started ahead) waits for the run's
# template to import torch, rather than be exec'd and import it twice (itself and its
# candidate): an exec'd pair took ~1.9 s on the 2-core CI box, the template ~1.2-2 s.
TEMPLATE_WAIT_S = 30.0


def start_worker(cfg: EvalConfig, now: bool = False) -> Child:
    """A judge process (which starts its candidate process) that imports torch and
    the harness, then waits for its task's spec on stdin. Started ahead of its
    task, so the seconds of `import torch` overlap the task before it; or forked
    from the run's template (harness/shared/templates.py), which a judge needed
    `now` waits for."""
    env = child_env(dict(os.environ))
    env["PYTHONUNBUFFERED"] = "1"
    env["KBENCH_PARENT_PID"] = str(os.getpid())
    env["KBENCH_DEVICE"] = cfg.device
    env[scratch_root.ENV] = scratch_root.for_children()  # what a judge ended before its cleanup leaves goes with kbench
    env["KBENCH_REQUIRE_SANDBOX"] = "1" if cfg.options.require_sandbox else "0"  # its candidate's (sandbox.confine)
    if cfg.device == "cpu":  # both sides, from their first import of torch (records.Options says why)
        env["OMP_NUM_THREADS"] = env["MKL_NUM_THREADS"] = str(cfg.options.cpu_threads)
        # The same allocator on both sides. glibc's malloc moves its mmap threshold with what a
        # process has freed, so one process served a call's 8 MB output from its heap and another
        # mapped it anew (page faults, zeroing) every call: byte-identical code timed 0.15x-3.6x
        # against itself on the CPU. Fixed thresholds, and freed memory kept, in both.
        env["GLIBC_TUNABLES"] = ":".join(filter(None, [env.get("GLIBC_TUNABLES", ""), MALLOC_TUNABLES]))
    if cfg.builds_dir:
        # Made now: the candidate starts at once and grants itself the folders that exist
        # as it starts (Landlock rules name existing folders). A cold run's first judges
        # start before any build made it, and their candidates' loads then could not take
        # torch's lock beside the extension: "Permission denied: .../ext/relu_small/lock".
        Path(cfg.builds_dir).mkdir(parents=True, exist_ok=True)
        env["KBENCH_WRITABLE"] = cfg.builds_dir  # the candidate's only writable folder beside its scratch
    # Judge and candidate take turns on the CPU: idle OpenMP threads must sleep,
    # not spin for 200 ms inside the other side's timed call.
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    if cfg.arch:
        env["TORCH_CUDA_ARCH_LIST"] = cfg.arch
    if cfg.gpu_index is not None:
        env["CUDA_VISIBLE_DEVICES"] = gpus.visible_device(cfg.gpu_index)
    if cfg.cpus and cfg.device != "cpu":
        # Both sides' OpenMP pools sized for the lane's cores they will time on, not for the
        # host's cores they are born on (a pool of 16 on 2 cores queues behind itself).
        env.setdefault("OMP_NUM_THREADS", str(len(cfg.cpus)))
    # Born off the lanes' cores: its import of torch (and its candidate's) must not slow
    # the task its lane times now; evaluate moves it onto the lane's when its task starts.
    with cores.spawning_on(cfg.spare_cpus):
        return Child(["-m", "harness.judge"], env=env, result_pipe=True, forkable=True,
                     template_wait_s=TEMPLATE_WAIT_S if now else 0.0)


def _triton_entry(task: Task, cfg: EvalConfig) -> str | None:
    """Where this solution's Triton kernels are kept between tasks (judge/triton_cache.py):
    one entry per solution text and GPU architecture, beside the build cache, which no
    build or candidate may write. None on the CPU or without a build cache."""
    if cfg.device != "cuda" or not cfg.builds_dir:
        return None
    try:
        digest = hashlib.sha256(Path(task.solution_path).read_bytes()).hexdigest()[:32]
    except OSError:
        return None
    return str(Path(cfg.builds_dir).parent / "triton" / f"{digest}-sm{cfg.arch.replace('.', '') or 'any'}")


def prepare(child: Child) -> None:
    """Tell a judge started ahead that it is next: it makes its GPU context and
    clocks (and has its candidate do the same) before its task arrives. Only the
    next one: a pair with CUDA contexts holds GPU memory (the contexts, the flush
    buffers) that a large task may need."""
    if not getattr(child, "prepared", False):
        child.prepared = True
        child.tell(PREPARE_LINE)


def _with_handoff(data: dict, worker_seconds: float, after_result_s: float | None, sent_at: float | None = None) -> dict:
    """The judge's phases, and the worker's seconds outside them, which per-task
    overhead includes and no phase shows: "close" (the judge ending its candidate
    before its verdict leaves), "teardown" (kbench ending the judge once the
    verdict is in), "judge_wait" (the spec waiting for a judge still starting or
    preparing: from its sending, `sent_at`, to the judge reading it, both on
    CLOCK_MONOTONIC) and "handoff" (the rest: the spec's and the result's way)."""
    phases = dict(data.get("phase_seconds", {}))
    inside = data.get("worker_seconds")
    if not isinstance(inside, (int, float)):
        return phases
    close = data.get("close_seconds") if isinstance(data.get("close_seconds"), (int, float)) else 0.0
    after = after_result_s or 0.0
    outside = max(0.0, worker_seconds - inside - close - after)
    read_at = data.get("spec_read_at")
    wait = min(outside, max(0.0, read_at - sent_at)) if isinstance(read_at, (int, float)) and sent_at else 0.0
    phases.update(close=round(close, 3), teardown=round(after, 3), judge_wait=round(wait, 3),
                  handoff=round(outside - wait, 3))
    return phases


def evaluate(
    task: Task, built: BuildResult, cfg: EvalConfig, log_path: Path, work_dir: Path | None = None,
    child: Child | None = None, shape: dict | None = None,
) -> TaskResult:
    """Run one task in a worker (`child`, started ahead by start_worker, or a new
    one). `shape`: the problem's input and output bytes, for refusing a task
    that cannot fit before anything is allocated."""
    t0 = time.monotonic()
    base = dict(problem=task.problem, solution_set=task.solution_set, solution_path=task.solution_path, log_path=str(log_path),
                gpu=cfg.gpu_index)
    if not built.ok:
        if child is not None:
            child.discard()
        return TaskResult(**base, status=built.status, message=built.message, phase="build", seconds=built.seconds)

    opts = cfg.options
    spec = {
        "problem_path": task.problem_path,
        "solution_path": task.solution_path,
        "device": opts.device,
        "seed": opts.seed,
        "trials": opts.trials,
        "fp64": opts.fp64,
        "time": opts.time,
        "timing": asdict(opts.timing),
        "bandwidth_gbs": cfg.bandwidth_gbs,
        "read_gbs": cfg.read_gbs,
        "compile_baseline": opts.compile_baseline,
        "precision": opts.precision,
        "extensions_dir": built.ext_dir,
        "compilers": build.loader_env(built.ext_dir),  # the names torch's loader must find in build.ninja
        "failed_calls": build.failed_calls(built.ext_dir),  # raised again in the candidate, not compiled
        "shape": shape,
        "triton_cache": _triton_entry(task, cfg),
    }
    child = child or start_worker(cfg, now=True)
    if cfg.cpus:
        # The lane's own cores, for the judge and the candidate it started (and all their
        # threads), set here by kbench before the spec leaves: no solution code has run
        # in the candidate yet, so what is moved is kbench's own code.
        cores.pin_tree(child.proc.pid, cfg.cpus)
    sent_at = time.monotonic()
    outcome = child.finish(log_path, cfg.timeout, line=json.dumps(spec))
    messages = outcome.messages
    phases = [m["phase"] for m in messages if isinstance(m.get("phase"), str)]
    phase = phases[-1] if phases else "start"
    data = next((m["result"] for m in messages if isinstance(m.get("result"), dict)), None)
    worker_seconds = time.monotonic() - t0
    seconds = built.seconds + worker_seconds

    if outcome.timed_out:
        return TaskResult(
            **base, status=Status.TIMEOUT, phase=phase, seconds=seconds,
            message=f"no result after {cfg.timeout:.0f} s (--timeout) during {phase}; process group killed",
        )
    if data is None:
        hint = _last_error_line(log_path)
        return TaskResult(
            **base, status=Status.CRASHED, phase=phase, seconds=seconds,
            message=f"worker {outcome.death} during {phase}" + (f": {hint}" if hint else ""),
        )
    timing = from_json_dict(Timing, data["timing"]) if data.get("timing") else None
    check = from_json_dict(CheckResult, data["check"]) if data.get("check") else None
    flags = tuple(Flag(f) for f in data["flags"])
    speedup = timing.speedup if timing else None
    spent = data.get("spent", {})
    not_overhead = spent.get("inputs", 0.0) + spent.get("timing", 0.0) + data.get("phase_seconds", {}).get("compile", 0.0)
    if {Flag.UNTIMED_WORK, Flag.TIMING_MISMATCH, Flag.TAMPERING} & set(flags):
        # The events did not see all the work, the candidate's samples do not fit the
        # wall time the judge measured, or it replaced kbench's own code in its process
        # (its clocks among it, perhaps within the wall-time allowance): no honest ratio exists.
        speedup = None
    message = data["message"]
    if outcome.dropped_log_bytes:
        message = (message + "; " if message else "") + f"output capped: {outcome.dropped_log_bytes} bytes dropped from the log"
    return TaskResult(
        **base,
        status=Status(data["status"]),
        message=message,
        flags=flags,
        ref_ms=timing.ref.median_ms if timing else None,
        sol_ms=timing.sol.median_ms if timing else None,
        speedup=speedup,
        phase=data.get("phase", phase),
        seconds=seconds,
        check=check,
        timing=timing,
        phase_seconds=_with_handoff(data, worker_seconds, outcome.after_result_s, sent_at),
        overhead_seconds=round(worker_seconds - not_overhead, 3),
        spent_seconds=spent,
        custom_share=data.get("custom_share"),
        sandbox=data.get("sandbox"),
    )


def _last_error_line(log_path: Path) -> str:
    """A crashing worker often prints the reason (a CUDA error, a fatal signal)
    just before it dies; the last such line is worth showing."""
    try:
        with open(log_path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 65536))
            tail = f.read().decode(errors="replace")
    except OSError:
        return ""
    hits = [m.group(0).strip() for m in _CUDA_ERROR.finditer(tail)]
    return hits[-1][:300] if hits else ""
