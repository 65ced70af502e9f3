"""The run: discover -> build (parallel) -> evaluate (one worker per task) -> write.

results.json, results.csv and report.md are rewritten after every task, so a
run that is killed or interrupted loses nothing it finished, and --resume
picks it up.
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
import threading
import time
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Protocol

from . import __version__, build, evaluate, report
from .discover import Discovery, discover
from .gate import GatePolicy
from .isolate import kill_all
from .runlock import folder_lock
from .records import BuildResult, RunInfo, RunResults, Status, Task, TaskResult, UserError
from .timer import TimingConfig


@dataclass(frozen=True)
class RunConfig:
    problems_dir: Path
    solutions_dir: Path
    out_dir: Path | None = None
    device: str = "cuda"
    timeout: float = 300.0
    build_timeout: float = 600.0
    build_jobs: int = 0  # 0: one per core, at most 16
    cache_dir: Path = field(default_factory=lambda: default_cache_dir())
    use_cache: bool = True
    problem_filters: tuple[str, ...] = ()
    set_filters: tuple[str, ...] = ()
    trials: int = 5
    seed: int = 42
    fp64: bool = True
    time: bool = True
    timing: TimingConfig = field(default_factory=TimingConfig)
    policy: GatePolicy = field(default_factory=GatePolicy)
    resume: Path | None = None
    gpus: tuple[int, ...] = ()  # CUDA device indices to spread tasks over; () = the first one
    compile_baseline: bool = False  # also time the reference under torch.compile

    def options(self) -> dict:
        """What goes into results.json's run.options (and the resume fingerprint)."""
        return {
            "problems": str(self.problems_dir), "solutions": str(self.solutions_dir), "device": self.device,
            "timeout": self.timeout, "trials": self.trials, "seed": self.seed, "fp64": self.fp64, "time": self.time,
            "timing": asdict(self.timing), "problem_filters": list(self.problem_filters),
            "set_filters": list(self.set_filters), "fail_on": sorted(f.value for f in self.policy.fail_flags),
            "min_speedup": self.policy.min_speedup, "compile_baseline": self.compile_baseline,
        }


def default_cache_dir() -> Path:
    base = os.environ.get("KBENCH_CACHE") or os.path.join(os.environ.get("XDG_CACHE_HOME", "~/.cache"), "kbench")
    return Path(base).expanduser()


# Worker processes started ahead per GPU. `import torch` takes ~5 s on an H100
# host and a small task ~1-2 s, so one ahead is not enough to hide it. Their
# imports take host cores from the task being timed: at most one per 4 cores,
# and none on a CPU run, where the host clock times the task. KBENCH_PRESTART=0
# turns it off (each task then starts its own worker when it begins).
PRESTART = 4


