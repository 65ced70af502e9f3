"""Records passed between stages, and their JSON form.

Every stage hands the next a frozen dataclass, never a dict, so a field that is
renamed or forgotten fails loudly in one place. This module imports no torch:
the report and compare commands read results on machines without it.
"""
from __future__ import annotations

import dataclasses
import enum
import functools
import types
import typing
from dataclasses import dataclass, field
from typing import Any, Optional

# kbench's version: in every run's results (RunInfo.kbench_version), in every task's
# fingerprint for --resume, and checked by a Dask worker against the run's.
__version__ = "0.1.0"

# 2: the problem_error status. A version 1 file holds nothing version 2 changed, so it
# reads as is; kbench before version 2 refuses a version 2 file in one line.
SCHEMA_VERSION = 2
READABLE_SCHEMA_VERSIONS = (1, 2)


class Status(str, enum.Enum):
    OK = "ok"
    BUILD_ERROR = "build_error"
    LOAD_ERROR = "load_error"
    RUNTIME_ERROR = "runtime_error"
    INCORRECT = "incorrect"
    TIMEOUT = "timeout"
    CRASHED = "crashed"
    SKIPPED = "skipped"
    # The problem file failed (its import, get_init_inputs, get_inputs, the reference's
    # forward): the solution was not judged, and the message names the problem file.
    PROBLEM_ERROR = "problem_error"


class Flag(str, enum.Enum):
    """Suspicious but not wrong by itself; the gate decides which fail a run."""

    NO_CUSTOM_KERNEL = "no_custom_kernel"
    INPUT_MUTATION = "input_mutation"
    TAMPERING = "tampering"
    UNTIMED_WORK = "untimed_work"
    BELOW_ROOFLINE = "below_roofline"
    NOISY = "noisy"
    # The candidate's own events disagree with the time the judge measured around
    # its batches (work outside its stream, or forged events); the judge's figure stands.
    TIMING_MISMATCH = "timing_mismatch"
    # The reference's batches met other work on the GPU (their wall time exceeded
    # their own events) in every try: the speedup may favour the solution.
    CONTENDED = "contended"
    # A side's host time to queue a call exceeds its device time: inside a real
    # model its speed would be set by the host, and the device speedup misleads.
    HOST_BOUND = "host_bound"


class UserError(Exception):
    """A mistake of the user's (bad flag, missing folder): one line, exit code 2."""


@dataclass(frozen=True)
class Problem:
    name: str  # "level1/23_Softmax": level folder and file stem
    path: str


@dataclass(frozen=True)
class Task:
    """One solution file evaluated against one problem."""

    problem: str
    problem_path: str
    solution_set: str
    solution_path: str

    @property
    def key(self) -> str:
        # The solution path, not (set, problem): a set may hold several
        # candidates for the same problem.
        return self.solution_path


@dataclass(frozen=True)
class BuildResult:
    ok: bool
    status: Optional[Status]  # None when ok
    message: str
    seconds: float
    cached: bool
    ext_dir: str  # TORCH_EXTENSIONS_DIR the worker must reuse to find the build


@dataclass(frozen=True)
class CheckResult:
    passed: bool
    message: str
    trials: int  # trials actually run (random ones plus the problem's check inputs)
    max_abs_err: Optional[float] = None
    max_rel_err: Optional[float] = None
    rel_l2_err: Optional[float] = None  # candidate vs the fp32 reference
    rel_l2_err_fp64: Optional[float] = None  # candidate vs the float64 reference
    ref_rel_l2_err_fp64: Optional[float] = None  # the reference's own error (fp32, or --precision's dtype)
    tolerance: Optional[float] = None  # the bound rel_l2_err_fp64 was held to
    notes: tuple[str, ...] = ()


# A line kbench may send a judge started ahead, before its task's spec: make the
# GPU's context and the clocks now (judge and candidate), as the next judge to be used.
PREPARE_LINE = '{"prepare": true}'


