"""One task on the trusted side: load the reference, check the candidate, time both.

The judge imports the problem, never the solution. Each trial draws fresh
inputs; the candidate runs first, on a copy lent to it (the judge sees any
write into it), and says where its output is; the judge reads it there while
the candidate is frozen (read.py) and compares it with its own reference.
Statuses and flags are decided here and nowhere else.
"""
from __future__ import annotations

import contextlib
import math
import os
import time
import traceback
from dataclasses import replace
from typing import Any, Callable

import torch

from ..shared import batches, channel, precision
from . import check
from ..build import load
from ..discover import shapes
from ..records import Flag, Status
from . import limits
from .drain import Drain
from .gpu_busy import GpuBusy
from .read import OutputUnreadable, Reader
from .remote import BusyRule, CandidateError, CandidateGone, CandidateHung, CpuRule, Remote

_perf = time.perf_counter


# A timed output's allowance over what the check measured (Judge.timed_bound).
TIMED_SLACK = 2.0


class TaskFailed(Exception):
    def __init__(self, status: Status, message: str):
        super().__init__(message)
        self.status, self.message = status, message


class ProblemFailed(TaskFailed):
    """The problem file itself failed (import, get_init_inputs, get_inputs, the reference's
    forward): the solution was not judged, so the task is the problem's, not the solution's.

    Except for a CUDA error: the candidate's process shares the GPU, and a fault it leaves
    the GPU in (not its own context's, which dies with it) can surface in the judge's next
    call. That stays a runtime_error, which also makes the executor check the GPU."""

    def __init__(self, problem_path: str, what: str, error: BaseException):
        where = _line_in(problem_path, error)
        self.error = error  # its traceback goes to the task's log (main.py)
        if _is_cuda_error(error):
            super().__init__(Status.RUNTIME_ERROR,
                             f"problem file {problem_path}{where}: {what} {_error_text(error)}; a CUDA error, so a bug "
                             "in the problem file or a fault of the GPU: run this task alone to tell which")
        else:
            super().__init__(Status.PROBLEM_ERROR,
                             f"problem file {problem_path}{where}: {what} {_error_text(error)}; "
                             "fix the problem file (the solution was not judged)")


def unannounced_seed() -> int:
    """A seed for inputs whose outputs the judge compares and no candidate may know ahead.
    Seeds derived from --seed (42 unless told) are the candidate's to compute too: it can
    draw the same inputs with get_inputs, work out their outputs while it is not timed
    (its import, the check's calls) and return them from a table when the timed calls
    come (25_judge_evidence/8_Matmul512/predicted_inputs.py). Reproducible inputs stay
    for the check's trials, whose failures name their seed; timed and profiled calls, and
    one trial of the check, draw from these."""
    return int.from_bytes(os.urandom(6), "little")


def seed_generators(seed: int, device: torch.device) -> None:
    """torch.manual_seed for the generators get_inputs draws from here: the CPU's, and
    on a GPU run the GPUs' (the same values as torch.manual_seed draws). torch.manual_seed
    also seeds XPU and MTIA, and where they are not initialized each call queues a lazy
    seeding with its formatted stack: about 1 ms a call, 0.77 of a 1.5 s timing phase
    (702 draws) on an H100 (cProfile, 2026-11-27), and as much on the CPU path."""
    torch.random.default_generator.manual_seed(seed)
    if device.type == "cuda":
        torch.cuda.manual_seed_all(seed)


def _is_cuda_error(error: BaseException) -> bool:
    return type(error).__name__ == "AcceleratorError" or "CUDA error" in str(error) or "device-side assert" in str(error)


def _error_text(error: BaseException) -> str:
    # kbench's own LoadError ("defines no get_inputs") reads whole, without its module path
    return str(error) if isinstance(error, load.LoadError) else load.last_line(error)


def _line_in(path: str, error: BaseException) -> str:
    """', line N' of the innermost place in `path` the error passed through (a syntax
    error's own line), or '' when it never did (a torch error deep inside an op)."""
    target = os.path.abspath(path)
    if isinstance(error, SyntaxError) and error.filename and os.path.abspath(error.filename) == target:
        return f", line {error.lineno}"
    frames = [f for f in traceback.extract_tb(error.__traceback__) if os.path.abspath(f.filename) == target]
    return f", line {frames[-1].lineno}" if frames else ""


