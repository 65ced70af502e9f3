"""One task on the host that runs it: its sources as files, its build, its judge.

Every executor ends here (executors.py): the local one in kbench's own process,
the Dask one inside a worker on another host. A TaskSpec carries the sources'
text, never a path the other side must share; `Host` is what only the running
host knows (its cache folder, its GPU). The result names the user's paths, not
the copies made here.
"""
from __future__ import annotations

import hashlib
import os
import socket
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

from .. import build
from . import gpus, launch
from ..shared.isolate import Child, child_env
from ..shared.whole_file import replace_whole
from ..records import BuildResult, Options, Source, Status, Task, TaskResult, TaskSpec

LOG_CAP = 4 << 20  # bytes of a task's log carried back from another host


@dataclass(frozen=True)
class Host:
    """Facts of the host (and GPU) a task runs on, found there."""

    cache_dir: Path
    device: str  # "cuda" or "cpu"
    name: str = "cpu"  # the device's name, e.g. "NVIDIA H100 80GB HBM3"
    arch: str = ""  # TORCH_CUDA_ARCH_LIST, e.g. "9.0"
    bandwidth: dict | None = None  # roofline.cached_bandwidth's figures
    gpu_index: int | None = None  # CUDA_VISIBLE_DEVICES for its judges; None: as inherited
    build_jobs: int = 1
    use_cache: bool = True
    where: str = ""  # a label for reports: the host name, or a Dask worker's address
    cpus: tuple[int, ...] = ()  # its lane's own CPUs while it times (cores.py); () where none are reserved
    spare_cpus: tuple[int, ...] = ()  # where judges started ahead wait; () where none are reserved

    def eval_config(self, options: Options) -> launch.EvalConfig:
        bw = self.bandwidth or {}
        return launch.EvalConfig(options=options, arch=self.arch, bandwidth_gbs=bw.get("gbs"),
                                   read_gbs=bw.get("read_gbs"), gpu_index=self.gpu_index,
                                   builds_dir=str((self.cache_dir / "builds").resolve()),
                                   cpus=self.cpus, spare_cpus=self.spare_cpus)

    def build_config(self, options: Options) -> build.BuildConfig:
        return build.BuildConfig(self.device, self.arch, self.cache_dir / "builds", max(1, self.build_jobs),
                                 options.build_timeout, self.use_cache, require_sandbox=options.require_sandbox)


def source_of(path: str | Path, name: str | None = None) -> Source:
    """A file's text exactly as its bytes (line endings kept, stray bytes escaped),
    so its hash is the file's hash."""
    with open(path, encoding="utf-8", errors="surrogateescape", newline="") as f:
        return Source(str(name if name is not None else path), f.read())


def materialize(source: Source, cache_dir: Path) -> str:
    """A file holding `source`: the user's own when it is here unchanged (messages
    then name it), else a copy in the cache, one folder per content hash."""
    path = Path(source.path)
    try:
        if path.is_file() and hashlib.sha256(path.read_bytes()).hexdigest() == source.sha256:
            return source.path
    except OSError:
        pass
    folder = cache_dir / "sources" / source.sha256[:24]
    target = folder / (path.name if path.suffix == ".py" else "source.py")
    if not target.is_file():
        folder.mkdir(parents=True, exist_ok=True)
        replace_whole(target, source.text)  # threads of one Session race here
    return str(target)


def task_of(spec: TaskSpec, cache_dir: Path) -> Task:
    """The spec as files on this host."""
    return Task(spec.problem, materialize(spec.problem_source, cache_dir), spec.solution_set,
                materialize(spec.solution_source, cache_dir))


def build_one(spec: TaskSpec, host: Host) -> tuple[BuildResult, str]:
    """Build one task's solution, or find its build in the cache. Processes that share
    the cache (Dask workers of one host, hosts on a shared folder, two runs) build a
    key one at a time: build_all takes the key's lock (build/stage.py _key_lock) and,
    after it, finds another's build cached."""
    task = task_of(spec, host.cache_dir)
    logs: dict[str, str] = {}
    result = build.build_all([task], host.build_config(spec.options),
                             lambda t, r, log: logs.__setitem__(t.key, log))[task.key]
    return result, logs.get(task.key, "")


def evaluate_built(spec: TaskSpec, built: BuildResult, host: Host, log_path: Path,
                   child: Child | None = None, shape: dict | None = None) -> TaskResult:
    """Judge one built task; its log goes to `log_path` (appended)."""
    task = task_of(spec, host.cache_dir)
    cfg = host.eval_config(spec.options)
    if built.ok and not build.intact(built.ext_dir):
        # Written after kbench built it (by another task's candidate, say): rebuild, never load it.
        with open(log_path, "a") as f:
            f.write(f"[kbench] {spec.key}: its build changed since kbench made it; rebuilding\n")
        built = build.build_all([task], host.build_config(spec.options))[task.key]
    result = launch.evaluate(task, built, cfg, log_path, None, child, shape)  # discards `child` if the build failed
    return _as_submitted(result, spec, task, host)


