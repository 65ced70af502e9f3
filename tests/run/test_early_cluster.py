"""--executor dask without --scheduler: kbench starts its local cluster in a thread as the
run begins (dask_cluster.EarlyCluster), so that the workers and their judges start while
kbench imports torch and finds its tasks; the run takes it if torch finds the GPUs NVML
gave, and a cluster nobody took is closed. Stand-ins for the cluster and the client: the
real one runs in tests/run/test_executors.py's Dask test."""
import threading
from types import SimpleNamespace

import pytest

from harness.records import UserError
from harness.run import dask_cluster


class _Made:
    def __init__(self, log: list):
        self.log = log

    def close(self):
        self.log.append(f"closed {type(self).__name__}")


class _Cluster(_Made):
    pass


class _Client(_Made):
    def __init__(self, cluster):
        super().__init__(cluster.log)


def _cfg():
    return SimpleNamespace(options=SimpleNamespace(device="cuda"), dask_workers=0, cache_dir="/nonexistent",
                           use_cache=True, build_jobs=0)


@pytest.fixture
def made(monkeypatch):
    log: list = []
    gate = threading.Event()

    def cluster(device, workers, cache_dir, use_cache, gpus):
        gate.wait(5)  # the start is under way when the test looks
        log.append(f"started for {gpus}")
        return _Cluster(log)

    monkeypatch.setattr(dask_cluster, "local_cluster", cluster)
    monkeypatch.setattr(dask_cluster, "submit_judges", lambda client, device, options, args: ["judges"])
    import distributed

    monkeypatch.setattr(distributed, "Client", _Client)
    return log, gate


def test_the_run_takes_the_cluster_started_for_its_gpus(made):
    log, gate = made
    early = dask_cluster.EarlyCluster(_cfg(), (0, 1))
    gate.set()
    cluster, client, judges = early.take((0, 1))
    assert isinstance(cluster, _Cluster) and isinstance(client, _Client) and judges == ["judges"]
    early.discard()  # taken: the executor closes it, not the run's cleanup
    assert log == ["started for (0, 1)"]


def test_a_cluster_for_other_gpus_is_closed_and_not_used(made):
    log, gate = made
    early = dask_cluster.EarlyCluster(_cfg(), (0, 1, 2, 3))
    gate.set()
    assert early.take((0, 1)) is None
    assert log == ["started for (0, 1, 2, 3)", "closed _Client", "closed _Cluster"]


def test_a_run_that_stops_before_its_tasks_closes_the_cluster_once_started(made):
    log, gate = made
    early = dask_cluster.EarlyCluster(_cfg(), (0,))
    threading.Timer(0.2, gate.set).start()
    early.discard()  # waits for the start under way
    early.discard()
    assert log == ["started for (0,)", "closed _Client", "closed _Cluster"]


def test_what_the_start_raised_reaches_the_run(monkeypatch):
    def cluster(*_):
        raise UserError("--executor dask --device cuda: no CUDA GPU on this host")

    monkeypatch.setattr(dask_cluster, "local_cluster", cluster)
    early = dask_cluster.EarlyCluster(_cfg(), ())
    with pytest.raises(UserError, match="no CUDA GPU"):
        early.take(())
    early.discard()  # nothing to close
