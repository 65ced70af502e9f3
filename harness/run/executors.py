"""Where tasks run. Every executor takes TaskSpecs and gives back futures of
Finished (a TaskResult and, when it ran elsewhere, its log's text); each task
still runs in the trusted-judge / untrusted-candidate processes of judge/ on
the host that runs it (work.py).

- InlineExecutor: each task built and judged in the caller's thread when it is
  submitted. For tests of the pipeline and one-off library calls.
- LocalExecutor: this host. Builds in a thread pool; one evaluation lane per
  GPU (one timing task per GPU at a time), which takes a task as soon as its
  build is done and keeps judge processes started ahead.
- DaskExecutor (dask_cluster.py): a Dask `distributed` cluster.
"""
from __future__ import annotations

import os
import tempfile
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Protocol

from . import cores, health, launch, task_seconds, work
from ..shared.isolate import Child, kill_all
from ..records import BuildResult, Status, TaskResult, TaskSpec


@dataclass(frozen=True)
class Finished:
    result: TaskResult
    log: str | None = None  # the log's text when it was not written to the log_path given


class Events(Protocol):
    """What an executor says while tasks run (console.py draws it; called from any thread)."""

    def built(self, key: str, result: BuildResult) -> None: ...
    def started(self, key: str) -> None: ...
    def note(self, text: str) -> None: ...


class Quiet:
    def built(self, key: str, result: BuildResult) -> None:
        pass

    def started(self, key: str) -> None:
        pass

    def note(self, text: str) -> None:
        pass


class Executor(Protocol):
    name: str

    def submit(self, spec: TaskSpec, log_path: Path | None = None) -> Future: ...  # Future[Finished]
    def close(self, cancel: bool = False) -> None: ...


def _log_file(log_path: Path | None) -> tuple[Path, tempfile.TemporaryDirectory | None]:
    if log_path is not None:
        log_path.parent.mkdir(parents=True, exist_ok=True)
        return log_path, None
    tmp = tempfile.TemporaryDirectory(prefix="kbench-task-")
    return Path(tmp.name) / "task.log", tmp


def _finish(result: TaskResult, log_path: Path, tmp) -> Finished:
    if tmp is None:
        return Finished(result)
    try:
        return Finished(result, work._read_capped(log_path))
    finally:
        tmp.cleanup()


def _crashed(spec: TaskSpec, where: str, e: BaseException) -> TaskResult:
    return work.failed(spec, Status.CRASHED, f"kbench error while {where}: {type(e).__name__}: {e}"[:500])


class InlineExecutor:
    """Builds and judges each task in the caller's thread, at submit."""

    name = "inline"

    def __init__(self, host: work.Host, events: Events | None = None):
        self.host, self.events = host, events or Quiet()

    def submit(self, spec: TaskSpec, log_path: Path | None = None) -> Future:
        fut: Future = Future()
        path, tmp = _log_file(log_path)
        try:
            def built(result: BuildResult) -> None:
                self.events.built(spec.key, result)
                self.events.started(spec.key)

            result = work.build_and_judge(spec, self.host, path, built)
        except Exception as e:  # noqa: BLE001 - a bug of ours: the task says so, the run goes on
            result = _crashed(spec, "running it", e)
        fut.set_result(_finish(result, path, tmp))
        return fut

    def close(self, cancel: bool = False) -> None:
        pass


# Judge processes started ahead per GPU. `import torch` takes ~5 s on an H100
# host and a small task ~1-2 s, so one ahead is not enough to hide it. Their
# imports take host cores from the task being timed: at most one per 4 cores,
# and none on a CPU run, where the host clock times the task.
PRESTART = 4