@dataclass(frozen=True)
class SideTiming:
    """One side's times per call, one sample per timed batch of calls: its CUDA events
    around the batch where they agree with the judge's own measure (judged_ms), else
    that measure; on the CPU the CPU time its processes used."""

    median_ms: float
    iqr_ms: float
    n: int
    samples_ms: tuple[float, ...] = ()
    # How the batches ran: cuda_hold (the calls queued behind a hold the judge released:
    # the device's time), cuda_graph (one replay of the batch's calls captured in a
    # CUDA graph), cuda_burst (the calls eagerly, back to back) or cpu_clock.
    clock: Optional[str] = None
    # The side's own median time to issue one call (Python, allocations, launches): the
    # judge's for the reference, the candidate's word for the solution (it can only add
    # host_bound). None where not measured.
    host_ms: Optional[float] = None
    # The judge's own measure per call (median): its wall clock around the batches less
    # their fixed cost (on the CPU, the side's CPU time). The figures above are the side's
    # own CUDA events where they agree with it (judge/timing.py, Timer._after), else these.
    judged_ms: Optional[float] = None


@dataclass(frozen=True)
class Timing:
    ref: SideTiming
    sol: SideTiming
    speedup: float
    speedup_ci: tuple[float, float]
    clock: str  # "cuda_hold", "cuda_graph", "cuda_burst" or "cpu_clock"
    stop_reason: str  # "converged" | "budget" | "max_samples"
    floor_ms: Optional[float] = None  # HBM floor: bytes that must move / bandwidth
    bytes_moved: Optional[int] = None
    compiled: Optional[SideTiming] = None  # the reference under torch.compile (--compile-baseline)
    speedup_vs_compiled: Optional[float] = None
    calls_per_batch: Optional[int] = None  # calls in each timed batch (one input copy each)
    # The fixed cost of a timed batch, subtracted before dividing by its calls: the
    # candidate's (an empty request, before the solution was imported or after, the
    # smaller) and the reference's (an empty batch in the judge).
    fixed_ms: Optional[float] = None
    ref_fixed_ms: Optional[float] = None


@dataclass(frozen=True)
class TaskResult:
    problem: str
    solution_set: str
    solution_path: str
    status: Status
    message: str
    flags: tuple[Flag, ...] = ()
    ref_ms: Optional[float] = None
    sol_ms: Optional[float] = None
    speedup: Optional[float] = None
    phase: str = ""  # where it stopped: build, load, check, time, done
    seconds: float = 0.0  # wall time of the whole task, build included
    log_path: str = ""
    check: Optional[CheckResult] = None
    timing: Optional[Timing] = None
    fingerprint: str = ""  # hash of solution, problem and options, for --resume
    phase_seconds: dict[str, float] = field(default_factory=dict)  # worker time per phase
    # The harness's own cost: the worker's wall time (process start included) less
    # making inputs, timing and torch.compile. Builds are in `seconds`, not here.
    overhead_seconds: Optional[float] = None
    # Where the worker's seconds went inside its phases: inputs, timing, check_* parts.
    spent_seconds: dict[str, float] = field(default_factory=dict)
    gpu: Optional[int] = None  # the CUDA device index it ran on (as nvidia-smi numbers it where known)
    gpu_name: Optional[str] = None  # that device's name, e.g. "NVIDIA H100 80GB HBM3"; None on --device cpu
    # Share of one profiled forward's work done by the solution's own code (its
    # kernels vs PyTorch's); None when unknown. no_custom_kernel below 2%.
    custom_share: Optional[float] = None
    # How the candidate's process was confined ("landlock ABI 7: ..."), or None
    # when it ran unconfined (no Landlock in this kernel, or it never started).
    sandbox: Optional[str] = None
    # sha256 of the problem file the task ran against ("" when not recorded): `compare`
    # will not call a task faster or slower when its problem changed between the runs.
    problem_sha256: str = ""
    # Where it ran: a host name, or a Dask worker's address ("" in older results).
    worker: str = ""
    # 2 when its first worker died under it and it ran again elsewhere.
    attempts: int = 1

    @property
    def key(self) -> str:
        return self.solution_path


