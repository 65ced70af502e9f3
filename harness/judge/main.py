"""The judge process: python -m harness.judge RESULT_FD

Started ahead of its task by kbench (it imports torch meanwhile, and starts
its candidate process, which does the same). It reads its task's spec as one
JSON line on stdin and writes progress and the result as JSON lines to
RESULT_FD, a pipe only it holds: the candidate, its child, never inherits it,
and cannot open it through /proc (this process is not dumpable, and the
candidate is confined by Landlock where the kernel has it). Anything printed,
by the judge or the candidate, is only a log.
"""
from __future__ import annotations

import contextlib
import gc
import json
import os
import sys
import time
from typing import Any

import torch

from ..build import load
from ..discover import shapes
from ..shared import stats
from ..shared.process_age import seconds_since_process_start
from ..records import PREPARE_LINE, Flag, SideTiming, Status, Timing, TimingConfig, to_json_dict
from .remote import Remote
from .spawn import Spawned
from .task import Judge, ProblemFailed, TaskFailed
from .timing import PairResult, Side, Timer, empty_batches
from . import triton_cache

BELOW_FLOOR_FRACTION = 0.9  # faster than 90% of the time to read the inputs from HBM cannot be real
NOISY_REL_CI = 0.05  # speedup interval half-width over 5% of the speedup


def run(spec: dict, remote: Remote, emit) -> dict:
    judge = Judge(spec, remote, lambda name: emit({"phase": name}))
    status, message, timing = Status.OK, "", None
    phase_seconds: dict[str, float] = {}
    started = [time.monotonic(), "load"]

    def phase(name: str) -> None:
        now = time.monotonic()
        phase_seconds[started[1]] = round(phase_seconds.get(started[1], 0.0) + now - started[0], 3)
        started[:] = [now, name]
        emit({"phase": name})

    judge.set_phase = phase
    try:
        judge.load(before_solution=empty_batches)  # timing.py: the fixed cost measured before the import
        judge.check()
        if spec["time"]:
            timing = time_task(judge, spec)
        judge.profile()
        judge.phase("done")
    except TaskFailed as e:
        status, message = e.status, e.message
        if isinstance(e, ProblemFailed):
            import traceback

            traceback.print_exception(e.error)  # the problem's whole traceback, in the task's log
    except torch.OutOfMemoryError as e:
        status, message = Status.RUNTIME_ERROR, f"out of GPU memory in the judge during {judge.phase_name}: {load.last_line(e)[:300]}"
    except Exception as e:  # noqa: BLE001 - a bug of ours or the problem's: say where
        import traceback

        traceback.print_exc()
        status, message = Status.RUNTIME_ERROR, f"judge error during {getattr(judge, 'phase_name', 'load')}: {load.last_line(e)[:500]}"
    phase("end")
    notes = judge.notes
    if notes and status is Status.OK:
        message = "; ".join(notes)
    elif notes:
        message = f"{message} [{'; '.join(notes)}]"
    custom = judge.custom or {}
    return {
        "status": status.value,
        "message": message,
        "flags": sorted(f.value for f in judge.flags),
        "phase": getattr(judge, "phase_name", "load"),
        "check": to_json_dict(judge.check_result) if judge.check_result else None,
        "timing": to_json_dict(timing) if timing else None,
        "phase_seconds": {k: v for k, v in phase_seconds.items() if k != "end"},
        "spent": {k: round(v, 3) for k, v in judge.spent.items()},
        "custom_share": custom.get("share") if isinstance(custom.get("share"), (int, float)) else None,
        "sandbox": judge.sandbox,
    }


def time_task(judge: Judge, spec: dict) -> Timing:
    judge.phase("time")
    baseline = compiled_reference(judge) if spec.get("compile_baseline") else None
    timer = Timer(judge, TimingConfig(**spec["timing"]), baseline)
    with judge.spend("timing"), _profiled(spec):
        pair = timer.run()
    judge.reader.release()
    judge.notes.extend(pair.notes)
    judge.flags |= pair.flags
    return summarize(judge, pair, timer.warm, spec)