def build_and_judge(spec: TaskSpec, host: Host, log_path: Path,
                    on_built: Callable[[BuildResult], None] | None = None,
                    child: Child | None = None) -> TaskResult:
    """Build one task here, then judge it (in `child`, a judge started ahead, if
    given); its log goes to `log_path`."""
    built, build_log = build_one(spec, host)
    if on_built:
        on_built(built)
    log_path.write_text(header(spec, build_log))
    shape = _shape(task_of(spec, host.cache_dir).problem_path, host.cache_dir) if built.ok else None
    return evaluate_built(spec, built, host, log_path, child, shape=shape)


def run_task(spec: TaskSpec, host: Host, child: Child | None = None) -> tuple[TaskResult, str]:
    """Build and judge one task here; returns its result and its log's text (the
    run folder lives on the machine that ran kbench, maybe another host)."""
    with tempfile.TemporaryDirectory(prefix="kbench-task-") as tmp:
        log_path = Path(tmp) / "task.log"
        result = build_and_judge(spec, host, log_path, child=child)
        return result, _read_capped(log_path)


def header(spec: TaskSpec, build_log: str) -> str:
    return (f"[kbench] task {spec.problem} / {spec.solution_set}: {spec.key}\n"
            f"[kbench] build log\n{build_log}\n[kbench] worker log\n")


def _as_submitted(result: TaskResult, spec: TaskSpec, task: Task, host: Host) -> TaskResult:
    """Paths as the user knows them, and where the task ran: the host, and the GPU's
    number and name (a Dask worker pinned to one GPU sees it as its first)."""
    message = result.message
    for local, theirs in ((task.solution_path, spec.solution_source.path), (task.problem_path, spec.problem_source.path)):
        if local != theirs:
            message = message.replace(local, theirs)
    gpu = gpus.gpu_number(host.gpu_index) if host.device == "cuda" else None
    return replace(result, solution_path=spec.solution_source.path, message=message, fingerprint=spec.fingerprint,
                   problem_sha256=spec.problem_source.sha256, worker=host.where, attempts=spec.attempt,
                   gpu=gpu, gpu_name=host.name if host.device == "cuda" else None)


def _shape(problem_path: str, cache_dir: Path) -> dict | None:
    """The problem's sizes, kept in the cache by content (found by kbench as the run
    starts, on the same host): a Dask worker that found them itself imported torch and
    the problem inside its first task, 2.4-5 s (bench/gpu_scaling_88998dc_2xH200.md)."""
    from ..discover import sizes

    return sizes.of_files([problem_path], cache_dir).get(problem_path)


def _read_capped(path: Path) -> str:
    with open(path, "rb") as f:
        data = f.read(LOG_CAP + 1)
    text = data[:LOG_CAP].decode(errors="replace")
    return text + ("\n[kbench] log cut at 4 MiB\n" if len(data) > LOG_CAP else "")


def probe_host(cache_dir: Path, device: str, *, gpu_index: int | None = None, build_jobs: int = 0,
               use_cache: bool = True, measure_bandwidth: bool = True, where: str = "") -> Host:
    """This host's facts for `device` (the GPU `gpu_index`, or the first visible one)."""
    from ..build import compile_slots

    jobs = build_jobs or compile_slots()  # a core each, as memory allows (nvcc on torch's headers takes 1-3 GB)
    where = where or socket.gethostname()
    if device == "cpu":
        return Host(cache_dir, "cpu", build_jobs=jobs, use_cache=use_cache, where=where)
    name, arch = _card(gpu_index)
    bandwidth = None
    if measure_bandwidth:
        from . import roofline

        env = child_env(dict(os.environ))
        if gpu_index is not None:
            env["CUDA_VISIBLE_DEVICES"] = gpus.visible_device(gpu_index)
        bandwidth = roofline.cached_bandwidth(cache_dir, name, env)
    return Host(cache_dir, "cuda", name, arch, bandwidth, gpu_index, jobs, use_cache, where)


def _card(gpu_index: int | None) -> tuple[str, str]:
    """(name, "major.minor") of the GPU `gpu_index` (an index among the GPUs this process
    sees, as CUDA_VISIBLE_DEVICES gives its judges), from NVML where it can say. A Dask
    worker probes its host as it starts its judges: through torch, its `import torch`
    and CUDA start came first, so each worker's judges started, and its first task
    waited, 9-10 s late on 4 H200s (dask_after, bench/gpu_scaling_b3942d0_4xH200.md)."""
    found = gpus.capability(gpu_index)
    if found is not None:
        return found
    import torch

    index = gpu_index or 0
    major, minor = torch.cuda.get_device_capability(index)
    return torch.cuda.get_device_name(index), f"{major}.{minor}"


def failed(spec: TaskSpec, status: Status, message: str, phase: str = "start") -> TaskResult:
    """A result for a task the executor could not run (its worker died twice, say)."""
    return TaskResult(spec.problem, spec.solution_set, spec.solution_source.path, status, message, phase=phase,
                      fingerprint=spec.fingerprint, problem_sha256=spec.problem_source.sha256, attempts=spec.attempt)
