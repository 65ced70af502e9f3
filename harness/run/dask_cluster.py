"""DaskExecutor: tasks on a Dask `distributed` cluster (Dask schedules; kbench
does not).

Each task is two Dask tasks (their functions, which run in the workers, are in
dask_worker.py):
- a build, a CPU task any worker may run (no resource);
- an evaluation, which needs the resource GPU=1 (EVAL=1 on --device cpu), so a
  worker started with `--resources GPU=1` judges one task at a time on its GPU.
  It runs in the judge / candidate processes of judge/ on that worker's host,
  as on the local executor, and builds first if its host has no such build: a
  build made on another host reaches it through a shared cache folder
  (--cache-dir on a shared file system); without one it is built again there.
  Every library is checked against kbench's hash record before it is loaded.

Evaluations go to the cluster longest expected first, one per free GPU slot, to
that slot's worker (dask_feed.py: Dask's own placement spread them by count, not
by time, and by where the build's result was, not by which GPU was free).
Results stream back as they finish; the run folder is written by kbench's own
process. A worker that dies under a task: Dask runs the task again on another
worker (a cluster kbench starts allows one such death per task; a user's
cluster, its own `distributed.scheduler.allowed-failures`), and the result
records that it ran twice. Ctrl-C cancels the tasks and stops the judges on
every worker.
"""
from __future__ import annotations

import itertools
import logging
import os
import threading
import time
from concurrent.futures import Future
from dataclasses import replace
from pathlib import Path

from . import task_seconds, work
from .dask_feed import Feeder
from .dask_worker import RESOURCE, START_TOPIC, WorkerArgs, build_task, eval_task, start_judges, stop_judges
from .gpus import visible_device
from .executors import Events, Finished, Quiet
from ..records import BuildResult, Status, TaskSpec, UserError, __version__

CPU_WORKERS = 3  # a cluster kbench starts for --device cpu
# Seconds the first evaluations of an idle cluster wait for other builds (dask_feed.py):
# a warm run's cached builds come back within a fraction of a second, in any order.
SETTLE_S = 0.5