@dataclass(frozen=True)
class RunInfo:
    run_id: str
    kbench_version: str
    device: str  # e.g. "NVIDIA H100 80GB HBM3" or "cpu"
    torch_version: str
    cuda_version: Optional[str]
    options: dict[str, Any] = field(default_factory=dict)
    started: str = ""
    finished: Optional[str] = None  # None while the run is in progress or was cut short
    unmatched: tuple[str, ...] = ()  # "path: reason" for solution files that match no problem
    build_seconds: Optional[float] = None  # wall time of the build stage (all builds, in parallel)
    builds_cached: Optional[int] = None  # of those, how many were found in the cache
    # Where the run's own seconds went, outside its tasks' phases (harness/run/pipeline.py's
    # RunClock): kbench's start, discovery, problem sizes, bandwidth, the build stage,
    # the wait for the first judge, the tasks, ... ; bench/run_phases.py adds the tasks' phases.
    phase_seconds: dict[str, float] = field(default_factory=dict)
    # The GPUs the run spread its tasks over, as "number: card" (nvidia-smi's numbers); () on the CPU.
    gpus: tuple[str, ...] = ()

    @property
    def precision(self) -> str:
        """The run's --precision; results written before the option existed ran at fp32."""
        return str(self.options.get("precision", "fp32"))


@dataclass(frozen=True)
class RunResults:
    run: RunInfo
    results: tuple[TaskResult, ...] = ()


@dataclass(frozen=True)
class TimingConfig:
    min_samples: int = 10
    max_samples: int = 500
    budget_s: float = 10.0  # per task, both sides together
    target_rel_ci: float = 0.01  # stop when each median's 95% interval is within +-1%
    block: int = 5  # pairs of batches (one per side, alternating) between checks of the stop rule
    # Pairs of single calls before planning (at least timing.WARM_PAIRS). Tried at 0.05 s
    # on an H100 (2026-11-27): the 20-task warm run took 63 s against 58 s, its converged
    # tasks sampling more pairs; one run, so not proven, and not kept.
    warmup_s: float = 0.2
    # "auto": a batch's calls held behind a hold the judge releases (judge/held.py) where
    # the candidate's forward queues them; otherwise captured in a CUDA graph when either
    # side's warm-up call is under graph_below_ms (there a launch costs as much as the
    # kernel) and the candidate's graph recomputes its outputs; "hold": as auto;
    # "events": eager batches only (the name of the per-call events this mode once
    # used); "graph": graphs wherever valid.
    mode: str = "auto"
    graph_below_ms: float = 0.05


# --precision: the dtype floating inputs, weights and buffers are cast to on both sides
# (KernelBench's names). "fp32" runs the problem as written, as before the option existed.
PRECISIONS = ("fp32", "fp16", "bf16")


@dataclass(frozen=True)
class Options:
    """Everything that decides a task's verdict and its times, defined once: the CLI
    and the library API build it, --resume fingerprints it, every executor carries it
    inside TaskSpec to the judge. Nothing here is a local path."""

    device: str = "cuda"  # "cuda" or "cpu"
    timeout: float = 300.0  # seconds per task (load, check, time)
    trials: int = 5
    seed: int = 42
    fp64: bool = True
    time: bool = True
    timing: TimingConfig = field(default_factory=TimingConfig)
    compile_baseline: bool = False
    # Threads of each side on --device cpu. Judge and candidate are two processes that
    # take turns; with several OpenMP threads each, their pools woke on each other's
    # cores and an identical softmax read 0.6x in one run and 2.1x in the next on a
    # 2-core host (1 thread: 0.93-1.03x).
    cpu_threads: int = 1
    build_timeout: float = 600.0  # seconds per solution build
    precision: str = "fp32"  # one of PRECISIONS
    # Refuse to run solution code where builds and candidates cannot be confined (no
    # Landlock); decides no verdict of a task that runs, so --resume ignores it.
    require_sandbox: bool = False

    def __post_init__(self) -> None:
        # Here, not in each caller: the CLI, the library API and a spec read back from
        # JSON on another host all build Options, and a bad name must not reach a judge.
        if self.precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, not {self.precision!r}")

    @classmethod
    def from_json(cls, data: dict) -> "Options":
        return from_json_dict(cls, data)


