"""The run: discover -> build (parallel) -> evaluate (one worker per task) -> write.

Each finished task is appended to the run folder's store (store.py) at once, so
a run that is killed or interrupted loses nothing it finished, and --resume
picks it up; saving a task costs the same at task 10,000 as at task 1.
results.json, results.csv, report.md (and the --junit file) are written whole
at the start, at the end, and on the way out of an interrupted or failed run.
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
import socket
import threading
from concurrent.futures import as_completed
import time
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Protocol

from . import cores, executors, gpus, task_seconds, work
from ..report import junit, write as report
from ..discover import sizes as problem_sizes
from ..discover.folders import Discovery, discover, why_nothing_to_run
from .early_judges import EarlyJudges
from ..shared.cache_dir import default_cache_dir
from ..report.gate import GatePolicy
from ..shared import sandbox
from ..shared.isolate import child_env, end_templates
from .clock import RunClock
from .lock import LOCK_NAME, folder_lock
from .usage import not_an_earlier_run
from ..report.store import STORE_NAME, ResultStore
from ..records import BuildResult, Options, RunInfo, RunResults, Task, TaskResult, TaskSpec, UserError, __version__


@dataclass(frozen=True)
class RunConfig:
    problems_dir: Path
    solutions_dir: Path
    out_dir: Path | None = None
    options: Options = field(default_factory=Options)  # what decides verdicts and times: records.Options
    build_jobs: int = 0  # 0: one per compile slot (a core, memory permitting: build.compile_slots)
    cache_dir: Path = field(default_factory=lambda: default_cache_dir())
    use_cache: bool = True
    problem_filters: tuple[str, ...] = ()
    set_filters: tuple[str, ...] = ()
    policy: GatePolicy = field(default_factory=GatePolicy)
    resume: Path | None = None
    gpus: tuple[int, ...] = ()  # CUDA device indices to spread tasks over; () = every GPU kbench sees
    executor: str = "local"  # "local", "dask" or "inline" (executors.py)
    scheduler: str | None = None  # a Dask scheduler's address; None: a cluster on this host
    dask_workers: int = 0  # workers of that local cluster; 0: one per GPU (or 3 on --device cpu)
    junit_path: Path | None = None  # --junit: written with results.json, at the end or on the way out
    solution_files: tuple[Path, ...] = ()  # --solution: only these files' tasks
    reserve_cores: bool = True  # --no-reserve-cores: GPU lanes share every core with builds (cores.py)

    @property
    def device(self) -> str:
        return self.options.device

    def options_record(self) -> dict:
        """What goes into results.json's run.options (and the resume fingerprint)."""
        opts = asdict(self.options)
        return {
            "problems": str(self.problems_dir), "solutions": str(self.solutions_dir), **opts,
            "problem_filters": list(self.problem_filters), "set_filters": list(self.set_filters),
            "fail_on": sorted(f.value for f in self.policy.fail_flags), "min_speedup": self.policy.min_speedup,
            "executor": self.executor,
        }


class Reporter(Protocol):
    """What the pipeline tells the outside world; console.py draws it, tests record it."""

    def discovered(self, discovery: Discovery, todo: int, reused: int) -> None: ...
    def build_started(self, count: int) -> None: ...
    def build_done(self, task: Task, result: BuildResult) -> None: ...
    def task_started(self, task: Task, index: int, total: int) -> None: ...
    def task_done(self, result: TaskResult) -> None: ...
    def note(self, text: str) -> None: ...
    def run_folder(self, path: Path) -> None: ...  # where the run is written, once it exists
    def devices(self, text: str) -> None: ...  # which GPUs the run uses (gpus.describe), before anything else


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


_NOT_FINGERPRINTED = ("problem_filters", "set_filters", "fail_on", "min_speedup", "executor", "require_sandbox")


def fingerprint(task: Task, cfg: RunConfig) -> str:
    return _fingerprint(task, cfg.options_record(), __version__)


def _fingerprint(task: Task, options: dict, version: str) -> str:
    h = hashlib.sha256()
    h.update(Path(task.solution_path).read_bytes())
    h.update(Path(task.problem_path).read_bytes())
    opts = {k: v for k, v in options.items() if k not in _NOT_FINGERPRINTED}
    h.update(json.dumps([version, opts], sort_keys=True).encode())
    return h.hexdigest()[:20]