def _prestart_depth(device: str) -> int:
    wanted = int(os.environ.get("KBENCH_PRESTART", PRESTART))
    return 0 if device == "cpu" or wanted <= 0 else min(wanted, max(1, (os.cpu_count() or 4) // 4))


class Reporter(Protocol):
    """What the pipeline tells the outside world; console.py draws it, tests record it."""

    def discovered(self, discovery: Discovery, todo: int, reused: int) -> None: ...
    def build_started(self, count: int) -> None: ...
    def build_done(self, task: Task, result: BuildResult) -> None: ...
    def task_started(self, task: Task, index: int, total: int) -> None: ...
    def task_done(self, result: TaskResult) -> None: ...
    def note(self, text: str) -> None: ...


@dataclass(frozen=True)
class DeviceInfo:
    name: str
    arch: str
    cuda_version: str | None
    torch_version: str


def probe_device(device: str) -> DeviceInfo:
    import torch

    if device == "cpu":
        return DeviceInfo("cpu", "", torch.version.cuda, torch.__version__)
    if device != "cuda":
        raise UserError(f"--device must be cuda or cpu, not '{device}'")
    if not torch.cuda.is_available():
        raise UserError(
            f"no CUDA GPU is visible to torch {torch.__version__} (CUDA build: {torch.version.cuda}); "
            "run with --device cpu to evaluate CPU solutions, or check nvidia-smi and CUDA_VISIBLE_DEVICES"
        )
    major, minor = torch.cuda.get_device_capability(0)
    return DeviceInfo(torch.cuda.get_device_name(0), f"{major}.{minor}", torch.version.cuda, torch.__version__)


_NOT_FINGERPRINTED = ("problem_filters", "set_filters", "fail_on", "min_speedup")


def fingerprint(task: Task, cfg: RunConfig) -> str:
    return _fingerprint(task, cfg.options(), __version__)


def _fingerprint(task: Task, options: dict, version: str) -> str:
    h = hashlib.sha256()
    h.update(Path(task.solution_path).read_bytes())
    h.update(Path(task.problem_path).read_bytes())
    opts = {k: v for k, v in options.items() if k not in _NOT_FINGERPRINTED}
    h.update(json.dumps([version, opts], sort_keys=True).encode())
    return h.hexdigest()[:20]


def _previous_results(cfg: RunConfig) -> tuple[dict[str, TaskResult], RunInfo | None]:
    """The earlier run's results by task key, in its order, and its run info."""
    if cfg.resume is None:
        return {}, None
    if not (cfg.resume / "results.json").is_file():
        raise UserError(f"--resume: no results.json in '{cfg.resume}'; pass the folder of an earlier run")
    earlier = report.load_run(cfg.resume)
    return {r.key: r for r in earlier.results}, earlier.run


def _changed_options(before: dict, after: dict, prefix: str = "") -> list[str]:
    """'trials 5 -> 2' for each fingerprinted option that differs (nested dicts flattened)."""
    changes = []
    for k in sorted(set(before) | set(after)):
        if not prefix and k in _NOT_FINGERPRINTED:
            continue
        a, b = before.get(k), after.get(k)
        if isinstance(a, dict) and isinstance(b, dict):
            changes += _changed_options(a, b, f"{prefix}{k}.")
        elif json.dumps(a, sort_keys=True) != json.dumps(b, sort_keys=True):
            changes.append(f"{prefix}{k} {_show(a)} -> {_show(b)}")
    return changes


def _show(v) -> str:
    return "unset" if v is None else str(v).lower() if isinstance(v, bool) else str(v)


def _rerun_reasons(stale: list[tuple[Task, TaskResult]], cfg: RunConfig, earlier: RunInfo | None) -> dict[str, int]:
    """Why each task with an earlier, outdated result reruns: reason -> task count, in first-seen order."""
    reasons: dict[str, int] = {}
    old_opts = dict(earlier.options) if earlier and earlier.options else None
    old_version = earlier.kbench_version if earlier else None
    for task, old in stale:
        parts = []
        if old_opts is not None:
            if old_version != __version__:
                parts.append(f"kbench version {old_version} -> {__version__}")
            parts += _changed_options(old_opts, cfg.options())
        if old_opts is not None and old.fingerprint == _fingerprint(task, old_opts, old_version or ""):
            why = f"options changed ({', '.join(parts)})" if parts else "options changed"
        elif old.problem_sha256 and old.problem_sha256 != problem_sha(task.problem_path):
            why = "its problem file changed"
        elif old_opts is not None and parts:
            # Its result may come from a run before the last one, under other options.
            why = f"its solution file or the options changed ({', '.join(parts)})"
        elif old_opts is not None:
            why = "its solution file changed"
        else:
            why = "its solution, problem or options changed"
        reasons[why] = reasons.get(why, 0) + 1
    return reasons


def _log_path(out_dir: Path, task: Task) -> Path:
    stem = Path(task.solution_path).stem
    return out_dir / "logs" / task.solution_set / f"{task.problem.replace('/', '_')}__{stem}.log"


def run(cfg: RunConfig, reporter: Reporter) -> tuple[RunResults, Path]:
    dev = probe_device(cfg.device)  # first: without a GPU nothing else matters
    found = discover(cfg.problems_dir, cfg.solutions_dir, cfg.problem_filters, cfg.set_filters)
    if not found.tasks:
        where = f"{cfg.solutions_dir}/<set>/<level>/<problem>.py"
        extra = f" ({len(found.unmatched)} files match no problem; see kbench list)" if found.unmatched else ""
        raise UserError(f"no solutions to run under '{cfg.solutions_dir}' for problems in '{cfg.problems_dir}'{extra}; add files as {where}")
    out_dir = cfg.resume or cfg.out_dir or Path("results") / datetime.now().strftime("%Y%m%d-%H%M%S")
    out_dir.mkdir(parents=True, exist_ok=True)
    with folder_lock(out_dir):  # a second run on this folder stops here, naming the first
        return _run_locked(cfg, reporter, dev, found, out_dir)


def _run_locked(cfg: RunConfig, reporter: Reporter, dev: DeviceInfo, found: Discovery,
                out_dir: Path) -> tuple[RunResults, Path]:
    previous, earlier = _previous_results(cfg)
    prints = {t.key: fingerprint(t, cfg) for t in found.tasks}
    done = {k: r for k, r in previous.items() if k in prints and r.fingerprint == prints[k]}
    todo = [t for t in found.tasks if t.key not in done]
    # Earlier results of tasks this run does not have (filtered out, or from another
    # problem set) stay in results.json as they were, after this run's tasks.
    kept = [r for k, r in previous.items() if k not in prints]
    reporter.discovered(found, len(todo), len(done))
    stale = [(t, previous[t.key]) for t in todo if t.key in previous]
    for why, count in _rerun_reasons(stale, cfg, earlier).items():
        reporter.note(f"--resume: {count} task{' reruns' if count == 1 else 's rerun'}: {why}")
    if kept:
        reporter.note(f"--resume: kept {len(kept)} earlier result{'' if len(kept) == 1 else 's'} "
                      "of tasks outside this run")

    info = RunInfo(
        run_id=out_dir.name,
        kbench_version=__version__,
        device=dev.name,
        torch_version=dev.torch_version,
        cuda_version=dev.cuda_version,
        options=cfg.options(),
        started=_now(),
        unmatched=tuple(f"{u.path}: {u.reason}" for u in found.unmatched),
    )
    results: dict[str, TaskResult] = dict(done)
    build_stage: dict = {}

    def save(finished: bool = False) -> RunResults:
        ordered = tuple(results[t.key] for t in found.tasks if t.key in results) + tuple(kept)
        rr = RunResults(replace(info, finished=_now() if finished else None, **build_stage), ordered)
        report.write_all(rr, out_dir, cfg.policy)
        return rr

    save()
    bandwidth: dict[str, float] = {}
    if cfg.device == "cuda" and cfg.time:
        from . import roofline

        bandwidth = roofline.cached_bandwidth(cfg.cache_dir, dev.name, build.child_env(dict(os.environ))) or {}
        if not bandwidth:
            reporter.note("could not measure the device's copy bandwidth: no roofline floor this run")
    eval_cfg = evaluate.EvalConfig(
        device=cfg.device, timeout=cfg.timeout, trials=cfg.trials, seed=cfg.seed, fp64=cfg.fp64, time=cfg.time,
        timing=cfg.timing, arch=dev.arch, bandwidth_gbs=bandwidth.get("gbs"),
        read_gbs=bandwidth.get("read_gbs"), compile_baseline=cfg.compile_baseline,
        builds_dir=str((cfg.cache_dir / "builds").resolve()),
    )
    jobs = cfg.build_jobs or min(16, os.cpu_count() or 1)  # nvcc with torch headers takes 1-2 GB each
    build_cfg = build.BuildConfig(cfg.device, dev.arch, cfg.cache_dir / "builds", jobs, cfg.build_timeout, cfg.use_cache)

    logs: dict[str, str] = {}

    def on_built(task: Task, result: BuildResult, log: str) -> None:
        logs[task.key] = log
        reporter.build_done(task, result)

    # The problems' sizes (to refuse a task that cannot fit) and check-set counts
    # are found on the meta device here, once per problem, while the builds run.
    sizes: dict[str, dict | None] = {}
    sizer = threading.Thread(target=lambda: sizes.update(_problem_bytes(todo)), daemon=True)
    sizer.start()
    # Each GPU's first worker process imports torch while the builds run.
    gpus = list(cfg.gpus) if cfg.device == "cuda" and cfg.gpus else [None]
    depth = _prestart_depth(cfg.device)
    first = {g: [evaluate.start_worker(replace(eval_cfg, gpu_index=g))] for g in gpus} if todo and depth else {}
    reporter.build_started(len(todo))
    t0 = time.monotonic()
    built = build.build_all(todo, build_cfg, on_built) if todo else {}
    build_stage.update(build_seconds=round(time.monotonic() - t0, 3),
                       builds_cached=sum(1 for b in built.values() if b.cached))

    sizer.join(timeout=120)  # a problem file that hangs on the meta device must not hang the run
    if sizer.is_alive():
        reporter.note("finding the problems' sizes took over 120 s; tasks run without a memory estimate")
    lock = threading.Lock()
    queue = list(enumerate(todo))
    started = [0]

    def worker(gpu: int | None) -> None:
        """Evaluates tasks one at a time on one GPU: one timing task per GPU. The
        next tasks' worker processes are started while this one runs."""
        healthy = True
        task_cfg = replace(eval_cfg, gpu_index=gpu)
        ready = first.pop(gpu, [])
        try:
            while True:
                with lock:
                    if not queue:
                        return
                    i, task = queue.pop(0)
                    left = len(queue)
                    reporter.task_started(task, started[0], len(todo))
                    started[0] += 1
                log_path = _log_path(out_dir, task)
                log_path.parent.mkdir(parents=True, exist_ok=True)
                log_path.write_text(f"[kbench] task {task.problem} / {task.solution_set}: {task.solution_path}\n"
                                    f"[kbench] build log\n{logs.get(task.key, '')}\n[kbench] worker log\n")
                if not healthy:
                    result = TaskResult(task.problem, task.solution_set, task.solution_path, Status.SKIPPED,
                                        "not run: the GPU failed its health check after an earlier task",
                                        phase="start", log_path=str(log_path))
                elif not built[task.key].ok:
                    result = evaluate.evaluate(task, built[task.key], task_cfg, log_path)
                else:
                    if not build.intact(built[task.key].ext_dir):
                        # Written after kbench built it (by another task's candidate, say): rebuild, never load it.
                        reporter.note(f"{task.solution_path}: its build changed since kbench made it; rebuilding")
                        built[task.key] = build.build_all([task], build_cfg)[task.key]
                    child = ready.pop(0) if ready else evaluate.start_worker(task_cfg)
                    while len(ready) < min(depth, left):
                        ready.append(evaluate.start_worker(task_cfg))
                    result = evaluate.evaluate(task, built[task.key], task_cfg, log_path, None, child,
                                               sizes.get(task.problem_path))
                result = replace(result, fingerprint=prints[task.key], problem_sha256=problem_sha(task.problem_path))
                with lock:
                    results[task.key] = result
                    save()
                    reporter.task_done(result)
                if cfg.device == "cuda" and result.status in (Status.CRASHED, Status.TIMEOUT, Status.RUNTIME_ERROR):
                    healthy = evaluate.gpu_healthy(gpu)
                    if not healthy:
                        reporter.note(f"GPU {gpu if gpu is not None else 0} failed its health check; "
                                      "its remaining tasks are skipped")
        finally:
            for child in ready:
                child.discard()

    try:
        if len(gpus) == 1:
            worker(gpus[0])  # in the main thread: Ctrl-C lands where run_child can clean up
        else:
            threads = [threading.Thread(target=worker, args=(g,), daemon=True) for g in gpus]
            for t in threads:
                t.start()
            try:
                for t in threads:
                    while t.is_alive():
                        t.join(0.5)
            except KeyboardInterrupt:
                queue.clear()
                kill_all()
                raise
    finally:
        for children in first.values():  # a GPU thread that never took a task
            for child in children:
                child.discard()
    return save(finished=True), out_dir


@functools.lru_cache(maxsize=None)
def problem_sha(path: str) -> str:
    """The problem file's hash: `compare` calls no task faster or slower across a change of it."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _problem_bytes(tasks: list[Task]) -> dict[str, dict | None]:
    from . import shapes

    return shapes.bytes_of_files(sorted({t.problem_path for t in tasks}))


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")
