"""A GPU worker's start: its facts from NVML, its judges before its `import torch`.

Through torch, a Dask worker's probe of its host cost its `import torch` and a CUDA
start before its judges started, and its first task waited 9-10 s on 4 H200s."""
from __future__ import annotations

from types import SimpleNamespace

import torch

from harness.run import dask_worker, gpus, roofline, work


def _no_torch_cuda(monkeypatch):
    def refuse(*a, **k):
        raise AssertionError("probe_host asked torch where NVML had the answer")

    monkeypatch.setattr(torch.cuda, "get_device_capability", refuse)
    monkeypatch.setattr(torch.cuda, "get_device_name", refuse)


def test_a_gpu_hosts_card_comes_from_nvml_where_it_can_say(monkeypatch, tmp_path):
    asked = []
    monkeypatch.setattr(gpus, "capability", lambda index: asked.append(index) or ("NVIDIA H200", "9.0"))
    monkeypatch.setattr(roofline, "cached_bandwidth", lambda cache, name, env: {"copy_gbs": 4000.0})
    _no_torch_cuda(monkeypatch)
    host = work.probe_host(tmp_path, "cuda", gpu_index=2, build_jobs=4)
    assert (host.name, host.arch, host.bandwidth, host.gpu_index) == ("NVIDIA H200", "9.0", {"copy_gbs": 4000.0}, 2)
    assert asked == [2]


def test_without_nvml_the_card_comes_from_torch(monkeypatch, tmp_path):
    monkeypatch.setattr(gpus, "capability", lambda index: None)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda index: (8, 0))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda index: "NVIDIA A100-SXM4-80GB")
    host = work.probe_host(tmp_path, "cuda", build_jobs=4, measure_bandwidth=False)
    assert (host.name, host.arch, host.bandwidth) == ("NVIDIA A100-SXM4-80GB", "8.0", None)


def test_a_worker_starts_its_judges_before_the_build_stage_imports_torch(monkeypatch):
    from harness import build

    order = []
    host = SimpleNamespace(gpu_index=0, build_config=lambda options: SimpleNamespace(device=options.device))
    monkeypatch.setattr(dask_worker, "_worker_host", lambda device, args: order.append("probe") or host)
    monkeypatch.setattr(dask_worker, "_start_spares", lambda options, h: order.append("judges"))
    monkeypatch.setattr(build, "toolchain_of", lambda cfg: order.append(f"toolchain {cfg.device}"))
    options = SimpleNamespace(device="cuda")
    dask_worker.start_judges(options, dask_worker.WorkerArgs(None), dask_worker.__version__)
    assert order == ["probe", "judges", "toolchain cuda"]


def test_a_workers_task_on_a_warm_cache_imports_neither_torch_nor_the_problem(tmp_path):
    """What a Dask worker does for a task outside its judge: find the build and the
    problem's sizes. Both are kept in the cache (the toolchain's description, the sizes kbench
    found as the run started); a worker that found them through `import torch` and the
    problem's own import spent 2.5-5 s of its first task there (CPU box and 2 x H200,
    bench/gpu_scaling_88998dc_2xH200.md)."""
    import json
    import subprocess
    import sys

    from conftest import ROOT
    from harness.discover import sizes
    from harness.records import Options, Task
    from harness.run.pipeline import task_spec

    fixtures = ROOT / "tests" / "fixtures" / "cpu"
    problem = str(fixtures / "problems" / "level1" / "2_Hinge.py")
    task = Task("level1/2_Hinge", problem, "basic", str(fixtures / "solutions" / "basic" / "level1" / "2_Hinge" /
                                                       "torch_ok.py"))
    cache = tmp_path / "cache"
    spec = task_spec(task, Options(device="cpu"))
    host = work.probe_host(cache, "cpu", build_jobs=1)
    built, _ = work.build_one(spec, host)  # as kbench's build stage leaves the cache
    found = sizes.of_files([work.task_of(spec, cache).problem_path], cache)
    child = f"""
import json, pickle, sys
from pathlib import Path
from harness.run import work
spec = pickle.loads(bytes.fromhex(sys.argv[1]))
host = work.probe_host(Path(sys.argv[2]), "cpu", build_jobs=1)
built, _ = work.build_one(spec, host)
shape = work._shape(work.task_of(spec, host.cache_dir).problem_path, host.cache_dir)
print(json.dumps([built.ok, shape, "torch" in sys.modules]))
"""
    import pickle

    done = subprocess.run([sys.executable, "-c", child, pickle.dumps(spec).hex(), str(cache)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    ok, shape, imported = json.loads(done.stdout.strip().splitlines()[-1])
    assert (ok, shape) == (built.ok, next(iter(found.values())))
    assert not imported, "the worker imported torch outside its judge"