# ---- kbench's side ----------------------------------------------------------------
def local_cluster(device: str, workers: int, cache_dir: Path, use_cache: bool = True, gpus: tuple[int, ...] = ()):
    """A cluster on this host: one worker per GPU (those of `gpus`, else every one it
    sees), pinned to it with CUDA_VISIBLE_DEVICES, or CPU_WORKERS workers on --device
    cpu. Each has threads for builds beside its one evaluation at a time."""
    import dask
    from distributed import Nanny, Scheduler, SpecCluster

    if device == "cuda":
        import torch

        if torch.cuda.device_count() == 0:
            raise UserError("--executor dask --device cuda: no CUDA GPU on this host to start workers for; "
                            "pass --scheduler ADDRESS of a cluster with GPU workers, or use --device cpu")
        indices = list(gpus) or list(range(torch.cuda.device_count()))
        workers = workers or len(indices)
    else:
        indices, workers = [], workers or CPU_WORKERS
    # On --device cpu the CPU is the timed device: one thing at a time per worker
    # (a build or a judged task). On CUDA, builds run beside the GPU's one task.
    threads = 1 if device == "cpu" else max(2, (os.cpu_count() or 2) // workers)
    spec = {}
    for i in range(workers):
        env = {"KBENCH_CACHE": str(cache_dir), "OMP_NUM_THREADS": "1"}
        if indices:
            env["CUDA_VISIBLE_DEVICES"] = visible_device(indices[i % len(indices)])
        spec[f"kbench-{i}"] = {"cls": Nanny, "options": {
            "nthreads": threads, "resources": {RESOURCE[device]: 1}, "env": env, "memory_limit": 0,
            "silence_logs": logging.ERROR}}
    # One death of a task's worker is retried; a second fails the task (KilledWorker).
    with dask.config.set({"distributed.scheduler.allowed-failures": 1}):
        return SpecCluster(workers=spec, scheduler={"cls": Scheduler, "options": {"dashboard_address": None}},
                           silence_logs=logging.ERROR, name="kbench")


class DaskExecutor:
    name = "dask"

    def __init__(self, client, device: str, args: WorkerArgs, events: Events | None = None, cluster=None,
                 durations: dict[str, float] | None = None, shapes=None):
        self.client, self.cluster, self.device, self.args = client, cluster, device, args
        self.events = events or Quiet()
        self._starts: dict[str, int] = {}
        self._lock = threading.Lock()
        self._futures: list = []
        self._waiting: list[Future] = []  # results of tasks whose evaluation the feeder still holds
        self.expected = task_seconds.Expected(durations)
        self.shapes = shapes or (lambda path: None)  # a problem file's bytes, for a task never run
        self.feeder = Feeder(self._slots, settle_s=SETTLE_S)
        self._slot_list, self._slot_time = [], -1e9
        self._tags = itertools.count()
        self._check_resources()
        client.subscribe_topic(START_TOPIC, self._on_start)

    def start_judges(self, options) -> None:
        """Judges started ahead on every GPU worker now, while the builds run (a task on
        each worker, pinned to it; none on --device cpu, where they would take the cores
        the task is timed on)."""
        if self.device != "cuda":
            return
        res = RESOURCE[self.device]
        for address, w in self.client.scheduler_info().get("workers", {}).items():
            if w.get("resources", {}).get(res, 0) >= 1:
                self._futures.append(self.client.submit(
                    start_judges, options, self.args, __version__, workers=[address], allow_other_workers=False,
                    pure=False, key=f"kbench-judges-{address}-{next(self._tags)}"))

    @classmethod
    def for_run(cls, cfg, events: Events | None = None, shapes=None) -> "DaskExecutor":
        from distributed import Client

        durations = task_seconds.load(cfg.cache_dir)

        device = cfg.options.device
        if cfg.scheduler:
            try:
                client = Client(cfg.scheduler, timeout="10s")
            except OSError as e:
                raise UserError(f"--scheduler {cfg.scheduler}: cannot reach the Dask scheduler ({e}); "
                                "start one with `dask scheduler` and workers with `dask worker ADDRESS "
                                "--resources GPU=1`") from None
            return cls(client, device, WorkerArgs(None, cfg.use_cache, cfg.build_jobs), events,
                       durations=durations, shapes=shapes)
        cluster = local_cluster(device, cfg.dask_workers, cfg.cache_dir, cfg.use_cache, cfg.gpus)
        client = Client(cluster)
        return cls(client, device, WorkerArgs(str(cfg.cache_dir), cfg.use_cache, cfg.build_jobs), events, cluster,
                   durations=durations, shapes=shapes)

    def _slots(self) -> list[str]:
        """The cluster's evaluation slots: each worker's address once per GPU (EVAL)
        resource it offers, asked of the scheduler at most every 2 s (workers may join
        or leave)."""
        now = time.monotonic()
        if now - self._slot_time > 2.0:
            res = RESOURCE[self.device]
            workers = self.client.scheduler_info().get("workers", {})
            self._slot_list = [a for a, w in workers.items() for _ in range(int(w.get("resources", {}).get(res, 0)))]
            self._slot_time = now
        return self._slot_list

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
        """The build goes to the cluster now (any worker); the evaluation once the build is
        done and a GPU slot is free, longest expected first (dask_feed.Feeder)."""
        out: Future = Future()
        with self._lock:  # a Session submits from several threads: one Dask key per task
            tag = f"{spec.solution_source.sha256[:12]}-{next(self._tags)}"
        b = self.client.submit(build_task, spec, self.args, __version__, key=f"kbench-build-{tag}", pure=False)
        with self._lock:
            self._futures.append(b)
            self._waiting.append(out)
        b.add_done_callback(lambda f: self._built(spec, f, tag, out))
        return out

    def _built(self, spec: TaskSpec, b, tag: str, out: Future) -> None:
        try:
            built = b.result()
        except Exception as ex:  # noqa: BLE001 - its worker died twice, say
            built = BuildResult(False, Status.CRASHED, f"the build's Dask task failed: {ex}"[:300], 0.0, False, "")
        if b.cancelled():
            out.cancel()
            return
        self.events.built(spec.key, built)

        def evaluate(worker: str | None) -> None:
            # To the free slot's worker (dask_feed.py says why); loosely, so that a worker
            # that died leaves its task to another, as Dask would.
            where = {"workers": [worker], "allow_other_workers": True} if worker else {}
            e = self.client.submit(eval_task, spec, self.args, __version__, b, key=f"kbench-eval-{tag}", pure=False,
                                   resources={RESOURCE[self.device]: 1}, **where)
            with self._lock:
                self._futures.append(e)
            e.add_done_callback(lambda f: self._done(spec, f, out, worker))

        # A failed build holds a slot only to say so: first, as on the local executor's lanes.
        expected = (float("inf") if not built.ok else
                    self.expected.seconds(spec, task_seconds.estimate(None, self.shapes(spec.problem_source.path))))
        self.feeder.ready(expected, evaluate)

    def _done(self, spec: TaskSpec, f, out: Future, worker: str | None = None) -> None:
        self.feeder.finished(worker)
        with self._lock:
            if out in self._waiting:
                self._waiting.remove(out)
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
        self.expected.learn(spec, result)
        out.set_result(Finished(result, log))

    def close(self, cancel: bool = False) -> None:
        if cancel:
            self.feeder.close()
            with self._lock:
                held, self._waiting = list(self._waiting), []
            for out in held:
                out.cancel()
        try:
            if cancel and self._futures:
                self.client.cancel(self._futures, force=True)
                try:
                    self.client.run(stop_judges)
                except Exception:  # noqa: BLE001 - a worker gone already has no judges
                    pass
            self.client.close()
        finally:
            if self.cluster is not None:
                self.cluster.close()