def _previous_results(cfg: RunConfig, warn) -> tuple[dict[str, TaskResult], RunInfo | None]:
    """The earlier run's results by task key, in its order, and its run info."""
    if cfg.resume is None:
        return {}, None
    if not any((cfg.resume / name).is_file() for name in (STORE_NAME, "results.json")):
        raise UserError(f"--resume: no results.json or {STORE_NAME} in '{cfg.resume}'; pass the folder of an earlier run")
    earlier = report.load_run(cfg.resume, warn)
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
            parts += _changed_options(old_opts, cfg.options_record())
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
    _check_run_folder(cfg)
    _check_sandbox(cfg, reporter)
    clock = RunClock()
    # The GPUs from CUDA_VISIBLE_DEVICES or NVML, before torch is imported, so that each
    # one's first judge starts now; torch's count, below, is the one that decides.
    early_gpus = cfg.gpus
    if cfg.device == "cuda" and not cfg.gpus:
        early_gpus = tuple(range(gpus.visible_count() or 0))
    split = _core_split(cfg, len(early_gpus))
    early = EarlyJudges.start(cfg.options, early_gpus, cfg.cache_dir / "builds",
                              cfg.executor == "local" and cfg.resume is None, split)
    if cfg.executor == "dask" and not cfg.scheduler and cfg.resume is None:
        from . import dask_cluster

        early.dask = dask_cluster.EarlyCluster(cfg, early_gpus)
    try:
        dev = probe_device(cfg.device)  # first: without a GPU nothing else matters
        cfg = _with_gpus(cfg, dev, reporter)
        if cfg.gpus != early_gpus:  # NVML and torch disagree: judges pinned by NVML's count are of no use
            early.discard()
            split = _core_split(cfg, len(cfg.gpus))
        early.keep_if(dev.arch)
        _say_cores(cfg, split, reporter)
        clock.lap("device")
        found = discover(cfg.problems_dir, cfg.solutions_dir, cfg.problem_filters, cfg.set_filters, cfg.solution_files)
        clock.lap("discovery")
        if not found.tasks:
            raise why_nothing_to_run(found, cfg.problems_dir, cfg.solutions_dir, cfg.problem_filters, cfg.set_filters)
        if cfg.resume or cfg.out_dir:
            out_dir = cfg.resume or cfg.out_dir
            out_dir.mkdir(parents=True, exist_ok=True)
        else:
            out_dir = new_run_folder(Path("results"))
        reporter.run_folder(out_dir)
        with folder_lock(out_dir):  # a second run on this folder stops here, naming the first
            return _run_locked(cfg, reporter, dev, found, out_dir, clock, early, split)
    finally:
        early.discard()  # those no lane took
        end_templates()
        if early.dask is not None:
            early.dask.discard()  # a cluster the run did not take (it stopped before its tasks)


def _check_sandbox(cfg: RunConfig, reporter: Reporter) -> None:
    """Before any solution code runs (judges started ahead start candidates): a host that
    cannot confine builds and candidates is refused under --require-sandbox, and otherwise
    said in the run's first lines (each task then records `sandbox: null`). With a Dask
    scheduler elsewhere, each worker's processes check for themselves (sandbox.confine)."""
    if cfg.executor == "dask" and cfg.scheduler:
        return
    if sandbox.landlock_abi() >= 1:
        return
    if cfg.options.require_sandbox:
        raise UserError("this kernel has no Landlock, so solutions' builds and candidates would run unconfined, with "
                        "write access to everything kbench can write; run on Linux 5.13+ with Landlock enabled, or "
                        "pass --no-require-sandbox (the default outside CI) to run them unconfined")
    reporter.note("no sandbox: this kernel has no Landlock, so solutions' builds and candidates run unconfined and can "
                  "write wherever kbench can (--require-sandbox refuses to run them)")