@contextlib.contextmanager
def _profiled(spec: dict):
    """KBENCH_PROFILE_TIMING=DIR: the judge's timing phase under cProfile, written to
    DIR/<solution file>.prof (pstats), for finding where a task's timing goes on the
    judge's side. Off by default: a profiler slows the judge's own loop."""
    folder = os.environ.get("KBENCH_PROFILE_TIMING")
    if not folder:
        yield
        return
    import cProfile

    prof = cProfile.Profile()
    prof.enable()
    try:
        yield
    finally:
        prof.disable()
        os.makedirs(folder, exist_ok=True)
        prof.dump_stats(os.path.join(folder, os.path.basename(spec["solution_path"]) + f".{os.getpid()}.prof"))


def compiled_reference(judge: Judge):
    """The reference under torch.compile, compiled (and checked) before timing so
    that compile time never lands in a sample. None, with a note, if it fails."""
    from . import check

    phase = judge.phase_name
    judge.phase("compile")
    try:
        compiled = torch.compile(judge.ref)

        def call(args: list):
            with torch.no_grad():
                return compiled(*args)

        inputs = judge.make_inputs(judge.spec["seed"] + 499)
        check.compare_outputs(call(check.clone_inputs(inputs)), judge.call_reference(check.clone_inputs(inputs)), None, 1e-4)
    except Exception as e:  # noqa: BLE001 - a baseline that fails does not fail the task
        judge.notes.append(f"no torch.compile baseline: {load.last_line(e)[:200]}")
        call = None
    judge.phase(phase)
    return call


# How much longer the host must take to issue a call than the call runs for the call
# to be host-bound: a side near 1 read one way or the other from run to run (on 4
# H100s, 8_CrossEntropyLoss's candidate was host_bound in 9 of 12 warm reruns of one
# set), and a flag must say the same of the same kernel each time.
HOST_BOUND_RATIO = 1.25


def _host_bound(judge: Judge, pair: PairResult, warm: PairResult) -> None:
    """Flag a side whose host takes clearly longer (HOST_BOUND_RATIO) to issue a call
    than the call runs on the device: inside a real model that call's speed is set by
    the host. Where batches were held (cuda_hold), the device's time per call is the
    judge's measure of calls queued ahead of the hold, which no host gap enters, and
    the host's is what queueing them took. Otherwise both come from the warm-up's
    single calls, the device's from the side's own events; those events also span the
    gaps while the host issues a forward of many small kernels, so such a forward read
    near even there (00_legit/many_small_ops.py: 2.4 ms of host time a call, 0.31 ms
    held, not flagged at a ratio of 1.25 on an H100, 2026-11-27). The candidate's
    figures are its word: they can only add the flag."""
    held = pair.clock == "cuda_hold"
    for name, s, w in (("reference", pair.ref, warm.ref), ("solution", pair.sol, warm.sol)):
        if held and s.host_ms and s.figure:
            host, device = stats.median(s.host_ms), stats.median(s.figure)
        elif w.host_ms[1:] and w.claimed_ms[1:]:
            host, device = stats.median(w.host_ms[1:]), stats.median(w.claimed_ms[1:])
        else:
            continue
        if host > HOST_BOUND_RATIO * device:
            judge.flags.add(Flag.HOST_BOUND)
            judge.notes.append(f"{name} takes {host * 1e3:.1f} us of host time to issue a call "
                               f"that runs {device * 1e3:.1f} us on the device")


