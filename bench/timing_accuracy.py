"""Timing accuracy: kbench's device times against the profiler's kernel durations,
for kernels written as language models write them (bench/timing_tasks.py).

1. `python cli.py run` once over the set (builds in parallel, cached in <work>/cache).
2. Two profiling processes, one per side (the references; the solutions, each loading
   kbench's build of it): torch.profiler (CUPTI) records every kernel, memset and memcpy;
   a call's device time is the sum of their durations. Two measures per task and side:
   - cold: each call preceded by kbench's L2 flush (a read of 2x the L2 size); median
     over CALLS calls.
   - back to back, as kbench's judge times its held batches: batches of BATCH calls
     (fewer where their inputs and outputs would pass B2B_MEMORY_SHARE of the free
     memory; at least MIN_BATCH), each call on inputs of its own drawn before the batch
     (get_inputs() after a seed of its own, as the judge draws them; clones where that
     fails or draws other shapes) and an output of its own, kept to the batch's end;
     one flush before the batch; the calls queued behind a hold (a torch.cuda._sleep
     longer than the host takes to queue them), so that the device runs them back to
     back, not at the host's pace. Batches with a marker kernel before each call give
     each call's kernel sum (median over B2B_BATCHES batches); batches without give the
     span from call 1's first op to call n's last, over n: the kernels and the gaps
     between them (median over B2B_BATCHES spans).
   What running back to back costs a call is in its kernels' durations only in the
   second measure: writing back the dirty output lines the previous call left in L2,
   say, which the cold measure's flush (a read) evicts before the call, uncharged.
3. Per task and side: kbench's median against each kernel sum. kbench's clock also counts
   the gaps between a call's kernels, hence the target: within 5% + 1 us per launch,
   judged against the cold sum and, separately, the back-to-back sum.
4. Injected waits: 12_Tanh with a device-side spin of 10, 50 and 2000 us after its kernel
   in the same stream; kbench(with wait) - kbench(without) must recover the wait within
   3% or 1 us, whichever is larger. Judged twice: against the nominal wait, and against
   the spin kernel's duration as the profiler saw it (cold measure). A spin of N us by
   globaltimer runs N us plus its kernel's own start and exit, which it cannot time; the
   profiler's duration is what the device did, so the error against it leaves out that
   overshoot and keeps what kbench's clock adds (the gap before the spin's launch, say).

    python bench/timing_accuracy.py --work DIR --md OUT.md --json OUT.json
    python bench/timing_accuracy.py --dry-run --work DIR     # the files and the trace split, checked on the CPU
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

import timing_tasks as tt

CALLS = 50
WARMUP = 5  # the first calls load modules, autotune Triton, allocate
SEED = 42
# Back to back, as kbench's held batches run: BATCH calls behind one flush, fewer where a
# batch's inputs and outputs would pass B2B_MEMORY_SHARE of the free memory (never under
# MIN_BATCH), B2B_BATCHES batches of each kind (marked: per-call sums; unmarked: the span).
BATCH, MIN_BATCH, B2B_MEMORY_SHARE, B2B_BATCHES = 20, 5, 0.25, 5
# The hold in front of a batch (a torch.cuda._sleep) must outlast the host's queueing of
# the batch, or the device runs the calls at the host's pace: HOLD_FACTOR times the host's
# time for an unprofiled batch (CUPTI slows launches), at least HOLD_MIN_US, 4x per retry.
HOLD_MIN_US, HOLD_FACTOR, HOLD_TRIES = 1000.0, 4.0, 3
KBENCH_ARGS = ("--time-budget", "4")  # per task; most stop earlier, once their interval is within 1%


# ---- the profiling child: one process per side -------------------------------------------

def device_ops(prof, scratch: Path) -> list[dict]:
    """Every kernel, memset and memcpy the profiler saw, in device order."""
    path = scratch / "trace.json"
    prof.export_chrome_trace(str(path))
    events = json.loads(path.read_text())["traceEvents"]
    ops = [e for e in events if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memset", "gpu_memcpy")]
    return sorted(ops, key=lambda e: e["ts"])


def split_calls(ops: list[dict], marker_names: set[str], flush_seq: list[str]) -> list[list[dict]]:
    """One list of ops per call. Each call is queued as marker, flush, marker, call;
    the ops between two markers are a flush where they are exactly the flush's own
    ops, and a call where they follow a flush. Splitting on the flush's own kernel
    names alone mistook a model's memset (MSELoss's mean) for a flush."""
    segments = _segments(ops, marker_names)
    return [seg for prev, seg in zip(segments, segments[1:])
            if [o["name"] for o in prev] == flush_seq and [o["name"] for o in seg] != flush_seq]


def _segments(ops: list[dict], marker_names: set[str]) -> list[list[dict]]:
    """The ops after each marker, up to the next one."""
    segments: list[list[dict]] = []
    for op in ops:
        if op["name"] in marker_names:
            segments.append([])
        elif segments:
            segments[-1].append(op)
    return segments


def _marker() -> None:
    """A kernel no model launches, around each flush (torch's own GPU spin, 1 cycle)."""
    import torch

    torch.cuda._sleep(1)


def profile_task(task: dict, side: str, flush, markers: dict, scratch: Path) -> dict:
    import torch
    from torch.profiler import ProfilerActivity, profile

    from harness.build import load

    tag = Path(task["solution_path"]).stem + str(abs(hash(task["solution_path"])))
    problem = load.import_file(task["problem_path"], f"bench_problem_{tag}")
    torch.manual_seed(SEED)
    with torch.device("cuda"):  # as kbench's judge draws them
        inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in problem.get_inputs()]
        init = problem.get_init_inputs()
    started = time.monotonic()
    if side == "ref":
        model = problem.Model(*init).cuda()
    else:
        os.environ["TORCH_EXTENSIONS_DIR"] = task["ext_dir"]  # kbench's build: loaded, not rebuilt
        model = load.import_file(task["solution_path"], f"bench_solution_{tag}").ModelNew(*init).cuda()
    load_s = time.monotonic() - started
    with torch.no_grad():
        for _ in range(WARMUP):
            model(*inputs)
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(CALLS + 1):
                _marker()
                flush()
                _marker()
                model(*inputs)
            torch.cuda.synchronize()
    # The first call is dropped: a profiling session can miss its first records.
    calls = split_calls(device_ops(prof, scratch), markers["names"], markers["flush"])[1:]
    if not CALLS - 2 <= len(calls) <= CALLS:
        raise RuntimeError(f"{len(calls) + 1} calls after a flush seen in the trace for {CALLS + 1} calls")
    cold = {**call_sums(calls), "load_s": round(load_s, 2)}
    try:
        with torch.no_grad():
            cold["b2b"] = profile_back_to_back(problem, model, inputs, flush, markers, scratch)
    except Exception as e:  # noqa: BLE001 - the cold measure stands without it
        cold["b2b"] = {"error": f"{type(e).__name__}: {e}"[:400]}
    return cold


