"""The worker side of --executor dask: what runs inside a Dask worker process.

A build task, an evaluation task (in the judge / candidate processes of judge/ on
the worker's host, as on the local executor) and the judges each GPU worker keeps
started ahead. dask_cluster.py is kbench's side, which submits them. Imports
`distributed` only inside the functions that run there.
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path

from . import health, launch, work
from .. import build
from .executors import prestart_depth
from ..records import BuildResult, Status, TaskSpec, __version__

START_TOPIC = "kbench-task-start"
ENDED_AT = "_ended_at"  # an eval task's end, time.time() on its worker: in its phases on the way back only
RESOURCE = {"cuda": "GPU", "cpu": "EVAL"}


@dataclass(frozen=True)
class WorkerArgs:
    """Host options sent with every task; the worker's host fills in the rest."""

    cache_dir: str | None  # None: the worker's own ($KBENCH_CACHE or ~/.cache/kbench)
    use_cache: bool = True
    build_jobs: int = 0


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


def eval_task(spec: TaskSpec, args: WorkerArgs, version: str, built: BuildResult, submitted_at: float | None = None):
    """Build (a cache hit where the build task ran on this host or on a shared
    cache) and judge one task; returns (TaskResult, log text). Its phases gain
    "dask_wait": from kbench's submit (`submitted_at`, time.time() there) to this
    start, on the two hosts' clocks; kbench adds "dask_return" (dask_cluster.py):
    on 2 H200s a Dask run's GPU lanes were busy ~24 of its 40 s of tasks against the
    local executor's 22 of 25, and where the rest goes was not known."""
    from distributed import get_worker

    began = time.time()
    worker = get_worker()
    worker.log_event(START_TOPIC, {"key": spec.key, "worker": worker.address})
    if version != __version__:
        return work.failed(spec, Status.CRASHED, built.message, phase="build"), ""
    host = _worker_host(spec.options.device, args)
    if spec.options.device == "cuda" and not _healthy.get(host.gpu_index, True):
        return work.failed(spec, Status.SKIPPED, "not run: this worker's GPU failed its health check after an "
                           f"earlier task ({worker.address})"), ""
    child = _take_spare(spec, host)
    _start_spares(spec.options, host)
    result, log = work.run_task(spec, host, child)
    if spec.options.device == "cuda":
        _healthy[host.gpu_index] = health.after(result, host.gpu_index)
    phases = dict(result.phase_seconds)
    if submitted_at is not None:
        phases["dask_wait"] = round(max(0.0, began - submitted_at), 3)
    phases["dask_after"] = round(time.time() - began - result.seconds, 3) if result.seconds else 0.0
    phases[ENDED_AT] = time.time()  # kbench turns it into dask_return and drops it
    return replace(result, phase_seconds=phases), log


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


def _start_spares(options, host: work.Host) -> None:
    """Top this worker's judges started ahead up to the local executor's depth, the
    first of them prepared (its GPU context made) as the next one."""
    if options.device != "cuda":  # on the CPU a waiting judge would only take cores from the task
        return
    with _lock:
        ready = _spares.setdefault(host.gpu_index, [])
        for _ in range(max(1, prestart_depth("cuda")) - len(ready)):
            ready.append((options, launch.start_worker(host.eval_config(options))))
        launch.prepare(ready[0][1])
    health.keep_ready(host.gpu_index)


def start_judges(options, args: WorkerArgs, version: str) -> int:
    """Run once on each GPU worker as a run starts: its judges started ahead, so that its
    first task does not wait for a judge's `import torch` (each worker's first did, so
    the wait grew with the number of workers). Returns how many it keeps."""
    if version != __version__ or options.device != "cuda":
        return 0
    host = _worker_host(options.device, args)  # NVML's facts: milliseconds (work.probe_host)
    _start_spares(options, host)
    # The build stage's toolchain key: kept in the cache by kbench (build/toolchain.py), else
    # found here through `import torch`, once the judges are on their way and while kbench
    # is still starting, not inside this worker's first task.
    build.toolchain_of(host.build_config(options))
    with _lock:
        return len(_spares.get(host.gpu_index, []))


def stop_judges() -> None:
    """Run on every worker at Ctrl-C: its judges (and their candidates) die now."""
    from ..shared.isolate import kill_all

    kill_all()
