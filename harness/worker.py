"""Child entry point: load -> check -> time one task.

Run as: python -m harness.worker SPEC.json
The result goes to the file named in the spec, never to stdout: anything
printed (by us or the solution) is only a log. The current phase is written
to a side file first, so that if the solution kills this process the parent
can still say where it died.
"""
from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

# Imported before any solution code: timer and graph_clock capture the real
# clocks and graph functions at import.
import torch

from harness import graph_clock, timer  # noqa: E402,F401  (must precede the solution import)
from harness import build, check, guard, load, shapes, stats  # noqa: E402
from harness.records import Flag, SideTiming, Status, Timing, to_json_dict  # noqa: E402

UNTIMED_FRACTION = 0.25  # wall time beyond the events, as a share of the event time,
UNTIMED_MIN_MS = 0.05  # and at least this much, means work escaped the events
BELOW_FLOOR_FRACTION = 0.9  # faster than 90% of the time to read the inputs from HBM cannot be real
NOISY_REL_CI = 0.05  # speedup interval half-width over 5% of the speedup


class TaskFailed(Exception):
    def __init__(self, status: Status, message: str):
        super().__init__(message)
        self.status, self.message = status, message


class Worker:
    def __init__(self, spec: dict):
        self.spec = spec
        self.device = torch.device(spec["device"])
        self.flags: set[Flag] = set()
        self.notes: list[str] = []
        self.phase_path = Path(spec["phase_path"])
        self.check_result = None
        self.timing = None
        self.phase_seconds: dict[str, float] = {}
        # Seconds that are not the harness's own overhead: making inputs, timing.
        self.spent: dict[str, float] = {}
        self.spending = False

    # -- plumbing -------------------------------------------------------------
    def phase(self, name: str) -> None:
        now = time.monotonic()
        if getattr(self, "current", None):
            self.phase_seconds[self.current] = round(now - self.phase_started, 3)
        self.phase_path.write_text(name)
        self.current, self.phase_started = name, now
        print(f"[kbench] phase {name}", flush=True)

    @contextlib.contextmanager
    def spend(self, what: str):
        """Add the wall time of the block (device work included) to spent[what].
        A block inside another counts only in the outer one (inputs made while
        timing are timing), so the buckets never overlap."""
        if self.spending:
            yield
            return
        self.spending = True
        t0 = time.monotonic()
        try:
            yield
        finally:
            self.sync()
            self.spent[what] = self.spent.get(what, 0.0) + time.monotonic() - t0
            self.spending = False

    def sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def make_inputs(self, seed: int, which: str = "random", index: int = 0) -> list:
        with self.spend("inputs"):
            torch.manual_seed(seed)
            with torch.device(self.device):
                if which == "random":
                    inputs = list(self.problem.get_inputs())
                else:
                    inputs = list(self.problem.get_check_inputs()[index])
            return [x.to(self.device) if isinstance(x, torch.Tensor) else x for x in inputs]

    def call_solution(self, inputs: list) -> Any:
        before_threads = guard.live_threads()
        with torch.no_grad():
            out = self.sol(*inputs)
        left = guard.new_threads(before_threads)
        if left:
            self.flags.add(Flag.UNTIMED_WORK)
            self.notes.append(f"forward left threads running: {', '.join(left[:3])}")
        return out

    def call_reference(self, inputs: list) -> Any:
        # A solution may have switched TF32 on for its own matmuls; the reference runs in true fp32.
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        with torch.no_grad():
            return self.ref(*inputs)

    def check_tampering(self, when: str) -> None:
        touched = guard.changed(self.snapshot)
        if touched:
            self.flags.add(Flag.TAMPERING)
            note = f"replaced {', '.join(touched[:4])}{' ...' if len(touched) > 4 else ''} {when}"
            if note not in self.notes:
                self.notes.append(note)
            self.snapshot = guard.snapshot()

    # -- stages ---------------------------------------------------------------
    def load(self) -> None:
        self.phase("load")
        # True fp32 for everyone unless a solution asks otherwise: torch's default lets
        # cuDNN convolutions use TF32 (~3e-4 relative), which would fail even the
        # reference run as its own solution.
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        self.hooks = load.install_build_hooks(self.device.type)
        self.snapshot = guard.snapshot()
        try:
            self.problem = load.load_problem(self.spec["problem_path"])
        except Exception as e:  # noqa: BLE001
            raise TaskFailed(Status.LOAD_ERROR, f"problem file {self.spec['problem_path']}: {load.last_line(e)}")
        self._refuse_if_too_big()
        self.phase("import")
        try:
            self.solution = load.load_solution(self.spec["solution_path"], self.device.type)
        except (Exception, SystemExit) as e:  # noqa: BLE001 - a solution may raise anything
            raise TaskFailed(*build.import_failure(e, self.hooks, self.device.type))
        self.check_tampering("at import")
        self.phase("construct")
        seed = self.spec["seed"]
        torch.manual_seed(seed)
        with torch.device(self.device):
            init = list(self.problem.get_init_inputs())
            torch.manual_seed(seed)
            self.ref = self.problem.Model(*init).to(self.device)
            torch.manual_seed(seed)
            try:
                self.sol = self.solution.ModelNew(*init)
                if isinstance(self.sol, torch.nn.Module):
                    self.sol = self.sol.to(self.device)
            except Exception as e:  # noqa: BLE001
                raise TaskFailed(Status.LOAD_ERROR, f"ModelNew(*get_init_inputs()) raised: {load.last_line(e)}")
        self._share_weights()
        self.check_tampering("in the constructor")

    def _refuse_if_too_big(self) -> None:
        """Refuse before allocating anything when the checks cannot fit on this GPU.
        The problem's bytes come from the parent (found once per problem on the
        meta device, which costs seconds of imports in a fresh process)."""
        shape = self.spec.get("shape")
        if self.device.type != "cuda" or not shape:
            return
        inputs, outputs = shape["input_bytes"], shape["output_bytes"]
        need = shapes.peak_bytes(inputs, outputs)
        total = torch.cuda.get_device_properties(self.device).total_memory
        if need > 0.95 * total:
            raise TaskFailed(
                Status.SKIPPED,
                f"needs about {need / 1e9:.1f} GB of GPU memory ({shapes.INPUT_COPIES} x "
                f"{inputs / 1e9:.2f} GB of inputs + {shapes.OUTPUT_COPIES} x {outputs / 1e9:.2f} GB "
                f"of outputs) and the GPU has {total / 1e9:.1f} GB; run it on a larger GPU or shrink the problem",
            )

    def _share_weights(self) -> None:
        """Same parameters on both sides where the names and shapes agree, so that a
        candidate that creates its layers in another order is not failed for that."""
        if not isinstance(self.sol, torch.nn.Module):
            return
        ref_state, sol_state = self.ref.state_dict(), self.sol.state_dict()
        if ref_state and ref_state.keys() == sol_state.keys():
            if all(ref_state[k].shape == sol_state[k].shape for k in ref_state):
                self.sol.load_state_dict(ref_state)

    def _count_check_inputs(self) -> int:
        if not hasattr(self.problem, "get_check_inputs"):
            return 0
        known = (self.spec.get("shape") or {}).get("check_inputs")
        if known is not None:  # counted by the parent: the meta device costs seconds of imports here
            return known
        try:  # on the meta device: counting must not allocate gigabytes
            with torch.device("meta"):
                return len(self.problem.get_check_inputs())
        except Exception:  # noqa: BLE001 - some ops have no meta kernel
            with torch.device(self.device):
                return len(self.problem.get_check_inputs())

    def check(self) -> None:
        self.phase("check")
        seed, trials = self.spec["seed"], self.spec["trials"]
        cases = [("random", seed + 1 + k, 0) for k in range(trials)]
        n_check = self._count_check_inputs()
        cases += [("check", seed + 1000 + k, k) for k in range(n_check)]
        errors = check.Errors()
        watch = guard.CustomCodeWatch(self.hooks.extension_names)
        for t, (which, s, index) in enumerate(cases):
            pristine = self.make_inputs(s, which, index)
            sol_in = check.clone_inputs(pristine)
            with self.spend("check_solution_calls"):
                if t == 0:
                    sol_out = watch.run(lambda: self.call_solution(sol_in))
                else:
                    sol_out = self.call_solution(sol_in)
            self.check_tampering("in forward")
            if not check.same_inputs(sol_in, pristine):
                self.flags.add(Flag.INPUT_MUTATION)
            del sol_in
            with self.spend("check_reference_calls"):
                ref_out = self.call_reference(check.clone_inputs(pristine))
            # float64 reference on the first random trial and on every structured one
            ref64 = None
            if self.spec["fp64"] and (t == 0 or which == "check"):
                with self.spend("check_fp64_reference"):
                    ref64 = check.run_fp64_reference(self.ref, pristine, errors.notes)
            label = f"trial {t + 1} ({'check input ' + str(index + 1) if which == 'check' else 'seed ' + str(s)})"
            try:
                with self.spend("check_compare"):
                    errors.merge(check.compare_outputs(sol_out, ref_out, ref64))
            except check.Mismatch as e:
                self.check_result = check.summarize(False, f"{label}: {e}", t + 1, errors)
                raise TaskFailed(Status.INCORRECT, f"{label}: {e}")
            finally:
                check.poison(ref_out)
                del ref_out, ref64, pristine
                if self.device.type == "cuda":
                    torch.cuda.empty_cache()
        if not watch.seen:
            self.flags.add(Flag.NO_CUSTOM_KERNEL)
            self.notes.append("forward called no custom code (no extension, Triton or ctypes call)")
        self.check_result = check.summarize(True, "", len(cases), errors)
        self.errors = errors

    def time(self) -> None:
        self.phase("time")
        inputs = self.make_inputs(self.spec["seed"] + 500)
        last: dict[str, Any] = {}

        def sol_call(args: list):
            last["out"] = None  # free the previous output before the next call allocates
            last["out"] = self.call_solution(args)
            return last["out"]

        ref = timer.Side(self.call_reference, check.clone_inputs(inputs))
        sol = timer.Side(sol_call, check.clone_inputs(inputs))
        baseline = self._compiled_reference(inputs) if self.spec.get("compile_baseline") else None
        clock = timer.make_clock(self.device)
        cfg = timer.TimingConfig(**self.spec["timing"])
        with self.spend("timing"):
            pair = timer.time_pair(ref, sol, clock, cfg, baseline, self._graph_validator(inputs))
        if pair.note:
            self.notes.append(pair.note)
        self.check_tampering("while being timed")

        # The output of a timed call must still be right (a candidate may behave
        # differently once it is being timed, or cache).
        self.phase("recheck")
        if Flag.INPUT_MUTATION in self.flags:
            # The candidate rewrote the inputs it was timed on: no reference exists
            # for what its last call saw. The flag already fails the gate.
            self.notes.append("timed output not re-checked: the solution writes into its inputs")
            self.timing = self._summarize(pair, inputs, last["out"])
            return
        ref_out = self.call_reference(check.clone_inputs(inputs))
        try:
            check.compare_outputs(last["out"], ref_out, None, l2_bound=self._timed_bound())
        except check.Mismatch as e:
            raise TaskFailed(Status.INCORRECT, f"output of a timed call: {e}")
        self.timing = self._summarize(pair, inputs, ref_out)

    def _timed_bound(self) -> float:
        """Relative L2 allowed for a timed output: the check's tolerance plus the
        fp32 reference's own error, since there is no float64 reference here."""
        return max(self.errors.tolerance or 0.0, 0.0) + (self.errors.ref_rel_l2_fp64 or 0.0)

    def _graph_validator(self, timing_inputs: list):
        """For graph mode: write fresh inputs into every input copy a graph was
        captured on, replay, and compare with the eager reference. A graph that
        misses work (host code, an unjoined stream, a capture-aware solution) is
        not timed. The timing inputs are written back afterwards."""

        def validate(samplers) -> None:
            fresh = self.make_inputs(self.spec["seed"] + 501)
            try:
                for s in samplers:
                    for copy in s.copies:
                        _write_into(copy, fresh)
                for s in samplers:
                    s.replay()
                expected = self.call_reference(check.clone_inputs(fresh))
                for name, s in zip(("reference", "solution", "compiled reference"), samplers):
                    try:
                        check.compare_outputs(s.out, expected, None, l2_bound=self._timed_bound())
                    except check.Mismatch as e:
                        raise check.Mismatch(f"{name}: {e}") from None
            finally:
                for s in samplers:
                    for copy in s.copies:
                        _write_into(copy, timing_inputs)

        return validate

    def _compiled_reference(self, inputs: list) -> timer.Side | None:
        """The reference under torch.compile, compiled (and checked) before timing
        so that compile time never lands in a sample. None, with a note, if it fails."""
        phase = self.current
        self.phase("compile")
        try:
            compiled = torch.compile(self.ref)
            side = timer.Side(lambda args: self._no_grad(compiled, args), check.clone_inputs(inputs))
            check.compare_outputs(side(), self.call_reference(check.clone_inputs(inputs)), None, 1e-4)
        except Exception as e:  # noqa: BLE001 - a baseline that fails does not fail the task
            self.notes.append(f"no torch.compile baseline: {load.last_line(e)[:200]}")
            side = None
        self.phase(phase)
        return side

    @staticmethod
    def _no_grad(fn, args: list):
        with torch.no_grad():
            return fn(*args)

    def _summarize(self, pair: timer.PairResult, inputs: list, out: Any) -> Timing:
        ref_ms, sol_ms = stats.median(pair.ref.event_ms), stats.median(pair.sol.event_ms)
        lo, hi = stats.bootstrap_ratio_ci(pair.ref.event_ms, pair.sol.event_ms)
        speedup = ref_ms / sol_ms if sol_ms > 0 else float("inf")
        sol_wall = stats.median(pair.sol.wall_ms)
        # Graph mode has no such check and needs none: a graph that misses work
        # fails its validation on fresh inputs and the task is timed with events.
        if pair.clock == "cuda_events":
            ref_gap = stats.median(pair.ref.wall_ms) - ref_ms
            excess = (sol_wall - sol_ms) - ref_gap
            if excess > max(UNTIMED_FRACTION * sol_ms, UNTIMED_MIN_MS):
                self.flags.add(Flag.UNTIMED_WORK)
                self.notes.append(
                    f"device-wide wall time {sol_wall:.3f} ms vs {sol_ms:.3f} ms on the events: work escaped the timed stream"
                )
        if speedup > 0 and (hi - lo) / 2 / speedup > NOISY_REL_CI:
            self.flags.add(Flag.NOISY)
        in_bytes, out_bytes = shapes.nbytes(inputs), shapes.nbytes(out)
        nbytes = in_bytes + out_bytes
        floor_ms = None
        bandwidth = self.spec.get("bandwidth_gbs")
        if bandwidth and pair.clock != "cpu_clock":
            floor_ms = nbytes / (bandwidth * 1e9) * 1e3
            # The flag claims the impossible, so its bound is the hard one: with L2
            # flushed the inputs must come from HBM, but up to an L2's worth of
            # output can sit in L2 when the call ends (written back later). A kernel
            # that mostly reads can stream faster than a copy, hence the faster of the two.
            l2 = torch.cuda.get_device_properties(self.device).L2_cache_size
            fastest = max(bandwidth, self.spec.get("read_gbs") or 0.0)
            hard_ms = (in_bytes + max(0, out_bytes - l2)) / (fastest * 1e9) * 1e3
            if sol_ms < BELOW_FLOOR_FRACTION * hard_ms:
                self.flags.add(Flag.BELOW_ROOFLINE)
                self.notes.append(f"{sol_ms:.4f} ms is below the {hard_ms:.4f} ms it takes to read the inputs from HBM")
        side = lambda s: SideTiming(  # noqa: E731
            stats.median(s.event_ms), stats.iqr(s.event_ms), len(s.event_ms), tuple(round(x, 6) for x in s.event_ms)
        )
        return Timing(
            ref=side(pair.ref),
            sol=side(pair.sol),
            speedup=speedup,
            speedup_ci=(lo, hi),
            clock=pair.clock,
            stop_reason=pair.stop_reason,
            sol_wall_ms=sol_wall,
            event_overhead_ms=pair.event_overhead_ms,
            floor_ms=floor_ms,
            bytes_moved=nbytes,
            compiled=side(pair.baseline) if pair.baseline else None,
            speedup_vs_compiled=stats.median(pair.baseline.event_ms) / sol_ms if pair.baseline and sol_ms > 0 else None,
        )