CUSTOM_SHARE_MIN = 0.02  # the solution's own kernels below 2% of the work: a decoy or a fallback


class Judge:
    def __init__(self, spec: dict, remote: Remote, phase: Callable[[str], None]):
        self.spec = spec
        self.remote = remote
        self.set_phase = phase
        self.device = torch.device(spec["device"])
        self.precision = spec.get("precision", "fp32")  # --precision: what floating tensors are cast to
        self.flags: set[Flag] = set()
        self.notes: list[str] = []
        self.check_result = None
        self.custom: dict | None = None
        self.sandbox: str | None = None
        self.errors = check.Errors()
        self.spent: dict[str, float] = {}
        self.spending = False
        self.shared = channel.Shared(self.device)
        self.ref_call_s: float | None = None  # the reference's seconds per call: what bounds a hang
        self.seen_signatures: set[tuple] = set()  # input shapes the candidate has been called on
        self.gpu_busy = GpuBusy(self.device) if self.device.type == "cuda" else None
        self.reader = Reader(self.device, remote.proc.pid, self.shared.by_id, remote.kill)
        self._drain: Drain | None = None
        self._flush_buf: torch.Tensor | None = None
        self.pre_fixed_s: list[float] = []  # empty timed batches before the solution was imported (timing.py)
        self.holds = None  # held.Holds: the hold page, lent to the candidate before its import (timing.py)
        self.hold_unavailable: str | None = None  # why batches cannot be held here
        self.pre_hold_s: list[float] = []  # empty held batches before the import

    # -- plumbing -------------------------------------------------------------
    @contextlib.contextmanager
    def spend(self, what: str):
        """Add the wall time of the block (device work included) to spent[what];
        a block inside another counts only in the outer one."""
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

    def flush_caches(self) -> None:
        """Evict what the last batch left in the caches, from the judge's process: the
        GPU's L2 (a read of twice its size: a write would leave dirty lines whose
        write-back overlaps the next batch), or on the CPU the last-level cache (32 MB)."""
        if self._flush_buf is None:
            if self.device.type == "cuda":
                l2 = torch.cuda.get_device_properties(self.device).L2_cache_size or 50 * 2**20
                self._flush_buf = torch.ones(2 * l2 // 4, dtype=torch.int32, device=self.device)
            else:
                self._flush_buf = torch.ones(8 * 2**20, dtype=torch.int32)
        if self.device.type == "cuda":
            self._flush_buf.sum()
        else:
            # The same 32 MB read; on the CPU an int32 sum widens every element (33 ms on
            # one thread of the 2-core CI host), a max reads them at memory speed (1.2 ms).
            self._flush_buf.max()
        self.sync()

    def run_reference_once(self) -> None:
        """The reference on inputs of its own, and the GPU waited for: what the judge does
        between two of the candidate's timed batches, for the calibration of their cost."""
        inputs = self.make_inputs(self.spec["seed"] + 977)
        with self.spend("calibration"):
            out = self.call_reference(inputs)
        self.sync()  # inside another spend (timing's), spend does not wait for the GPU
        del inputs, out

    @property
    def drain(self) -> Drain:
        if self._drain is None:
            self._drain = Drain(self.device)
        return self._drain

    def quiesce(self) -> float:
        """After a reply: wait until the candidate and all it started have stopped and,
        on a GPU, until the work they queued has drained. Seconds the GPU was busy."""
        self.remote.wait_stopped()
        return self.drain.wait() if self.device.type == "cuda" else 0.0

    def read(self, reply: dict, key: str = "out", settled: bool = False) -> Any:
        """The output a reply describes, read from the candidate's memory (frozen and
        drained first, unless the caller has: `settled`). Views of that memory: valid
        until the candidate's next request."""
        if not settled:
            self.quiesce()
        with self._reading():
            return self.reader.read(reply.get(key), reply.get("segs"))

    def read_rows(self, layout: Any, ats: list, segs: list) -> list[torch.Tensor] | None:
        """A batch's outputs, one alike tensor a call, read at once (Reader.read_rows;
        None where they are not laid out for it). The candidate is frozen and drained."""
        with self._reading():
            return self.reader.read_rows(layout, ats, segs)

    @contextlib.contextmanager
    def _reading(self):
        """A description the candidate got wrong is its crash; memory the judge cannot read, a runtime error."""
        try:
            yield
        except channel.ChannelError as e:
            raise TaskFailed(Status.CRASHED, f"the candidate described its output wrongly ({e}) during "
                                             f"{self.phase_name}") from None
        except OutputUnreadable as e:
            raise TaskFailed(Status.RUNTIME_ERROR, f"the judge cannot read the output during {self.phase_name}: "
                                                   f"{e}") from None

    def make_inputs(self, seed: int, which: str = "random", index: int = 0) -> list:
        with self.spend("inputs"):
            seed_generators(seed, self.device)
            try:
                with torch.device(self.device):
                    inputs = list(self.problem.get_inputs() if which == "random" else self.problem.get_check_inputs()[index])
            except Exception as e:  # noqa: BLE001 - the problem's bug, not the solution's
                fn = "get_inputs" if which == "random" else "get_check_inputs"
                raise ProblemFailed(self.spec["problem_path"], f"{fn}() raised", e) from None
            inputs = [x.to(self.device) if isinstance(x, torch.Tensor) else x for x in inputs]
            return precision.cast_values(inputs, self.precision)

    def make_input_rows(self, seed: int, n: int) -> list[torch.Tensor]:
        """The tensors of n calls of get_inputs() at once, each [n, ...] with row i call
        i's: get_inputs() under torch.func.vmap with each row's own randomness, in a few
        launches instead of a few per call (drawing them one by one took 60 us a call, a
        3 us kernel's batch of 800 calls; H200). The caller checks the rows vary as single
        draws do (a problem that draws with numpy gets one value for every row), and falls
        back to single draws where vmap cannot run get_inputs (.item(), in-place random ops)."""
        def one(_):
            return [x for x in self.problem.get_inputs() if isinstance(x, torch.Tensor)]

        with self.spend("inputs"):
            seed_generators(seed, self.device)
            with torch.device(self.device):
                rows = torch.func.vmap(one, randomness="different")(torch.empty(n))
            rows = [x.to(self.device) for x in rows]
            return precision.cast_values(rows, self.precision)

    def call_reference(self, inputs: list) -> Any:
        """The reference's forward on inputs the judge made: it never sees the candidate's
        data, so an exception here is the problem's. Running out of memory is not: the
        candidate's process shares the GPU (main.py names it). Which errors are which is
        batches.reference_call's, the same function the timed batches call."""
        try:
            return batches.reference_call(self.ref)(inputs)
        except batches.CallFailed as e:
            raise self.reference_failed(e) from None

    def reference_failed(self, failed: batches.CallFailed) -> ProblemFailed:
        """The task's verdict on a reference call that raised (batches.CallFailed)."""
        return ProblemFailed(self.spec["problem_path"], "the reference Model's forward raised", failed.error)

    def forward_reference(self, inputs: list) -> Any:
        """call_reference without its verdict on errors: for callers that expect some
        (a CUDA graph capture, which a reference may not support)."""
        with torch.no_grad():
            return self.ref(*inputs)

    def note_tampering(self, touched: list[str], when: str) -> None:
        if touched:
            self.flags.add(Flag.TAMPERING)
            note = f"replaced {', '.join(touched[:4])}{' ...' if len(touched) > 4 else ''} {when}"
            if not any(n.startswith("replaced ") for n in self.notes):
                self.notes.append(note)

    def ask(self, header: dict, fds: list[int] = (), when: str = "",
            limit: limits.Limit | None = None, spin: bool = False,
            watch: Callable[[], None] | None = None) -> tuple[dict, list[bytes]]:
        """A request to the candidate; its failures become statuses. `limit`: how long
        it may run (requests that run forward pass theirs; the rest run none)."""
        limit = limit or limits.for_other(self.ref_call_s, str(header.get("op")))
        busy = cpu = None
        if limit.busy_after_s is not None and self.gpu_busy is not None:
            busy = BusyRule(limit.busy_after_s, limits.HANG_BUSY_S, self.gpu_busy.busy)
        if limit.cpu_s is not None:
            cpu = CpuRule(limit.cpu_s, limits.PROGRESS_SHARE, self.remote.cpu_used,
                          self.remote.compile_files if limit.first else None, limits.COMPILE_WRITE_S)
        try:
            reply, blobs = self.remote.request(header, fds, None if math.isinf(limit.seconds) else limit.seconds,
                                               limit.build_s, busy, spin, cpu, watch)
        except CandidateHung as e:
            raise TaskFailed(Status.TIMEOUT, limit.message(self.phase_name, e.ran_s, e.busy_s, e.cpu_used_s)) from None
        except CandidateGone as e:
            raise TaskFailed(Status.CRASHED, f"{e} during {self.phase_name}")
        except CandidateError as e:
            self.note_tampering(e.tampered, when)
            if e.kind == "out_of_memory":
                raise TaskFailed(Status.RUNTIME_ERROR, f"out of GPU memory during {self.phase_name}: {e}")
            if e.kind == "compile_error":  # a kernel that does not compile is a build error, wherever it compiles
                raise TaskFailed(Status.BUILD_ERROR, f"during {self.phase_name}: {e}")
            raise TaskFailed(Status.RUNTIME_ERROR, f"during {self.phase_name}: {e}")
        self.note_tampering(reply.get("tampered") or [], when)
        return reply, blobs

    def call_limit(self, inputs: list | None, what: str, calls: int = 1, first: bool = False,
                   timed: bool = False) -> limits.Limit:
        """The limit of a request that runs `calls` forward calls on `inputs`. A call on
        inputs of a signature not seen before is a first call (it may compile); `timed`:
        a batch of the timing phase (limits.for_calls)."""
        if inputs is not None:
            sig = limits.signature(inputs)
            first = first or sig not in self.seen_signatures
            self.seen_signatures.add(sig)
        return limits.for_calls(self.ref_call_s, what, calls, first, timed)

    def phase(self, name: str) -> None:
        self.phase_name = name
        self.set_phase(name)

    # -- stages ---------------------------------------------------------------
    def load(self, before_solution: Callable[["Judge"], list[float]] | None = None) -> None:
        self.phase("load")
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        precision.exact_half_matmuls(self.precision)
        path = self.spec["problem_path"]
        try:
            self.problem = load.load_problem(path)
        except Exception as e:  # noqa: BLE001 - SyntaxError included
            raise ProblemFailed(path, "importing it failed:", e) from None
        self._refuse_if_too_big()
        seed = self.spec["seed"]
        torch.manual_seed(seed)
        with torch.device(self.device):
            try:
                init = list(self.problem.get_init_inputs())
            except Exception as e:  # noqa: BLE001
                raise ProblemFailed(path, "get_init_inputs() raised", e) from None
            init = precision.cast_values(init, self.precision)
            torch.manual_seed(seed)
            try:
                # Built as written, then cast: the candidate builds its model the same way
                # and gets these (cast) weights where names and shapes agree.
                self.ref = precision.cast_model(self.problem.Model(*init).to(self.device), self.precision)
            except torch.OutOfMemoryError:
                raise
            except Exception as e:  # noqa: BLE001
                raise ProblemFailed(path, "Model(*get_init_inputs()) raised", e) from None
        self.phase("import")
        # The candidate process imports torch while the judge loads the problem: that
        # is kbench's own start-up, not the solution's, so it is waited for first and
        # the import's limit starts once the candidate answers (--timeout bounds both).
        self.ask({"op": "ping"}, limit=limits.STARTUP)
        if self.device.type == "cuda":  # its CUDA context, if it was not started ahead as the next judge
            self.read(self.ask({"op": "prepare", "device": "cuda"}, limit=limits.STARTUP)[0])
        if self.spec["time"] and before_solution is not None:
            # The fixed cost of a timed request, measured while no solution code has run here
            # or there: what the solution does cannot make the judge subtract more (timing.py).
            self.pre_fixed_s = before_solution(self)
        fds: list[int] = []
        state = [[k, v] for k, v in self.ref.state_dict().items()]
        msg = {"op": "load", "solution_path": os.path.abspath(self.spec["solution_path"]), "device": self.spec["device"],
               "ext_dir": self.spec.get("extensions_dir"), "compilers": self.spec.get("compilers") or {},
               "failed_calls": self.spec.get("failed_calls") or {}, "seed": seed,
               "precision": self.precision,
               "init": channel.encode(self.shared.lend(init), fds),
               "state": channel.encode([[k, self.shared.alloc_like(v)] for k, v in state], fds)}
        reply, _ = self.ask(msg, fds, "at import", limits.for_import())
        self.sandbox = reply.get("sandbox") if isinstance(reply.get("sandbox"), str) else None
        if reply.get("candidate_class") == "Model":  # the judge words the note; the reply only names a class
            self.notes.append("no ModelNew in the solution file: its Model is the candidate (METR's format)")
        if not reply.get("ok"):
            try:
                status = Status(reply.get("status"))
            except ValueError:
                status = Status.LOAD_ERROR
            raise TaskFailed(status, str(reply.get("message", ""))[:2000])

    def _refuse_if_too_big(self) -> None:
        """Refuse before allocating anything when the checks cannot fit on this GPU.
        The problem's bytes come from the parent (found once per problem)."""
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

    def _count_check_inputs(self) -> int:
        if not hasattr(self.problem, "get_check_inputs"):
            return 0
        known = (self.spec.get("shape") or {}).get("check_inputs")
        if known is not None:
            return known
        try:
            with torch.device("meta"):
                return len(self.problem.get_check_inputs())
        except Exception:  # noqa: BLE001 - some ops have no meta kernel
            try:
                with torch.device(self.device):
                    return len(self.problem.get_check_inputs())
            except Exception as e:  # noqa: BLE001
                raise ProblemFailed(self.spec["problem_path"], "get_check_inputs() raised", e) from None

    def run_candidate(self, inputs: list, profile: bool = False) -> tuple[Any, list]:
        """One call on a lent copy of `inputs`: (its output as the judge's copy, the lent copy)."""
        if profile:  # the profiler's start-up comes first: room as for a first call
            limit = self.call_limit(None, "the profiled call", first=True)
        else:
            limit = self.call_limit(inputs, "a call")
            if limit.first:
                limit = replace(limit, what="the first call" if len(self.seen_signatures) == 1 else
                                "the first call on inputs of this shape")
        lent = self.shared.lend(inputs)
        fds: list[int] = []
        msg = {"op": "call", "inputs": channel.encode(lent, fds), "profile": profile}
        reply, _ = self.ask(msg, fds, "in forward", limit)
        self.note_threads(reply)
        if profile:
            self.custom = reply.get("custom") if isinstance(reply.get("custom"), dict) else None
        return self.read(reply), lent

    def note_threads(self, reply: dict) -> None:
        """The candidate's own word that forward left threads running: it can only add a flag."""
        threads = reply.get("threads")
        if isinstance(threads, list) and threads:
            self.flags.add(Flag.UNTIMED_WORK)
            note = f"forward left threads running: {', '.join(str(t)[:40] for t in threads[:3])}"
            if note not in self.notes:
                self.notes.append(note)

    def check(self) -> None:
        self.phase("check")
        self.time_reference()
        seed, trials = self.spec["seed"], self.spec["trials"]
        # The last random trial draws unannounced inputs (unannounced_seed): a candidate that
        # returns outputs it worked out ahead for the announced ones fails it, timed or not.
        cases = [("random", seed + 1 + k if k < trials - 1 else unannounced_seed(), 0) for k in range(trials)]
        cases += [("check", seed + 1000 + k, k) for k in range(self._count_check_inputs())]
        for t, (which, s, index) in enumerate(cases):
            pristine = self.make_inputs(s, which, index)
            with self.spend("check_solution_calls"):
                sol_out, lent = self.run_candidate(pristine)
            if not check.same_inputs(lent, pristine):
                self.flags.add(Flag.INPUT_MUTATION)
            del lent
            self.shared.close()
            with self.spend("check_reference_calls"):
                ref_out = self.call_reference(check.clone_inputs(pristine))
            ref64 = None
            # A float64 reference for the first trial, the check inputs and the unannounced trial:
            # an output's own rounding in a half dtype moves with the draw (a scalar's most), and
            # on fresh values a bound set from another draw failed honest work (bf16 cross entropy,
            # fp32 math inside: 8.47e-3 against 8.0e-3 without one; fresh-clone CI, 2026-11-29).
            if self.spec["fp64"] and (t == 0 or which == "check" or (which == "random" and t == trials - 1)):
                with self.spend("check_fp64_reference"):
                    ref64 = check.run_fp64_reference(self.ref, pristine, self.errors.notes)
            label = f"trial {t + 1} ({'check input ' + str(index + 1) if which == 'check' else 'seed ' + str(s)})"
            try:
                with self.spend("check_compare"):
                    self.errors.merge(check.compare_outputs(sol_out, ref_out, ref64))
            except check.Mismatch as e:
                self.check_result = check.summarize(False, f"{label}: {e}", t + 1, self.errors)
                raise TaskFailed(Status.INCORRECT, f"{label}: {e}")
            finally:
                del ref_out, ref64, pristine, sol_out
                self.reader.release()  # the candidate frees that output before its next call
                if self.device.type == "cuda":
                    torch.cuda.empty_cache()
        self.check_result = check.summarize(True, "", len(cases), self.errors)
        if self.device.type == "cuda":
            torch.cuda.ipc_collect()  # inputs lent over CUDA IPC that the candidate has released
            torch.cuda.empty_cache()  # the candidate's process allocates next, from the same GPU

    def time_reference(self) -> None:
        """The reference's wall seconds per call, which sets how long a candidate's
        call may run before it is hung: the fastest of up to three calls (the first
        warms up), or the first alone if it took over a second (no bound needs more)."""
        inputs = self.make_inputs(self.spec["seed"] + 950)
        times: list[float] = []
        with self.spend("check_reference_calls"):
            while len(times) < 3 and sum(times) < 1.0:
                t0 = _perf()
                self.call_reference(inputs)
                self.sync()
                times.append(_perf() - t0)
        self.ref_call_s = min(times)

    def profile(self) -> None:
        """One more call, under the profiler, for custom_share; last, because a
        profiler can crash a process (CUPTI with a C++ exception in flight was seen
        to): then the verdict stands and the share is unknown, with a note."""
        self.phase("profile")
        inputs = self.make_inputs(unannounced_seed())
        try:
            out, _lent = self.run_candidate(inputs, profile=True)
        except TaskFailed as e:
            if e.status is Status.TIMEOUT:
                raise  # a hung call is the solution's, whoever watched it: the verdict is timeout
            self.custom = {"share": None, "seen": [], "failed": e.message}
            self.notes.append(f"custom_share unknown: the profiled call failed ({e.message[:160]})")
            self._judge_custom_share()
            return
        self.shared.close()
        try:
            check.compare_outputs(out, self.call_reference(check.clone_inputs(inputs)), None, l2_bound=self.timed_bound())
        except check.Mismatch as e:
            raise TaskFailed(Status.INCORRECT, f"output of the profiled call: {e}")
        self._judge_custom_share()

    def _judge_custom_share(self) -> None:
        share = (self.custom or {}).get("share")
        if (self.custom or {}).get("failed"):
            return  # unknown, and said so: no flag on a guess
        if not isinstance(share, (int, float)) or share < CUSTOM_SHARE_MIN:
            self.flags.add(Flag.NO_CUSTOM_KERNEL)
            seen = (self.custom or {}).get("seen") or []
            if share is None and not seen:
                self.notes.append("forward called no custom code (no extension, Triton or ctypes call)")
            elif share is None:
                self.notes.append(f"custom code ran ({', '.join(map(str, seen[:2]))}) but its share of the work is unknown")
            else:
                self.notes.append(f"the solution's own code did {share:.1%} of forward's work; PyTorch did the rest")

    def timed_bound(self) -> float:
        """Relative L2 allowed for a timed output: the check's tolerance plus the
        reference's own error, since there is no float64 reference here, times
        TIMED_SLACK. Both were measured on the check's inputs; a timed batch draws
        new ones, on which a half-precision reference's own error is larger or
        smaller (an honest fp16 cross entropy computed in fp32 read 1.60e-3 against
        its fp16 reference on one timed call where the sum was 1.2e-3, CI,
        2026-11-26). The comparison is there for outputs that are not the answer
        (a skipped, stale or replayed call: errors near 1), not for precision,
        which the check held against float64."""
        return TIMED_SLACK * (max(self.errors.tolerance or 0.0, 0.0) + (self.errors.ref_rel_l2_fp64 or 0.0))