def call_sums(calls: list[list[dict]]) -> dict:
    """Median of the calls' kernel sums, its IQR, launches a call, each kernel's median."""
    sums = [sum(op["dur"] for op in call) for call in calls]
    by_name: dict[str, list[float]] = {}
    for call in calls:
        for op in call:
            by_name.setdefault(op["name"][:80], []).append(op["dur"])
    return {"sum_us": statistics.median(sums), "sum_iqr_us": _iqr(sums),
            "launches": statistics.median_high([len(call) for call in calls]),
            "ops_us": {name: statistics.median(d) for name, d in by_name.items()}}


# ---- back to back: kbench's held batches under the profiler ---------------------------------

def profile_back_to_back(problem, model, inputs: list, flush, markers: dict, scratch: Path) -> dict:
    """B2B_BATCHES marked and as many unmarked batches of n calls, as kbench's judge times
    them: each call on inputs of its own, drawn before the batch, and an output of its own,
    kept until the batch ends; one flush before the batch; the calls queued behind a hold,
    so that the device runs them back to back. A marked batch has a marker before each
    call, for each call's kernel sum; an unmarked one has none between calls, for the
    device's span from call 1's first op to call n's last, over n (with the gaps)."""
    n = batch_size(_nbytes(inputs) + _nbytes(model(*inputs)))
    draw, how = input_maker(problem, inputs)
    seeds = iter(range(SEED + 1, SEED + 1 + (2 * B2B_BATCHES + 1) * n))

    def fresh() -> list[list]:
        return [draw(next(seeds)) for _ in range(n)]

    hold_us = max(HOLD_MIN_US, HOLD_FACTOR * _queue_seconds(model, fresh()) * 1e6)  # and the allocator holds n outputs
    rate = sleep_cycles_per_us()
    calls, spans, unmarked = [], [], []
    for _ in range(B2B_BATCHES):
        ops, hold_us = profiled_batch(model, fresh(), flush, True, hold_us, rate, scratch)
        got = batch_calls(ops, markers)
        if len(got) != n:
            raise RuntimeError(f"{len(got)} calls seen in the trace of a marked batch of {n}")
        calls += got
        ops, hold_us = profiled_batch(model, fresh(), flush, False, hold_us, rate, scratch)
        got = batch_calls(ops, markers)
        if len(got) != 1 or not got[0]:
            raise RuntimeError(f"{[len(seg) for seg in got]} ops seen in the trace of an unmarked batch, not one list")
        spans.append(span_us(got[0]) / n)
        unmarked.append(sum(op["dur"] for op in got[0]) / n)
    return {**call_sums(calls), "span_us": statistics.median(spans), "spans_us": spans,
            "unmarked_sum_us": statistics.median(unmarked), "batch": n, "batches": B2B_BATCHES, "inputs": how,
            "hold_us": round(hold_us, 1)}