def summarize(judge: Judge, pair: PairResult, warm: PairResult, spec: dict) -> Timing:
    ref_ms, sol_ms = stats.median(pair.ref.figure), stats.median(pair.sol.figure)
    lo, hi = stats.bootstrap_ratio_ci(pair.ref.figure, pair.sol.figure)
    speedup = ref_ms / sol_ms if sol_ms > 0 else float("inf")
    if speedup > 0 and (hi - lo) / 2 / speedup > NOISY_REL_CI:
        judge.flags.add(Flag.NOISY)
    in_bytes, out_bytes = shapes.nbytes(pair.last_inputs), pair.out_bytes
    nbytes = in_bytes + out_bytes
    floor_ms = None
    bandwidth = spec.get("bandwidth_gbs")
    if bandwidth and pair.clock != "cpu_clock":
        floor_ms = nbytes / (bandwidth * 1e9) * 1e3
        # The flag claims the impossible, so its bound is the hard one: with L2
        # flushed the inputs must come from HBM, but up to an L2's worth of output
        # can sit in L2 when the call ends. A kernel that mostly reads can stream
        # faster than a copy, hence the faster of the two.
        l2 = torch.cuda.get_device_properties(judge.device).L2_cache_size
        fastest = max(bandwidth, spec.get("read_gbs") or 0.0)
        hard_ms = (in_bytes + max(0, out_bytes - l2)) / (fastest * 1e9) * 1e3
        if sol_ms < BELOW_FLOOR_FRACTION * hard_ms:
            judge.flags.add(Flag.BELOW_ROOFLINE)
            judge.notes.append(f"{sol_ms:.4f} ms is below the {hard_ms:.4f} ms it takes to read the inputs from HBM")
    _host_bound(judge, pair, warm)
    graph = pair.clock == "cuda_graph"

    def side(s: Side, w: Side) -> SideTiming:
        host = (w.host_ms[1:] if graph else s.host_ms) or None  # a replay's host time is one launch
        return SideTiming(stats.median(s.figure), stats.iqr(s.figure), len(s.figure),
                          tuple(round(x, 6) for x in s.figure), pair.clock, round(stats.median(host), 6) if host else None,
                          round(stats.median(s.ms), 6) if s.ms else None)

    return Timing(
        ref=side(pair.ref, warm.ref), sol=side(pair.sol, warm.sol), speedup=speedup, speedup_ci=(lo, hi),
        clock=pair.clock, stop_reason=pair.stop_reason, floor_ms=floor_ms, bytes_moved=nbytes,
        compiled=side(pair.baseline, Side()) if pair.baseline else None,
        speedup_vs_compiled=stats.median(pair.baseline.figure) / sol_ms if pair.baseline and sol_ms > 0 else None,
        calls_per_batch=pair.calls, fixed_ms=round(pair.fixed_ms, 4), ref_fixed_ms=round(pair.ref_fixed_ms, 4),
    )


def _prepare_device(remote: Remote) -> None:
    """While waiting for the task, as the next judge to be used: the GPU's context,
    here and in the candidate, which would otherwise be made inside the task. A
    failure here is met again, and reported, where the task needs the GPU."""
    from ..shared import channel
    from . import check
    from .read import Reader

    if os.environ.get("KBENCH_DEVICE") != "cuda":
        return
    device = torch.device("cuda")
    check.warm_up(device)
    # One tensor each way, as every call of the check lends its inputs and the judge
    # reads an output: the first IPC import in the candidate and the first mapping of
    # one of its segments here (the driver's work) happen now rather than in the check.
    shared = reader = None
    try:  # waits for the candidate's imports, as the task's first request would
        shared = channel.Shared(device)
        fds: list[int] = []
        echo = channel.encode(shared.lend([torch.arange(64.0, device=device)]), fds)
        reply, _ = remote.request({"op": "prepare", "device": "cuda", "echo": echo}, fds)
        remote.wait_stopped()
        reader = Reader(device, remote.proc.pid, shared.by_id)
        reader.read(reply.get("out"), reply.get("segs")).sum().item()
    except Exception:  # noqa: BLE001 - a candidate gone or a GPU that fails here fails again, reported, in the task
        pass
    finally:
        if reader is not None:
            reader.release()
        del shared
        if torch.cuda.is_initialized():
            torch.cuda.ipc_collect()
            torch.cuda.empty_cache()


def _settle_imports() -> None:
    """Work every task would pay for inside its timing budget, done while waiting for it:
    numpy loads numpy.ma at the first quantile (0.11 s on the 2-core CI host), and a full
    collection walks every object torch's import made (83 ms there; timing collects once
    before it disables collection). Those objects live as long as the process: frozen,
    a collection no longer walks them."""
    stats.quantile([0.0, 1.0], 0.25)
    gc.collect()
    gc.freeze()


