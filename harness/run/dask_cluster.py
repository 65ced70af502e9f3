"""DaskExecutor: tasks on a Dask `distributed` cluster (Dask schedules; kbench
does not).

Each task is two Dask tasks:
- a build, a CPU task any worker may run (no resource);
- an evaluation, which needs the resource GPU=1 (EVAL=1 on --device cpu), so a
  worker started with `--resources GPU=1` judges one task at a time on its GPU.
  It runs in the judge / candidate processes of judge/ on that worker's host,
  as on the local executor, and builds first if its host has no such build: a
  build made on another host reaches it through a shared cache folder
  (--cache-dir on a shared file system); without one it is built again there.
  Every library is checked against kbench's hash record before it is loaded.

Results stream back as they finish; the run folder is written by kbench's own
process. A worker that dies under a task: Dask runs the task again on another
worker (a cluster kbench starts allows one such death per task; a user's
cluster, its own `distributed.scheduler.allowed-failures`), and the result
records that it ran twice. Ctrl-C cancels the tasks and stops the judges on
every worker.
"""
from __future__ import annotations

import logging
import os
import threading
from concurrent.futures import Future
from dataclasses import dataclass, replace
from pathlib import Path

from . import health, launch, work
from .gpus import visible_device
from .executors import Events, Finished, Quiet, prestart_depth
from ..records import BuildResult, Status, TaskSpec, UserError, __version__

START_TOPIC = "kbench-task-start"
RESOURCE = {"cuda": "GPU", "cpu": "EVAL"}
CPU_WORKERS = 3  # a cluster kbench starts for --device cpu


@dataclass(frozen=True)
class WorkerArgs:
    """Host options sent with every task; the worker's host fills in the rest."""

    cache_dir: str | None  # None: the worker's own ($KBENCH_CACHE or ~/.cache/kbench)
    use_cache: bool = True
    build_jobs: int = 0


# ---- worker side ---------------------------------------------------------------
_hosts: dict[tuple, work.Host] = {}
_lock = threading.Lock()


def _worker_host(device: str, args: WorkerArgs) -> work.Host:
    """This worker's facts, found once per worker process."""
    from distributed import get_worker

    key = (device, args)
    with _lock:
        if key not in _hosts:
            from ..shared.cache_dir import default_cache_dir

            cache = Path(args.cache_dir) if args.cache_dir else default_cache_dir()
            _hosts[key] = work.probe_host(cache, device, build_jobs=args.build_jobs or 2, use_cache=args.use_cache,
                                          where=get_worker().address)
        return _hosts[key]


def build_task(spec: TaskSpec, args: WorkerArgs, version: str) -> BuildResult:
    if version != __version__:
        return BuildResult(False, Status.CRASHED, f"this Dask worker runs kbench {__version__}, the run kbench "
                           f"{version}: install the same version on every worker", 0.0, False, "")
    built, _ = work.build_one(spec, _worker_host(spec.options.device, args))
    return built


def eval_task(spec: TaskSpec, args: WorkerArgs, version: str, built: BuildResult):
    """Build (a cache hit where the build task ran on this host or on a shared
    cache) and judge one task; returns (TaskResult, log text)."""
    from distributed import get_worker

    worker = get_worker()
    worker.log_event(START_TOPIC, {"key": spec.key, "worker": worker.address})
    if version != __version__:
        return work.failed(spec, Status.CRASHED, built.message, phase="build"), ""
    host = _worker_host(spec.options.device, args)
    if spec.options.device == "cuda" and not _healthy.get(host.gpu_index, True):
        return work.failed(spec, Status.SKIPPED, "not run: this worker's GPU failed its health check after an "
                           f"earlier task ({worker.address})"), ""
    child = _take_spare(spec, host)
    _start_spares(spec, host)
    result, log = work.run_task(spec, host, child)
    if spec.options.device == "cuda":
        _healthy[host.gpu_index] = health.after(result, host.gpu_index)
    return result, log