def batch_size(call_bytes: int) -> int:
    """Calls in a batch: BATCH, fewer where their inputs and outputs would pass
    B2B_MEMORY_SHARE of the free memory (the allocator's cached blocks count as free)."""
    import torch

    free = torch.cuda.mem_get_info()[0] + torch.cuda.memory_reserved() - torch.cuda.memory_allocated()
    return max(MIN_BATCH, min(BATCH, int(B2B_MEMORY_SHARE * free) // max(call_bytes, 1)))


def input_maker(problem, first: list):
    """(seed -> a call's inputs, how): get_inputs() after torch.manual_seed(seed), as kbench's
    judge draws each copy ("drawn"); clones of `first` ("clones") where get_inputs fails or
    draws another shape or dtype, for which kbench refuses to time."""
    import torch

    def drawn(seed: int) -> list:
        torch.manual_seed(seed)
        with torch.device("cuda"):
            return [x.cuda() if isinstance(x, torch.Tensor) else x for x in problem.get_inputs()]

    def clones(_seed: int) -> list:
        return [x.clone() if isinstance(x, torch.Tensor) else x for x in first]

    try:
        if _layout(drawn(SEED + 1)) == _layout(first):
            return drawn, "drawn"
    except Exception:  # noqa: BLE001 - the clones still time the calls back to back
        pass
    return clones, "clones"


def _layout(xs: list) -> list:
    import torch

    return [(tuple(x.shape), x.dtype) if isinstance(x, torch.Tensor) else x for x in xs]


def _nbytes(x) -> int:
    """Bytes of the tensors in x: a tensor, or a list or tuple of them (an output may be either)."""
    import torch

    if isinstance(x, torch.Tensor):
        return x.numel() * x.element_size()
    return sum(_nbytes(y) for y in x) if isinstance(x, (list, tuple)) else 0


def _queue_seconds(model, inputs: list[list]) -> float:
    """The host's time to queue a batch, unprofiled and unheld; the outputs kept until it
    ends, so the allocator holds memory for all of them afterwards: a profiled batch that
    had to ask the driver for memory would wait for the held stream."""
    import torch

    started = time.perf_counter()
    outs = [model(*x) for x in inputs]
    seconds = time.perf_counter() - started
    torch.cuda.synchronize()
    del outs
    return seconds


def sleep_cycles_per_us() -> float:
    """torch.cuda._sleep counts SM cycles: its rate now, for a hold of a given length."""
    import torch

    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    torch.cuda._sleep(1_000_000)
    end.record()
    end.synchronize()
    return 1_000_000 / (start.elapsed_time(end) * 1e3)


def profiled_batch(model, inputs: list[list], flush, marked: bool, hold_us: float, rate: float,
                   scratch: Path) -> tuple[list[dict], float]:
    """One batch in a profiling session of its own (the inputs of the next are drawn outside
    any), with the hold it needed: a batch the host had not queued before the hold ended
    ran at the host's pace, and runs again behind a hold 4x as long."""
    from torch.profiler import ProfilerActivity, profile

    for _ in range(HOLD_TRIES):
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            ahead = queue_batch(model, inputs, flush, marked, int(hold_us * rate))
        if ahead:
            return device_ops(prof, scratch), hold_us
        hold_us *= 4
    raise RuntimeError(f"the host had not queued {len(inputs)} calls by the end of a hold of {hold_us / 4:.0f} us")


def queue_batch(model, inputs: list[list], flush, marked: bool, hold_cycles: int) -> bool:
    """Queued as marker, flush (these two absorb the records a session can miss at its
    start), hold, flush, then marker, call 1, [marker,] call 2, ...: the hold is the
    marker's kernel too, so the ops after the last flush are the calls (batch_calls).
    True when every call was queued before the hold ended."""
    import torch

    _marker()
    flush()
    torch.cuda._sleep(hold_cycles)
    held = torch.cuda.Event()
    held.record()
    flush()
    outs = []
    for i, x in enumerate(inputs):
        if marked or i == 0:
            _marker()
        outs.append(model(*x))
    ahead = not held.query()
    torch.cuda.synchronize()
    return ahead


def batch_calls(ops: list[dict], markers: dict) -> list[list[dict]]:
    """The ops after a batch's flush, one list per marker: each call of a marked batch;
    all the calls of an unmarked one, as one list."""
    segments = _segments(ops, markers["names"])
    flushes = [i for i, seg in enumerate(segments) if [o["name"] for o in seg] == markers["flush"]]
    if not flushes:
        raise RuntimeError("no flush seen in the trace of a batch")
    return segments[flushes[-1] + 1:]


def span_us(ops: list[dict]) -> float:
    """The device's time from the first op's start to the last op's end."""
    return max(op["ts"] + op["dur"] for op in ops) - min(op["ts"] for op in ops)


def check_trace_split() -> str:
    """--dry-run: the trace splitting on a synthetic trace, queued as the profiling child
    queues its runs (M the marker, the flush a memset and a sum, a call's own memset
    among its kernels), each op 1 us with 1 us gaps, the first record lost as a
    session's can be. Names and times only: no GPU."""
    markers = {"names": {"M"}, "flush": ["memset", "sum"]}
    call, prefix = ["a", "memset", "b"], ["M", "memset", "sum", "M", "memset", "sum"]  # queue_batch's; M: the hold

    def ops(names: list[str]) -> list[dict]:
        return [{"name": name, "ts": 2.0 * i, "dur": 1.0} for i, name in enumerate(names)][1:]

    cold = split_calls(ops(["M", "memset", "sum", "M", *call] * 4), markers["names"], markers["flush"])
    assert [[op["name"] for op in c] for c in cold] == [call] * 3, cold
    marked = batch_calls(ops(prefix + ["M", *call] * 3), markers)
    assert [[op["name"] for op in c] for c in marked] == [call] * 3, marked
    unmarked = batch_calls(ops(prefix + ["M"] + call * 3), markers)
    assert len(unmarked) == 1 and span_us(unmarked[0]) / 3 == 17.0 / 3, unmarked
    return "trace split checked on a synthetic trace: cold calls, a marked batch's calls, an unmarked batch's span"


def _iqr(xs: list[float]) -> float:
    q = statistics.quantiles(xs, n=4)
    return q[2] - q[0]


def profile_child(side: str, spec_path: str) -> None:
    """Run in its own process: every task's `side` ('ref' or 'sol'), results to spec['out']."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    sys.path.insert(0, str(tt.ROOT))
    spec = json.loads(Path(spec_path).read_text())
    scratch = Path(spec["scratch"])
    torch.backends.cuda.matmul.allow_tf32 = False  # kbench turns TF32 off for both sides
    torch.backends.cudnn.allow_tf32 = False
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    flush_buf = torch.ones(2 * l2 // 4, dtype=torch.int32, device="cuda")  # kbench's flush (harness/timer.py)
    flush = flush_buf.sum
    for _ in range(3):
        flush()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:  # learn the names of the marker's and the flush's kernels
        for _ in range(3):
            _marker()
        torch.cuda.synchronize()
    marker_names = {op["name"] for op in device_ops(prof, scratch)}
    assert marker_names, "the profiler recorded no kernel of the marker"
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(4):
            _marker()
            flush()
        torch.cuda.synchronize()
    seqs = [[o["name"] for o in seg] for seg in _segments(device_ops(prof, scratch), marker_names)]
    flush_names = seqs[-1]  # the flush's ops in order, from its last (fully recorded) run
    assert flush_names, "the profiler recorded no kernel of the L2 flush"
    markers = {"names": marker_names, "flush": flush_names}
    results = {}
    for task in spec["tasks"]:
        try:
            results[task["solution_path"]] = profile_task(task, side, flush, markers, scratch)
        except Exception as e:  # noqa: BLE001 - one broken task must not lose the others
            results[task["solution_path"]] = {"error": f"{type(e).__name__}: {e}"[:400]}
        print(f"[profile {side}] {Path(task['solution_path']).name}: {results[task['solution_path']]}"[:300],
              flush=True)
    Path(spec["out"]).write_text(json.dumps({"flush_names": flush_names, "marker_names": sorted(marker_names),
                                             "tasks": results}))


def profile_sides(problems: Path, solutions: Path, cache: Path, work: Path) -> dict[str, dict]:
    """Each side profiled in a process of its own; the solutions load kbench's builds."""
    import torch

    from harness.build import stage as build
    from harness.discover.folders import discover
    from harness.shared.isolate import child_env

    major, minor = torch.cuda.get_device_capability(0)
    arch = f"{major}.{minor}"  # as kbench builds (pipeline.probe_device): the same build folders
    found = discover(problems, solutions).tasks
    built = build.build_all(list(found), build.BuildConfig("cuda", arch, cache / "builds", 16, 600.0))
    tasks = [{"problem_path": t.problem_path, "solution_path": t.solution_path, "ext_dir": built[t.key].ext_dir}
             for t in found]
    env = child_env(dict(os.environ))
    env["TORCH_CUDA_ARCH_LIST"] = arch
    out = {}
    for side in ("ref", "sol"):
        spec = work / f"profile_{side}.json"
        spec.write_text(json.dumps({"tasks": tasks, "out": str(work / f"profiled_{side}.json"),
                                    "scratch": tempfile.mkdtemp(dir=work)}))
        subprocess.run([sys.executable, __file__, "--profile-child", side, str(spec)], env=env, check=True)
        out[side] = json.loads((work / f"profiled_{side}.json").read_text())
    return out


# ---- the report -----------------------------------------------------------------------------

def compare(kb_us: float | None, prof: dict) -> dict:
    """kbench's median against the profiler's kernel sum; target 5% + 1 us per launch."""
    if kb_us is None or "sum_us" not in prof:
        return {"error_us": None, "error_pct": None, "met": False}
    p, launches = prof["sum_us"], prof["launches"]
    err = kb_us - p
    return {"error_us": err, "error_pct": 100 * err / p, "allowed_us": 0.05 * p + 1.0 * launches,
            "met": abs(err) <= 0.05 * p + 1.0 * launches}


def build_rows(results: dict, profiled: dict) -> list[dict]:
    rows = []
    for r in results["results"]:
        row = {"task": tt.label(r), "solution_path": r["solution_path"], "status": r["status"],
               "flags": r.get("flags") or [], "message": r.get("message", "")}
        for which in ("ref", "sol"):
            by_path = {os.path.realpath(k): v for k, v in profiled[which]["tasks"].items()}
            prof = by_path.get(os.path.realpath(r["solution_path"]), {"error": "not profiled"})
            kb_us = tt.side(r, which)["us"]
            # The same target against the back-to-back kernel sum (prof["b2b"]: the same keys).
            row[which] = {"kbench": tt.side(r, which), "profiler": prof, **compare(kb_us, prof),
                          "b2b": compare(kb_us, prof.get("b2b") or {})}
        rows.append(row)
    return rows


def _cell(s: dict) -> list:
    kb, prof = s["kbench"], s["profiler"]
    err = "-" if s["error_us"] is None else f"{s['error_us']:+.2f} ({s['error_pct']:+.1f}%)"
    return [tt.us(kb["us"]), tt.us(prof.get("sum_us")) if "sum_us" in prof else prof.get("error", "-"),
            prof.get("launches", "-"), err, kb["clock"] or "-", tt.us(kb["host_us"])]


def _b2b_cells(s: dict) -> list:
    b2b = s["profiler"].get("b2b") or {}
    if "sum_us" not in b2b:
        return [b2b.get("error", "-"), "-"]
    return [tt.us(b2b["sum_us"]), tt.us(b2b["span_us"])]


def wait_rows(rows: list[dict]) -> list[dict]:
    """Recovered wait = kbench's solution median with the wait less without it, judged
    against the nominal wait and against the spin kernel's profiled (cold) duration."""
    by_name = {Path(r["solution_path"]).stem: r for r in rows if r["task"].startswith(tt.WAIT_PROBLEM)}
    base = by_name.get(tt.wait_name(0))
    out = []
    for wait in tt.WAITS_US:
        r = by_name.get(tt.wait_name(wait))
        kb = r and r["sol"]["kbench"]["us"]
        base_us = base and base["sol"]["kbench"]["us"]
        got = None if kb is None or base_us is None else kb - base_us
        spin = [v for k, v in (r or {}).get("sol", {}).get("profiler", {}).get("ops_us", {}).items() if "spin_wait" in k]
        spin_us = spin[0] if spin else None
        out.append({"wait_us": wait, "kbench_us": kb, "base_us": base_us, "recovered_us": got,
                    **_recovered(got, wait), "spin_kernel_us": spin_us,
                    **{f"spin_{k}": v for k, v in _recovered(got, spin_us).items()},
                    "clock": r and r["sol"]["kbench"]["clock"]})
    return out


def _recovered(got: float | None, want: float | None) -> dict:
    """A recovered wait against what it should be: within 3% or 1 us, whichever is larger."""
    if want is None:
        return {"error_us": None, "allowed_us": None, "met": False}
    allowed = max(0.03 * want, 1.0)
    return {"error_us": None if got is None else got - want, "allowed_us": allowed,
            "met": got is not None and abs(got - want) <= allowed}


def _wait_cells(w: dict) -> list:
    """The nominal columns where they always were, the spin kernel's after them."""
    error, allowed, met = _judged(w["error_us"], w["allowed_us"], w["met"])
    return [w["wait_us"], tt.us(w["base_us"]), tt.us(w["kbench_us"]), tt.us(w["recovered_us"]), error, allowed,
            tt.us(w["spin_kernel_us"]), w["clock"] or "-", met,
            *_judged(w["spin_error_us"], w["spin_allowed_us"], w["spin_met"])]


def _judged(error_us: float | None, allowed_us: float | None, met: bool) -> list[str]:
    """Cells of one judgement of a recovered wait: error, allowed, met."""
    return ["-" if error_us is None else f"{error_us:+.2f}", "-" if allowed_us is None else f"{allowed_us:.1f}",
            "yes" if met else "NO"]


def render(rows: list[dict], waits: list[dict], run: dict, command: str, wall_s: float) -> str:
    header = ["task", "status", "ref kbench us", "ref profiler us", "ref launches", "ref error us (%)", "ref clock",
              "ref host us", "sol kbench us", "sol profiler us", "sol launches", "sol error us (%)", "sol clock",
              "sol host us", "flags", "within 5% + 1 us/launch", "ref b2b profiler us", "ref span us",
              "sol b2b profiler us", "sol span us", "within 5% + 1 us/launch of b2b"]
    table = [[r["task"], r["status"], *_cell(r["ref"]), *_cell(r["sol"]), " ".join(r["flags"]) or "-",
              "yes" if r["ref"]["met"] and r["sol"]["met"] else "NO", *_b2b_cells(r["ref"]), *_b2b_cells(r["sol"]),
              "yes" if r["ref"]["b2b"]["met"] and r["sol"]["b2b"]["met"] else "NO"] for r in rows]
    sides = [r[s] for r in rows for s in ("ref", "sol")]
    wait_table = [_wait_cells(w) for w in waits]
    notes = [f"- {r['task']}: {r['status']}: {r['message']}" for r in rows if r["status"] != "ok"]
    return "\n".join([
        "# Timing accuracy: kbench against the profiler's kernel sums",
        "",
        f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC, {run.get('device')}, torch {run.get('torch_version')}, "
        f"CUDA {run.get('cuda_version')}; `{command}` ({wall_s:.0f} s; builds {run.get('build_seconds')} s).",
        "",
        f"Profiler, cold ('profiler us'): median over {CALLS} calls of the sum of a call's kernel, memset and memcpy "
        "durations (CUPTI), each call after kbench's L2 flush (excluded), one process per side. Profiler, back to "
        f"back ('b2b profiler us'), as kbench's held batches run: batches of up to {BATCH} calls (at least "
        f"{MIN_BATCH}; fewer where their inputs and outputs would pass {B2B_MEMORY_SHARE:.0%} of the free memory), "
        "each call on inputs of its own drawn before the batch and an output of its own, one flush before the batch, "
        "the calls queued behind a hold so that the device runs them without waiting for the host; the median of "
        f"each call's kernel sum over {B2B_BATCHES} batches with a marker kernel between calls. 'span us': the "
        "device's time from the first op of call 1 to the last op of call n, over n, median over "
        f"{B2B_BATCHES} batches without markers: the kernels and the gaps between them. kbench: its ref/sol "
        f"medians, from one run with {' '.join(KBENCH_ARGS)}; tasks are timed as their builds finish, so the first "
        "ones (the Triton tasks, which have none) ran while later builds loaded the host, as in any kbench run.",
        "",
        f"**{sum(s['met'] for s in sides)} of {len(sides)} sides within 5% + 1 us per launch "
        "(cold, one call after a flush).**",
        "",
        f"**{sum(s['b2b']['met'] for s in sides)} of {len(sides)} sides within 5% + 1 us per launch "
        "(back to back, as kbench times them).**",
        "",
        tt.md_table(header, table),
        *(["", "Tasks not ok:", *notes] if notes else []),
        "",
        "## Injected device waits",
        "",
        f"{tt.WAIT_PROBLEM} with a spin of N us after its kernel, in the same stream (globaltimer edges, "
        "cycle-interpolated). Recovered = kbench's solution median with the wait less without it, judged twice, "
        "each time within 3% or 1 us, whichever is larger:",
        "",
        "- against the nominal wait, N us ('error vs nominal us', 'allowed vs nominal us', 'met vs nominal'): what "
        "the solution asked for;",
        "- against the spin kernel ('error vs spin kernel us', 'allowed vs spin kernel us', 'met vs spin kernel'): "
        "'spin kernel us' is the profiler's median duration of the spin kernel itself (cold measure), what the device "
        "did. A spin of N us by globaltimer runs N us from its own first instructions, plus its kernel's start and "
        "exit, which no clock inside it sees, so the spin kernel runs longer than N: the error against the nominal "
        "wait carries that overshoot, the error against the spin kernel only what kbench's clock adds to what the "
        "device ran (the gap before the spin's launch, for one).",
        "",
        f"**{sum(w['met'] for w in waits)} of {len(waits)} waits recovered within 3% or 1 us of the nominal wait.**",
        "",
        f"**{sum(w['spin_met'] for w in waits)} of {len(waits)} waits recovered within 3% or 1 us of the spin "
        "kernel's profiled duration.**",
        "",
        tt.md_table(["wait us", "kbench without us", "kbench with us", "recovered us", "error vs nominal us",
                     "allowed vs nominal us", "spin kernel us", "clock", "met vs nominal", "error vs spin kernel us",
                     "allowed vs spin kernel us", "met vs spin kernel"], wait_table),
    ])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", type=Path, help="work folder: the task files, kbench's runs and build cache "
                                              "[default: a new temporary one]")
    ap.add_argument("--md", type=Path, help="also write the Markdown table here")
    ap.add_argument("--json", type=Path, help="write the raw numbers here")
    ap.add_argument("--dry-run", action="store_true", help="write the task files and check them on the CPU; no GPU")
    ap.add_argument("--profile-child", nargs=2, metavar=("SIDE", "SPEC"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.profile_child:
        profile_child(*a.profile_child)
        return
    work = (a.work or Path(tempfile.mkdtemp(prefix="kbench-accuracy-"))).resolve()
    problems, solutions = tt.write_work(work)
    if a.dry_run:
        print("\n".join(tt.validate(problems, solutions)))
        print(check_trace_split())
        print(f"dry run ok: files in {work}")
        return
    started = time.monotonic()
    results = tt.run_kbench(problems, solutions, work / "run", work / "cache", *KBENCH_ARGS)
    profiled = profile_sides(problems, solutions, work / "cache", work)
    rows = build_rows(results, profiled)
    waits = wait_rows(rows)
    command = "python bench/timing_accuracy.py " + " ".join(sys.argv[1:])
    run = results.get("run", {})
    tt.write_outputs(render(rows, waits, run, command, time.monotonic() - started),
                     {"run": run, "kbench_args": KBENCH_ARGS, "calls": CALLS, "batch": BATCH, "min_batch": MIN_BATCH,
                      "b2b_batches": B2B_BATCHES, "tasks": rows, "waits": waits,
                      "flush_names": profiled["ref"].get("flush_names")}, a.md, a.json)


if __name__ == "__main__":
    main()