def _ages_line(ages: dict[str, float]) -> str:
    """When this judge's imports were done, it was told it is next, its GPU context (and
    its candidate's) was made, and its spec came, in seconds from its start. A task's
    judge_wait says that the spec waited, not for what: on 4 H200s single tasks waited
    3-5 s for their judge where one GPU's waited none, and which part of a judge's start
    had grown was not known."""
    parts = [f"{'forked from a template' if ages.get('forked') else 'exec'}, imports done at {ages['imported']:.2f} s"]
    if "told_next" in ages:
        parts.append(f"told it is next at {ages['told_next']:.2f} s, ready at {ages['prepared']:.2f} s "
                     f"({ages['prepared'] - ages['told_next']:.2f} s)")
    else:
        parts.append("not told it is next")
    parts.append(f"its spec read at {ages['spec']:.2f} s")
    return ", ".join(parts)


def main(spawned: Spawned, forked: bool = False) -> None:
    """`spawned`: this judge's candidate process, started by __main__ before torch was
    imported here (or forked by this judge, itself `forked` from a template:
    template.py), once this process was made undumpable and a subreaper."""
    result_fd = int(sys.argv[1])
    out = os.fdopen(result_fd, "w", buffering=1)

    def emit(obj: dict) -> None:
        out.write(json.dumps(obj) + "\n")
        out.flush()

    remote = Remote(spawned=spawned)
    _settle_imports()
    ages = {"imported": seconds_since_process_start(), "forked": forked}
    line = sys.stdin.readline().strip()
    while line == PREPARE_LINE:
        ages.setdefault("told_next", seconds_since_process_start())
        _prepare_device(remote)
        ages["prepared"] = seconds_since_process_start()
        line = sys.stdin.readline().strip()
    if not line:
        remote.close()
        os._exit(0)  # not needed after all
    spec_read_at = time.monotonic()  # kbench's clock too (CLOCK_MONOTONIC): how long the spec waited for this judge
    ages["spec"] = seconds_since_process_start()
    print(f"[kbench] this judge's start: {_ages_line(ages)}", flush=True)
    spec = json.loads(line)
    if spec.get("extensions_dir"):
        os.environ["TORCH_EXTENSIONS_DIR"] = spec["extensions_dir"]
    seeded = triton_cache.seed(spec.get("triton_cache"), remote.scratch)  # before the candidate imports the solution
    if seeded:
        print(f"[kbench] Triton: {seeded} files of this solution's compiled kernels, kept from an earlier task "
              f"({spec['triton_cache']})", flush=True)
    t0 = time.monotonic()
    try:
        result = run(spec, remote, emit)
        result["worker_seconds"] = time.monotonic() - t0
        result["spec_read_at"] = spec_read_at
    finally:
        # The candidate is killed (SIGKILL to its group: none of its code runs after
        # this) before the verdict leaves, and dies while the verdict travels: kbench
        # then ends this process and reaps every process of the task, the candidate
        # included (reparented to kbench, a subreaper, when this one dies), before it
        # starts the next task. Waiting here for its death first put the two CUDA
        # context teardowns one after the other (0.1-0.2 s each on an H100).
        t1 = time.monotonic()
        remote.kill()
    if result.get("status") == "ok":
        kept = triton_cache.keep(spec.get("triton_cache"), remote.scratch)
        if kept.startswith("kept"):
            print(f"[kbench] Triton: {kept} of this solution's compiled kernels for its later tasks", flush=True)
    remote.remove_scratch()  # here: kbench ends this process once the verdict is read
    result["close_seconds"] = round(time.monotonic() - t1, 3)
    sys.stdout.flush()
    sys.stderr.flush()
    emit({"result": result})
    remote.close()  # for a kbench that does not end this process at once
    os._exit(0)  # no interpreter teardown: CUDA teardown can hang