# Judges started ahead on each worker for its next tasks with the same options, as
# many as the local executor's lanes keep (executors.PRESTART says why), started as
# a task begins: their seconds of `import torch` overlap the tasks before them. With
# one, started after each task, a task of 1-2 s waited ~5 s for its judge: 20 cached
# tasks took 155 s on one H100 where the local executor took 51 s.
_spares: dict = {}  # GPU index -> [(options, judge)], the first told it is next
_healthy: dict = {}


def _take_spare(spec: TaskSpec, host: work.Host):
    """The oldest judge started for these options; judges started for other options
    (a session's earlier ones) or dead are ended."""
    with _lock:
        ready = _spares.get(host.gpu_index, [])
        child = next((c for o, c in ready if o == spec.options and c.proc.poll() is None), None)
        stale = [c for o, c in ready if c is not child and (o != spec.options or c.proc.poll() is not None)]
        _spares[host.gpu_index] = [(o, c) for o, c in ready if c is not child and c not in stale]
    for c in stale:
        c.discard()
    return child


def _start_spares(spec: TaskSpec, host: work.Host) -> None:
    """Top this worker's judges started ahead up to the local executor's depth, the
    first of them prepared (its GPU context made) as the next one."""
    if spec.options.device != "cuda":  # on the CPU a waiting judge would only take cores from the task
        return
    with _lock:
        ready = _spares.setdefault(host.gpu_index, [])
        for _ in range(max(1, prestart_depth("cuda")) - len(ready)):
            ready.append((spec.options, launch.start_worker(host.eval_config(spec.options))))
        launch.prepare(ready[0][1])
    health.keep_ready(host.gpu_index)


def _stop_judges() -> None:
    """Run on every worker at Ctrl-C: its judges (and their candidates) die now."""
    from ..shared.isolate import kill_all

    kill_all()