@dataclass(frozen=True)
class Source:
    """A file's text travelling with its task: the other side of an executor may be
    another host, which never opens the user's paths. `path` names it in messages."""

    path: str
    text: str

    @property
    def sha256(self) -> str:
        import hashlib

        return hashlib.sha256(self.text.encode("utf-8", "surrogateescape")).hexdigest()


@dataclass(frozen=True)
class TaskSpec:
    """One unit of work, the same for every executor: sources inline, options as one
    record, no local path the other side must share. A TaskResult comes back."""

    problem: str  # "level1/23_Softmax"
    solution_set: str
    problem_source: Source
    solution_source: Source
    options: Options
    fingerprint: str = ""  # for --resume: sources, options and kbench's version
    attempt: int = 1  # 2 when rerun because its first worker died

    @property
    def key(self) -> str:
        return self.solution_source.path


# ---- JSON ------------------------------------------------------------------

_SCALARS = frozenset({float, int, str, bool, type(None)})  # exact types: Status is a str too


def to_json_dict(record: Any) -> Any:
    """Plain JSON-able structure; enums become their values."""
    if type(record) in _SCALARS:  # first: most values are the floats of timing samples
        return record
    if dataclasses.is_dataclass(record):
        out = {name: to_json_dict(getattr(record, name)) for name in _field_names(type(record))}
        if isinstance(record, RunResults):
            out = {"schema_version": SCHEMA_VERSION, **out}
        return out
    if isinstance(record, enum.Enum):
        return record.value
    if isinstance(record, (list, tuple)):
        return [to_json_dict(x) for x in record]
    if isinstance(record, dict):
        return {k: to_json_dict(v) for k, v in record.items()}
    return record


def from_json_dict(cls: type, data: Any) -> Any:
    """Inverse of to_json_dict for the record types above; unknown keys are ignored
    so that a newer file with extra fields still reads."""
    if data is None:
        return None
    hints = _type_hints(cls)
    kwargs = {}
    for f in dataclasses.fields(cls):
        if f.name in data:
            kwargs[f.name] = _convert(hints[f.name], data[f.name])
    return cls(**kwargs)


@functools.lru_cache(maxsize=None)
def _field_names(cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(cls))


@functools.lru_cache(maxsize=None)
def _type_hints(cls: type) -> dict[str, Any]:
    # Evaluated once per record type: typing.get_type_hints parses each annotation
    # string anew, which made reading 10,000 results take seconds.
    return typing.get_type_hints(cls)


def _convert(hint: Any, value: Any) -> Any:
    if value is None:
        return None
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in typing.get_args(hint) if a is not type(None)]
        return _convert(inner[0], value)
    if origin is tuple:
        args = typing.get_args(hint)
        if len(args) == 2 and args[1] is Ellipsis:
            if args[0] in _SCALARS:  # raw timing samples: thousands of floats per task, nothing to convert
                return tuple(value)
            return tuple(_convert(args[0], v) for v in value)
        return tuple(_convert(a, v) for a, v in zip(args, value))
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return from_json_dict(hint, value)
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return hint(value)
    return value


def results_from_json(data: dict) -> RunResults:
    if not isinstance(data, dict):
        raise UserError(f"results file holds a JSON {type(data).__name__}, not a kbench results object")
    version = data.get("schema_version")
    if version not in READABLE_SCHEMA_VERSIONS or isinstance(version, bool):
        readable = " or ".join(map(str, READABLE_SCHEMA_VERSIONS))
        raise UserError(f"results schema_version {version!r} is not {readable}, which this kbench reads; "
                        "read it with the kbench version that wrote it, or re-run with this one")
    return from_json_dict(RunResults, data)