def _with_gpus(cfg: RunConfig, dev: DeviceInfo, reporter: Reporter) -> RunConfig:
    """On CUDA: the GPUs the run uses (--gpus, checked, or every one torch sees), named
    on the run's first line. The CPU path is left as it was."""
    if cfg.device != "cuda":
        return cfg
    if cfg.executor == "dask" and cfg.scheduler:  # the cluster's GPUs, not this host's
        reporter.devices(f"using the GPU workers of the Dask cluster at {cfg.scheduler}")
        return cfg
    import torch

    count = torch.cuda.device_count()
    chosen = gpus.choose(cfg.gpus, count)
    used = [gpus.Gpu(i, gpus.gpu_number(i), torch.cuda.get_device_name(i)) for i in chosen]
    reporter.devices(gpus.describe(used, count))
    return replace(cfg, gpus=chosen)


def _core_split(cfg: RunConfig, lanes: int) -> cores.CoreSplit:
    """The CPUs each GPU lane times on and those the rest runs on (cores.py): for a local
    run on CUDA only. The CPU path times after its builds, one lane; under Dask each
    worker places its own processes."""
    if cfg.device != "cuda" or cfg.executor != "local":
        return cores.CoreSplit()
    return cores.for_run(max(1, lanes), cfg.reserve_cores)


def _say_cores(cfg: RunConfig, split: cores.CoreSplit, reporter: Reporter) -> None:
    """The run-level line below the GPUs' on CUDA: which cores each lane times on, or why
    none are reserved (said once here, never on a task)."""
    if cfg.device != "cuda":
        return
    if cfg.executor != "local":
        reporter.devices(f"cores: none reserved for timing (--executor {cfg.executor})")
        return
    reporter.devices(split.describe([gpus.gpu_number(i) for i in cfg.gpus] if cfg.gpus else None))


def _check_run_folder(cfg: RunConfig) -> None:
    """Before anything runs: --out must not replace an earlier run, and --resume continues
    its own folder in place, so an --out beside it would be ignored."""
    if cfg.resume is not None and cfg.out_dir is not None and cfg.out_dir.resolve() != cfg.resume.resolve():
        raise UserError(f"--resume {cfg.resume} continues that run in its own folder; drop --out {cfg.out_dir}")
    if cfg.resume is None and cfg.out_dir is not None:
        if (cfg.out_dir / LOCK_NAME).exists():
            with folder_lock(cfg.out_dir):  # a run still using the folder is the first thing to say
                pass
        not_an_earlier_run(cfg.out_dir)


def new_run_folder(parent: Path) -> Path:
    """results/<timestamp>, created here and by this run alone: two runs started in the
    same second get <timestamp> and <timestamp>-2 (mkdir, not exists-then-create, so that
    two processes cannot both take one name)."""
    parent.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    for n in range(1, 1000):
        folder = parent / (stamp if n == 1 else f"{stamp}-{n}")
        try:
            folder.mkdir()
            return folder
        except FileExistsError:
            continue
    raise UserError(f"could not create a new run folder under {parent} (1000 named {stamp}*); pass --out DIR")


def _run_locked(cfg: RunConfig, reporter: Reporter, dev: DeviceInfo, found: Discovery,
                out_dir: Path, clock: RunClock | None = None,
                early: EarlyJudges | None = None, split: cores.CoreSplit | None = None) -> tuple[RunResults, Path]:
    clock = clock or RunClock()
    previous, earlier = _previous_results(cfg, reporter.note)
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
        options=cfg.options_record(),
        started=_now(),
        unmatched=tuple(f"{u.path}: {u.reason}" for u in found.unmatched),
        gpus=tuple(gpus.Gpu(i, gpus.gpu_number(i), _gpu_name(i, dev)).label() for i in cfg.gpus)
        if cfg.device == "cuda" else (),
    )
    results: dict[str, TaskResult] = dict(done)
    build_stage: dict = {}
    clock.lap("resume")

    def snapshot(finished: bool = False) -> RunResults:
        ordered = tuple(results[t.key] for t in found.tasks if t.key in results) + tuple(kept)
        return RunResults(replace(info, finished=_now() if finished else None, phase_seconds=clock.snapshot(),
                                  **build_stage), ordered)

    carried = snapshot()
    with ResultStore.create(out_dir, info, [t.key for t in found.tasks] + [r.key for r in kept], carried.results) as store:
        _write_reports(carried, out_dir, cfg, with_junit=False)
        clock.lap("run_folder")
        try:
            if todo:
                _run_tasks(cfg, dev, todo, prints, out_dir, reporter, store, results, build_stage, clock, early, split)
        except BaseException:  # Ctrl-C or a bug: what finished is in the store; write the reports from it
            _write_on_the_way_out(snapshot(), out_dir, cfg, store, reporter)
            raise
        if todo:
            task_seconds.save(cfg.cache_dir, [results[t.key] for t in todo if t.key in results], cfg.options)
        clock.mark("until_reports")
        final = snapshot(finished=True)
        store.set_run(final.run)
    _write_reports(final, out_dir, cfg)
    return final, out_dir


