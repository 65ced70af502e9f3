"""The library API, for training loops and notebooks: the verdicts of `kbench run`
from source text, with no folders.

    result = harness.evaluate(problem_src, solution_src, device="cuda")
    with harness.Session(device="cuda", trials=3) as session:
        futures = session.evaluate_many([(problem_src, s) for s in samples])

A Session keeps its executor's workers warm between batches (judge processes
started ahead, a Dask cluster) and is safe to call from several threads.
"""
from __future__ import annotations

import itertools
import threading
from concurrent.futures import Future
from dataclasses import fields, replace
from pathlib import Path
from typing import Iterable

from .run import executors, work
from .run.gpus import choose as choose_gpus
from .records import Options, Source, TaskResult, TaskSpec, TimingConfig
from .shared.isolate import end_templates

_TIMING = {"time_budget": "budget_s", "timing_mode": "mode"}


def options_from(device: str = "cuda", **kwargs) -> Options:
    """Options from keyword arguments named as the CLI's flags (time_budget, timing_mode,
    trials, seed, fp64, time, timeout, compile_baseline, cpu_threads, build_timeout,
    precision: "fp32", "fp16" or "bf16"). A bad value raises ValueError."""
    timing = {_TIMING[k]: kwargs.pop(k) for k in list(kwargs) if k in _TIMING}
    known = {f.name for f in fields(Options)} - {"device", "timing"}
    unknown = sorted(set(kwargs) - known)
    if unknown:
        raise TypeError(f"unknown option(s) {', '.join(unknown)}; known: {', '.join(sorted(known | set(_TIMING)))}")
    if device not in ("cuda", "cpu"):
        raise ValueError(f"device must be 'cuda' or 'cpu', not {device!r}")
    return Options(device=device, timing=TimingConfig(**timing), **kwargs)


class Session:
    """Evaluates (problem source, solution source) pairs with the verdicts of `kbench run`.

    executor: "local" (this host's GPUs: every one it sees, or `gpus=(0, 1)`), "dask"
    (`scheduler="tcp://host:8786"`, or a cluster on this host of `workers`), or
    "inline" (each task in the calling thread, nothing kept warm). `log_dir`:
    where each task's log is written (default: none kept)."""

    def __init__(self, executor: str = "local", *, device: str = "cuda", gpus: tuple[int, ...] = (),
                 scheduler: str | None = None, workers: int = 0, cache_dir: str | Path | None = None,
                 build_jobs: int = 0, log_dir: str | Path | None = None, **options):
        from .run.pipeline import RunConfig, default_cache_dir, probe_device

        self.options = options_from(device, **options)
        self.cache_dir = Path(cache_dir) if cache_dir else default_cache_dir()
        self.log_dir = Path(log_dir) if log_dir else None
        self._count = itertools.count()
        self._lock = threading.Lock()
        if executor == "dask":
            from .run.dask_cluster import DaskExecutor

            cfg = RunConfig(Path("."), Path("."), options=self.options, cache_dir=self.cache_dir,
                            build_jobs=build_jobs, scheduler=scheduler, dask_workers=workers, executor="dask")
            self.executor = DaskExecutor.for_run(cfg)
            self.executor.start_judges(self.options)  # every GPU worker's first task finds its judge started
        elif executor in ("local", "inline"):
            dev = probe_device(device)
            indices: list = [None]
            if device == "cuda" and executor == "local":  # as `kbench run`: every GPU it sees unless told
                import torch

                indices = list(choose_gpus(tuple(gpus), torch.cuda.device_count()))
            hosts = [work.probe_host(self.cache_dir, device, gpu_index=g, build_jobs=build_jobs) for g in indices]
            if device == "cuda":
                hosts = [replace(h, name=dev.name) for h in hosts]
            self.executor = (executors.InlineExecutor(hosts[0]) if executor == "inline" else
                             # As many judges started ahead as a run's lanes keep while tasks wait (with
                             # one, each ~1 s task of a batch waited seconds for its judge's import
                             # torch); one stays started while the session idles.
                             executors.LocalExecutor(hosts, prestart=executors.prestart_depth(device), warm=True))
        else:
            raise ValueError(f"executor must be 'local', 'dask' or 'inline', not {executor!r}")

    def submit(self, problem_source: str, solution_source: str, *, name: str | None = None) -> Future:
        """A future of the TaskResult. `name` labels the task in results and messages."""
        spec, log = self._spec(problem_source, solution_source, name)
        return self._wrap(self.executor.submit(spec, log), log)

    def _spec(self, problem_source: str, solution_source: str, name: str | None) -> tuple[TaskSpec, Path | None]:
        with self._lock:
            n = next(self._count)
        label = name or f"task{n}"
        problem = Source(f"<problem of {label}>/problem.py", problem_source)
        spec = TaskSpec(label, "session", problem, Source(f"<{label}>/solution_{n}.py", solution_source), self.options)
        return spec, self.log_dir / f"{n:06d}_{_safe(label)}.log" if self.log_dir else None

    @staticmethod
    def _wrap(inner: Future, log: Path | None) -> Future:
        out: Future = Future()

        def done(f: Future) -> None:
            if f.cancelled():
                out.cancel()
            elif f.exception() is not None:
                out.set_exception(f.exception())
            else:
                out.set_result(replace(f.result().result, log_path=str(log) if log else ""))

        inner.add_done_callback(done)
        return out

    def evaluate(self, problem_source: str, solution_source: str, *, name: str | None = None) -> TaskResult:
        return self.submit(problem_source, solution_source, name=name).result()

    def evaluate_many(self, pairs: Iterable[tuple[str, str]]) -> list[Future]:
        """Futures of TaskResults, in the order of `pairs`; they finish in any order.
        On this host the batch is built as one queue (longest builds first, the host's
        compilers shared between them, a precompiled header made when enough wait),
        and each task is judged as soon as its own build is done."""
        items = [self._spec(p, s, None) for p, s in pairs]
        if hasattr(self.executor, "submit_many"):
            return [self._wrap(f, log) for f, (_, log) in zip(self.executor.submit_many(items), items)]
        return [self._wrap(self.executor.submit(spec, log), log) for spec, log in items]

    def close(self) -> None:
        self.executor.close()
        end_templates()

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc) -> None:
        self.executor.close(cancel=exc[0] is not None)
        end_templates()


def evaluate(problem_source: str, solution_source: str, *, device: str = "cuda", **options) -> TaskResult:
    """One candidate, in the calling thread: `kbench run`'s verdict for it."""
    with Session("inline", device=device, **options) as session:
        return session.evaluate(problem_source, solution_source)


def _safe(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in text)[:80]