def prestart_depth(device: str) -> int:
    """Judges started ahead per GPU (PRESTART says why); KBENCH_PRESTART=0
    turns it off (each task then starts its own judge when it begins)."""
    wanted = int(os.environ.get("KBENCH_PRESTART", PRESTART))
    return 0 if device == "cpu" or wanted <= 0 else min(wanted, max(1, (os.cpu_count() or 4) // 4))


@dataclass
class _Item:
    spec: TaskSpec
    built: BuildResult
    path: Path
    tmp: object
    future: Future
    fallback: float = 0.0  # its expected GPU seconds from its problem's bytes alone (task_seconds.estimate)


def _start_ahead(host: work.Host, ready: list, options, count: int) -> None:
    """`count` more judges started for `options` at the end of `ready`; the first
    of `ready` is told it is next (it prepares its GPU context before its task)."""
    for _ in range(count):
        ready.append((options, launch.start_worker(host.eval_config(options))))
    if ready:
        launch.prepare(ready[0][1])


class LocalExecutor:
    """This host's GPUs: builds in parallel, one evaluation lane per GPU.

    On CUDA a lane starts a task as soon as its build is done, while other builds
    run; the build pool then leaves two cores per lane (the judge's and the
    candidate's), and with `core_split` (cores.py) those cores are the lane's own:
    the builds, the judges started ahead and the lanes' own threads here run on the
    rest. On --device cpu the host clock times the task, so a lane waits until no
    build runs."""

    name = "local"

    def __init__(self, hosts: list[work.Host], events: Events | None = None, *, prestart: int = 0,
                 warm: bool = False, shapes: Callable[[str], dict | None] | None = None,
                 early=None, durations: dict[str, float] | None = None,
                 core_split: cores.CoreSplit | None = None):
        self.split = core_split or cores.CoreSplit()
        # Each lane's judges move to its own CPUs as their task starts; they wait on the rest.
        if self.split.reserved:
            hosts = [replace(h, cpus=self.split.lane(i), spare_cpus=self.split.spare()) for i, h in enumerate(hosts)]
        self.hosts, self.events = hosts, events or Quiet()
        self.early = early  # early_judges.EarlyJudges: the first judge of each lane, started with kbench
        # Seconds each task is expected to hold its GPU: as last time, else as its problem's
        # tasks took (learned as they finish), else from its problem's bytes (task_seconds).
        self.expected = task_seconds.Expected(durations)
        self.device = hosts[0].device
        self.depth = 0 if self.device == "cpu" else prestart
        self.warm = warm  # keep one judge started ahead while idle (library sessions)
        self.shapes = shapes or (lambda path: None)
        self.overlap = self.device == "cuda"
        cpus = os.cpu_count() or 2
        jobs = hosts[0].build_jobs
        if self.split.reserved:
            jobs = max(1, min(jobs, len(self.split.rest)))
        elif self.overlap:
            jobs = max(1, min(jobs, cpus - 2 * len(hosts)))
        self.jobs = jobs
        # A build process is born with the mask of the thread that starts it, and so are its
        # compilers and the build stage's own threads: all on the rest (cores.py).
        self._builds = ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="kbench-build",
                                          initializer=cores.pin_this_thread, initargs=(self.split.spare(),))
        self._cv = threading.Condition()
        self._queue: list[_Item] = []
        self._building = 0
        self._closed = False
        self._lanes: list[threading.Thread] = []
        self._options = None  # the options of the tasks submitted last: what a judge started early is for
        self._holding = 0  # submit_many batches whose cached builds are still being handed over
        self._running: dict[int, str] = {}  # lane -> the problem it judges now
        self.timings: dict[str, float] = {}  # seconds of the build stage's own steps, for the run's phases

    # -- submit ------------------------------------------------------------------
    def submit(self, spec: TaskSpec, log_path: Path | None = None) -> Future:
        fut: Future = Future()
        self._options = spec.options
        self._start(1)
        self._builds.submit(self._build, spec, log_path, fut)
        return fut

    def submit_many(self, items: list[tuple[TaskSpec, Path | None]]) -> list[Future]:
        """A whole run at once: one build_all over every task, so the build queue
        shares the host's compilers between them (MAX_JOBS) and knows when a
        precompiled header pays off; each task still goes to a lane as soon as its
        own build is done."""
        futures, waiting, tasks = [], {}, []
        host = self.hosts[0]
        for spec, log_path in items:
            fut: Future = Future()
            task = work.task_of(spec, host.cache_dir)
            # A list per key: a batch may hold the same solution twice (one file, one key).
            waiting.setdefault(task.key, []).append((spec, log_path, fut))
            tasks.append(task)
            futures.append(fut)
        if items:
            self._options = items[0][0].options
        self._start(len(items))
        lock = threading.Lock()
        held = [True]
        with self._cv:
            self._holding += 1  # until every cached build is handed over, so that lanes choose among all of them

        def on_done(task, built: BuildResult, log: str) -> None:
            with lock:
                spec, log_path, fut = waiting[task.key].pop(0)
            self._built(spec, log_path, fut, built, log)

        def release() -> None:
            with self._cv:
                if held[0]:
                    held[0] = False
                    self._holding -= 1
                    self._cv.notify_all()

        def build_all() -> None:
            cfg = replace(host.build_config(items[0][0].options), jobs=self.jobs)
            try:
                from .. import build

                build.build_all(tasks, cfg, on_done, on_found=release, timings=self.timings)
            except Exception as e:  # noqa: BLE001 - a bug of ours: the tasks not built yet say so
                with lock:
                    left = [entry for entries in waiting.values() for entry in entries]
                    waiting.clear()
                for spec, log_path, fut in left:
                    self._built(spec, log_path, fut, BuildResult(
                        False, Status.CRASHED, f"kbench error while building: {e}"[:500], 0.0, False, ""), "")
            finally:
                release()

        if items:
            self._builds.submit(build_all)
        else:
            release()
        return futures

    def _start(self, count: int) -> None:
        with self._cv:
            if self._closed:
                raise RuntimeError("the executor is closed")
            self._building += count
            if not self._lanes:
                self._lanes = [threading.Thread(target=self._lane, args=(h, i), daemon=True, name=f"kbench-lane-{i}")
                               for i, h in enumerate(self.hosts)]
                for t in self._lanes:
                    t.start()

    def _build(self, spec: TaskSpec, log_path: Path | None, fut: Future) -> None:
        try:
            built, build_log = work.build_one(spec, self.hosts[0])
        except Exception as e:  # noqa: BLE001
            built, build_log = BuildResult(False, Status.CRASHED, f"kbench error while building: {e}"[:500], 0.0,
                                           False, ""), ""
        self._built(spec, log_path, fut, built, build_log)

    def _built(self, spec: TaskSpec, log_path: Path | None, fut: Future, built: BuildResult, build_log: str) -> None:
        path, tmp = _log_file(log_path)
        try:
            path.write_text(work.header(spec, build_log))
        except OSError:
            pass
        self.events.built(spec.key, built)
        fallback = 0.0
        if built.ok:  # here, in a build thread: a lane choosing its next task never waits for sizes
            shape = self.shapes(work.task_of(spec, self.hosts[0].cache_dir).problem_path)
            fallback = task_seconds.estimate(None, shape)
        with self._cv:
            self._building -= 1
            self._queue.append(_Item(spec, built, path, tmp, fut, fallback))
            self._cv.notify_all()

    # -- lanes ---------------------------------------------------------------------
    def _take(self, lane: int) -> tuple[_Item | None, int]:
        with self._cv:
            self._running.pop(lane, None)
            while not self._closed and (not self._queue or self._holding or (not self.overlap and self._building)):
                self._cv.wait(0.5)
            if self._closed:
                return None, 0
            item = self._queue.pop(self._next(self._queue, set(self._running.values())))
            self._running[lane] = item.spec.problem_source.sha256
            return item, len(self._queue) + self._building

    def _next(self, queue: list[_Item], elsewhere: set[str]) -> int:
        """Which ready task a free lane takes: a failed build first (it needs no GPU and
        its result is at hand); then the longest expected (as it took last time, else as its
        problem's tasks take, else by its problem's bytes: task_seconds.Expected), so that no
        long task starts last while the other GPUs idle (longest first, each free GPU
        pulling the next: the lanes end within about one short task of each other); among
        equals one whose problem no other lane is judging now, so that one problem's tasks
        spread over the GPUs; then the one ready first."""
        def rank(i: int) -> tuple:
            item = queue[i]
            if not item.built.ok:
                return (0,)
            cost = self.expected.seconds(item.spec, item.fallback)
            return (1, -cost, item.spec.problem_source.sha256 in elsewhere, i)

        return min(range(len(queue)), key=rank)

    def _lane(self, host: work.Host, lane: int = 0) -> None:
        # This thread polls its judge while it times: off the lanes' cores, as are the
        # judges it starts ahead and its GPU's health checks, which inherit its mask.
        cores.pin_this_thread(self.split.spare())
        ready: list[tuple[object, Child]] = self.early.take(host.gpu_index) if self.early else []  # (options, judge)
        state = {"healthy": True}
        if self.device == "cuda":
            health.keep_ready(host.gpu_index)
        try:
            while True:
                self._start_while_building(host, ready)
                item, pending = self._take(lane)
                if item is None:
                    return
                try:
                    result = self._judge(host, item, pending, ready, state)
                except Exception as e:  # noqa: BLE001 - a bug of ours: this task says so, the lane goes on
                    result = _crashed(item.spec, "judging it", e)
                self.expected.learn(item.spec, result)  # the next task of its problem is expected to take as long
                item.future.set_result(_finish(result, item.path, item.tmp))
        finally:
            for _, c in ready:
                c.discard()
            if self.device == "cuda":
                health.discard(host.gpu_index)

    def _start_while_building(self, host: work.Host, ready: list) -> None:
        """Judges started while this lane waits for builds, so that their seconds of
        `import torch` and CUDA start-up overlap the builds rather than the first
        tasks (a cold run's first task waited ~10 s for its judge on an H100)."""
        if not self.depth or self._options is None:
            return
        with self._cv:
            waiting = 0 if self._queue else self._building
        _start_ahead(host, ready, self._options, min(self.depth, self._share(waiting)) - len(ready))

    def _share(self, pending: int) -> int:
        """Judges one lane needs ahead for `pending` tasks not yet taken: its share of them,
        since every free lane pulls from one queue, and one more (never more than
        `pending`). Each lane asking for all of them starts up to 4x the judges on 4 GPUs,
        whose imports of torch compete for the cores with the judges that are next (on 4
        H100s handoff summed to 31 s against 6.8 s on one GPU). The share alone left a
        lane that ran faster than the others without a judge near the end, so that its
        next task waited for one to import torch: judge_wait summed 11.7 s on 4 H100s
        against 0.35 s on one, 2.2-4.8 s on each of a lane's last tasks (2026-11-27)."""
        lanes = max(1, len(self.hosts))
        return min(pending, -(-pending // lanes) + 1)

    def _judge(self, host: work.Host, item: _Item, pending: int, ready: list, state: dict) -> TaskResult:
        spec = item.spec
        self.events.started(spec.key)
        if not state["healthy"]:
            return work.failed(spec, Status.SKIPPED, "not run: the GPU failed its health check after an earlier task")
        child = None
        if item.built.ok:
            child = next((c for o, c in ready if o == spec.options), None)
            ready[:] = [(o, c) for o, c in ready if c is not child]
            _start_ahead(host, ready, spec.options, min(self.depth, self._share(pending)) - len(ready))
        problem = work.task_of(spec, host.cache_dir).problem_path
        result = work.evaluate_built(spec, item.built, host, item.path, child,
                                     self.shapes(problem) if item.built.ok else None)
        if self.device == "cuda":
            state["healthy"] = health.after(result, host.gpu_index)
            if not state["healthy"]:
                self.events.note(f"GPU {host.gpu_index or 0} failed its health check; its remaining tasks are skipped")
        if self.warm and not ready and item.built.ok:
            _start_ahead(host, ready, spec.options, 1)
        return result

    def close(self, cancel: bool = False) -> None:
        with self._cv:
            self._closed = True
            left = list(self._queue)
            self._queue.clear()
            self._cv.notify_all()
        self._builds.shutdown(wait=not cancel, cancel_futures=cancel)
        if cancel:
            kill_all()
        for item in left:
            if not item.future.done():
                item.future.cancel()
        for t in self._lanes:
            t.join(timeout=None if not cancel else 5)
