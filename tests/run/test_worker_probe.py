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
    host = SimpleNamespace(gpu_index=0)
    monkeypatch.setattr(dask_worker, "_worker_host", lambda device, args: order.append("probe") or host)
    monkeypatch.setattr(dask_worker, "_start_spares", lambda options, h: order.append("judges"))
    monkeypatch.setattr(build, "toolchain_versions", lambda device: order.append(f"toolchain {device}"))
    options = SimpleNamespace(device="cuda")
    dask_worker.start_judges(options, dask_worker.WorkerArgs(None), dask_worker.__version__)
    assert order == ["probe", "judges", "toolchain cuda"]