def _run_tasks(cfg: RunConfig, dev: DeviceInfo, todo: list[Task], prints: dict[str, str], out_dir: Path,
               reporter: Reporter, store: ResultStore, results: dict[str, TaskResult], build_stage: dict,
               clock: RunClock, early: EarlyJudges | None = None, split: cores.CoreSplit | None = None) -> None:
    """Run `todo`; each result goes into `results` and the store as it finishes."""
    by_key = {t.key: t for t in todo}
    if early is not None and cfg.executor == "local":
        early.top_up(len(todo))  # every GPU's next judges import torch while the builds are checked
    events = _Events(reporter, by_key, len(todo))
    executor = _executor(cfg, dev, todo, events, clock, early, split)
    specs = [task_spec(t, cfg.options, prints[t.key]) for t in todo]
    clock.lap("executor")
    reporter.build_started(len(todo))
    t0 = time.monotonic()
    events.t0 = t0
    try:
        items = [(spec, _log_path(out_dir, by_key[spec.key])) for spec in specs]
        if hasattr(executor, "submit_many"):  # the local executor builds a run's tasks as one queue
            futures = dict(zip(executor.submit_many(items), specs))
        else:
            futures = {executor.submit(spec, path): spec for spec, path in items}
        for fut in as_completed(futures):
            spec = futures[fut]
            finished = fut.result()
            result = finished.result
            log_path = _log_path(out_dir, by_key[spec.key])
            if finished.log is not None:
                log_path.parent.mkdir(parents=True, exist_ok=True)
                log_path.write_text(finished.log)
            result = replace(result, log_path=str(log_path))
            if events.builds_left == 0 and "build_seconds" not in build_stage:
                build_stage.update(build_seconds=round(events.last_build - t0, 3), builds_cached=events.cached)
            results[spec.key] = result
            store.append(result)
            reporter.task_done(result)
        clock.lap("tasks")  # from the first build's start to the last task's result
        if events.first_start is not None:
            clock.add("first_task_wait", round(events.first_start - t0, 3))
        for name, seconds in getattr(executor, "timings", {}).items():
            clock.add(name, seconds)
        executor.close()
        clock.lap("executor_close")
    except BaseException:  # Ctrl-C: stop the builds and the judges now
        executor.close(cancel=True)
        raise


def _write_reports(run: RunResults, out_dir: Path, cfg: RunConfig, with_junit: bool = True) -> None:
    report.write_all(run, out_dir, cfg.policy)
    if with_junit and cfg.junit_path is not None:
        junit.write(run, cfg.junit_path, cfg.policy)


def _write_on_the_way_out(run: RunResults, out_dir: Path, cfg: RunConfig, store: ResultStore,
                          reporter: Reporter) -> None:
    """The reports of a run cut short. Failing here must not hide why the run stopped:
    the store already holds every finished task, so say where they are instead."""
    try:
        store.set_run(run.run)
        _write_reports(run, out_dir, cfg)
    except Exception as e:  # noqa: BLE001 - a full disk, say; the first error is the one raised
        reporter.note(f"could not write results.json ({type(e).__name__}: {e}); every finished task is in "
                      f"{out_dir / STORE_NAME}: `kbench report {out_dir}` reads it")


def task_spec(task: Task, options: Options, fingerprint: str = "") -> TaskSpec:
    """The task as every executor takes it: its files' text, not their paths."""
    return TaskSpec(task.problem, task.solution_set, work.source_of(task.problem_path),
                    work.source_of(task.solution_path), options, fingerprint)