def _write_into(buffers: list, values: list) -> None:
    """Copy values into the tensors a graph was captured on (same shapes)."""
    for b, v in zip(buffers, values):
        if isinstance(b, torch.Tensor):
            if not isinstance(v, torch.Tensor) or v.shape != b.shape:
                raise check.Mismatch("fresh inputs differ in shape from the captured ones")
            b.copy_(v)


def run(spec: dict) -> dict:
    w = Worker(spec)
    status, message = Status.OK, ""
    try:
        w.load()
        w.check()
        if spec["time"]:
            w.time()
        w.phase("done")
    except TaskFailed as e:
        status, message = e.status, e.message
    except torch.OutOfMemoryError as e:
        status, message = Status.RUNTIME_ERROR, f"out of GPU memory during {w.current}: {load.last_line(e)[:300]}"
    except SystemExit as e:
        status, message = Status.RUNTIME_ERROR, f"the solution called sys.exit({e.code!r}) during {w.current}"
    except Exception as e:  # noqa: BLE001 - a solution may raise anything
        import traceback

        traceback.print_exc()
        status, message = Status.RUNTIME_ERROR, f"during {w.current}: {load.last_line(e)[:500]}"
    if getattr(w, "current", None) and w.current not in w.phase_seconds:
        w.phase_seconds[w.current] = round(time.monotonic() - w.phase_started, 3)
    if w.notes and status is Status.OK:
        message = "; ".join(w.notes)
    elif w.notes:
        message = f"{message} [{'; '.join(w.notes)}]"
    return {
        "status": status.value,
        "message": message,
        "flags": sorted(f.value for f in w.flags),
        "phase": getattr(w, "current", "load"),
        "check": to_json_dict(w.check_result) if w.check_result else None,
        "timing": to_json_dict(w.timing) if w.timing else None,
        "phase_seconds": w.phase_seconds,
        "spent": {k: round(v, 3) for k, v in w.spent.items()},
    }


def main(spec_path: str) -> None:
    if spec_path == "-":
        # Started ahead of its task (evaluate.start_worker): finish importing, then wait.
        import torch.utils.cpp_extension  # noqa: F401 - seconds of import, done while waiting

        spec_path = sys.stdin.readline().strip()
        if not spec_path:
            os._exit(0)  # not needed after all
    spec = json.loads(Path(spec_path).read_text())
    if spec.get("extensions_dir"):
        # Where the build process left this solution's extension: load_inline finds it there.
        os.environ["TORCH_EXTENSIONS_DIR"] = spec["extensions_dir"]
    t0 = time.monotonic()
    result = run(spec)
    result["worker_seconds"] = time.monotonic() - t0
    out = Path(spec["result_path"])
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps(result))
    os.replace(tmp, out)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # no interpreter teardown: solution atexit hooks and CUDA teardown can hang


if __name__ == "__main__":
    main(sys.argv[1])