# ---- kbench's side ----------------------------------------------------------------
def local_cluster(device: str, workers: int, cache_dir: Path, use_cache: bool = True):
    """A cluster on this host: one worker per GPU, pinned to it with
    CUDA_VISIBLE_DEVICES, or CPU_WORKERS workers on --device cpu. Each has
    threads for builds beside its one evaluation at a time."""
    import dask
    from distributed import Nanny, Scheduler, SpecCluster

    if device == "cuda":
        import torch

        gpus = torch.cuda.device_count()
        if gpus == 0:
            raise UserError("--executor dask --device cuda: no CUDA GPU on this host to start workers for; "
                            "pass --scheduler ADDRESS of a cluster with GPU workers, or use --device cpu")
        workers = workers or gpus
    else:
        gpus, workers = 0, workers or CPU_WORKERS
    # On --device cpu the CPU is the timed device: one thing at a time per worker
    # (a build or a judged task). On CUDA, builds run beside the GPU's one task.
    threads = 1 if device == "cpu" else max(2, (os.cpu_count() or 2) // workers)
    spec = {}
    for i in range(workers):
        env = {"KBENCH_CACHE": str(cache_dir), "OMP_NUM_THREADS": "1"}
        if gpus:
            env["CUDA_VISIBLE_DEVICES"] = visible_device(i % gpus)
        spec[f"kbench-{i}"] = {"cls": Nanny, "options": {
            "nthreads": threads, "resources": {RESOURCE[device]: 1}, "env": env, "memory_limit": 0,
            "silence_logs": logging.ERROR}}
    # One death of a task's worker is retried; a second fails the task (KilledWorker).
    with dask.config.set({"distributed.scheduler.allowed-failures": 1}):
        return SpecCluster(workers=spec, scheduler={"cls": Scheduler, "options": {"dashboard_address": None}},
                           silence_logs=logging.ERROR, name="kbench")


class DaskExecutor:
    name = "dask"

    def __init__(self, client, device: str, args: WorkerArgs, events: Events | None = None, cluster=None):
        self.client, self.cluster, self.device, self.args = client, cluster, device, args
        self.events = events or Quiet()
        self._starts: dict[str, int] = {}
        self._lock = threading.Lock()
        self._futures: list = []
        self._check_resources()
        client.subscribe_topic(START_TOPIC, self._on_start)

    @classmethod
    def for_run(cls, cfg, events: Events | None = None) -> "DaskExecutor":
        from distributed import Client

        device = cfg.options.device
        if cfg.scheduler:
            try:
                client = Client(cfg.scheduler, timeout="10s")
            except OSError as e:
                raise UserError(f"--scheduler {cfg.scheduler}: cannot reach the Dask scheduler ({e}); "
                                "start one with `dask scheduler` and workers with `dask worker ADDRESS "
                                "--resources GPU=1`") from None
            return cls(client, device, WorkerArgs(None, cfg.use_cache, cfg.build_jobs), events)
        cluster = local_cluster(device, cfg.dask_workers, cfg.cache_dir, cfg.use_cache)
        client = Client(cluster)
        return cls(client, device, WorkerArgs(str(cfg.cache_dir), cfg.use_cache, cfg.build_jobs), events, cluster)

    def _check_resources(self) -> None:
        res = RESOURCE[self.device]
        workers = self.client.scheduler_info().get("workers", {})
        if not any(w.get("resources", {}).get(res, 0) >= 1 for w in workers.values()):
            raise UserError(f"no worker of the Dask cluster offers {res}=1 ({len(workers)} workers); start workers "
                            f"with `dask worker ADDRESS --resources {res}=1`")

    def _on_start(self, event) -> None:
        _, msg = event
        with self._lock:
            self._starts[msg["key"]] = self._starts.get(msg["key"], 0) + 1
            first = self._starts[msg["key"]] == 1
        if first:
            self.events.started(msg["key"])

    def submit(self, spec: TaskSpec, log_path: Path | None = None) -> Future:
        out: Future = Future()
        tag = f"{spec.solution_source.sha256[:12]}-{len(self._futures)}"
        b = self.client.submit(build_task, spec, self.args, __version__, key=f"kbench-build-{tag}", pure=False)
        e = self.client.submit(eval_task, spec, self.args, __version__, b, key=f"kbench-eval-{tag}", pure=False,
                               resources={RESOURCE[self.device]: 1})
        self._futures += [b, e]
        b.add_done_callback(lambda f: self._built(spec, f))
        e.add_done_callback(lambda f: self._done(spec, f, out))
        return out

    def _built(self, spec: TaskSpec, f) -> None:
        try:
            built = f.result()
        except Exception as ex:  # noqa: BLE001 - its worker died twice, say
            built = BuildResult(False, Status.CRASHED, f"the build's Dask task failed: {ex}"[:300], 0.0, False, "")
        if not f.cancelled():
            self.events.built(spec.key, built)

    def _done(self, spec: TaskSpec, f, out: Future) -> None:
        if f.cancelled():
            out.cancel()
            return
        try:
            result, log = f.result()
        except Exception as ex:  # noqa: BLE001 - KilledWorker: its worker died each time it ran
            result, log = work.failed(spec, Status.CRASHED, f"its Dask worker died each time it ran it: "
                                      f"{type(ex).__name__}: {ex}"[:400]), None
        with self._lock:
            starts = self._starts.get(spec.key, 1)
        if starts > 1:
            note = f"ran {starts} times: its earlier Dask worker died under it"
            result = replace(result, attempts=starts,
                             message=f"{result.message}; {note}" if result.message else note)
        out.set_result(Finished(result, log))

    def close(self, cancel: bool = False) -> None:
        try:
            if cancel and self._futures:
                self.client.cancel(self._futures, force=True)
                try:
                    self.client.run(_stop_judges)
                except Exception:  # noqa: BLE001 - a worker gone already has no judges
                    pass
            self.client.close()
        finally:
            if self.cluster is not None:
                self.cluster.close()