class _Events:
    """The executor's events, as the reporter's calls (with the discovered Task)."""

    def __init__(self, reporter: Reporter, by_key: dict[str, Task], total: int):
        self.reporter, self.by_key, self.total = reporter, by_key, total
        self.lock = threading.Lock()
        self.builds_left, self.cached, self.last_build, self.started_count = total, 0, time.monotonic(), 0
        self.t0, self.first_start = time.monotonic(), None  # when the tasks were submitted; when the first began

    def built(self, key: str, result: BuildResult) -> None:
        with self.lock:
            self.builds_left -= 1
            self.cached += int(result.cached)
            self.last_build = time.monotonic()
        self.reporter.build_done(self.by_key[key], result)

    def started(self, key: str) -> None:
        with self.lock:
            index = self.started_count
            self.started_count += 1
            if self.first_start is None:
                self.first_start = time.monotonic()
        self.reporter.task_started(self.by_key[key], index, self.total)

    def note(self, text: str) -> None:
        self.reporter.note(text)


def _executor(cfg: RunConfig, dev: DeviceInfo, todo: list[Task], events: _Events, clock: RunClock | None = None,
              early: EarlyJudges | None = None, split: cores.CoreSplit | None = None):
    """The executor cfg names, with this host's facts."""
    clock = clock or RunClock()
    if cfg.executor == "dask":
        from . import dask_cluster

        executor = dask_cluster.DaskExecutor.for_run(cfg, events, shapes=_problem_sizes(cfg, todo, clock),
                                                     early=early.dask if early is not None else None)
        if not executor.judges_started:
            executor.start_judges(cfg.options)
        clock.lap("dask_cluster")
        return executor
    bandwidth = None
    clock.lap("executor")
    if cfg.device == "cuda" and cfg.options.time:
        from . import roofline

        bandwidth = roofline.cached_bandwidth(cfg.cache_dir, dev.name, child_env(dict(os.environ))) or None
        if not bandwidth:
            events.note("could not measure the device's copy bandwidth: no roofline floor this run")
    clock.lap("bandwidth")
    jobs = cfg.build_jobs or default_build_jobs()
    indices = list(cfg.gpus) if cfg.device == "cuda" and cfg.gpus else [None]
    hosts = [work.Host(cfg.cache_dir, cfg.device, _gpu_name(g, dev), dev.arch, bandwidth, g, jobs, cfg.use_cache,
                       socket.gethostname()) for g in indices]
    if cfg.executor == "inline":
        return executors.InlineExecutor(hosts[0], events)
    if cfg.executor != "local":
        raise UserError(f"--executor must be local, dask or inline, not '{cfg.executor}'")
    shape = _problem_sizes(cfg, todo, clock)
    return executors.LocalExecutor(hosts, events, prestart=executors.prestart_depth(cfg.device), shapes=shape,
                                   early=early, durations=task_seconds.load(cfg.cache_dir), core_split=split)


def _problem_sizes(cfg: RunConfig, todo: list[Task], clock: RunClock):
    """problem path -> its sizes, found in a thread while the builds run: to refuse a task
    that cannot fit, to count its check sets, and to expect how long a task never run
    takes. Found on the meta device, once per problem and cached by content."""
    sizes: dict[str, dict | None] = {}

    def find_sizes() -> None:
        t0 = time.monotonic()
        sizes.update(problem_sizes.of_files(sorted({t.problem_path for t in todo}), cfg.cache_dir))
        clock.add("problem_sizes", time.monotonic() - t0)

    sizer = threading.Thread(target=find_sizes, daemon=True)
    sizer.start()

    def shape(problem_path: str) -> dict | None:
        if sizer.is_alive():
            t0 = time.monotonic()
            sizer.join(timeout=120)  # a problem file that hangs on the meta device must not hang the run
            clock.add("problem_sizes_wait", time.monotonic() - t0)
        return sizes.get(problem_path)

    return shape


def _gpu_name(index: int | None, dev: DeviceInfo) -> str:
    """The name of the GPU `index` (hosts may mix kinds), else the first's."""
    if index is None or dev.arch == "":
        return dev.name
    import torch

    return torch.cuda.get_device_name(index)


def default_build_jobs() -> int:
    """Builds at once: one per compile slot (a core, memory permitting), so that
    builds use every core while the GPUs time (the lanes' own processes run at a
    higher priority than builds: build.build_nice)."""
    from ..build import compile_slots

    return compile_slots()



@functools.lru_cache(maxsize=None)
def problem_sha(path: str) -> str:
    """The problem file's hash: `compare` calls no task faster or slower across a change of it."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")
