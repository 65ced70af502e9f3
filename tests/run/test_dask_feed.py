"""Evaluations go to a Dask cluster longest expected first, one per free GPU slot
(harness/run/dask_feed.py), so Dask's count-based placement cannot stack long tasks."""
from harness.run.dask_feed import Feeder


def test_the_longest_ready_goes_first_and_never_more_than_the_slots():
    sent, slots = [], [["w0", "w1"]]
    feeder = Feeder(lambda: slots[0])
    for name, seconds in (("a", 1.0), ("b", 5.0), ("c", 3.0), ("d", 9.0), ("e", 2.0)):
        feeder.ready(seconds, lambda worker, name=name: sent.append((name, worker)))
    assert sent == [("a", "w0"), ("b", "w1")]  # the first two arrived while slots were free, one per worker
    feeder.finished("w1")
    assert sent[-1] == ("d", "w1")  # then the longest waiting, to the worker that freed
    feeder.finished("w0")
    feeder.finished("w1")
    assert sent[-2:] == [("c", "w0"), ("e", "w1")]
    slots[0] = []  # a cluster restarting its workers still gets one evaluation at a time, placed by Dask
    feeder.finished("w0")
    feeder.finished("w1")
    feeder.ready(1.0, lambda worker: sent.append(("f", worker)))
    feeder.ready(1.0, lambda worker: sent.append(("g", worker)))
    assert sent[-1] == ("f", None)


def test_each_evaluation_goes_to_a_free_gpu_not_to_a_busy_one():
    """A worker with two GPUs is two slots; a busy one gets nothing until it frees, however
    many evaluations wait (Dask itself would queue them on the worker holding their build)."""
    sent = []
    feeder = Feeder(lambda: ["big", "big", "small"])
    for i in range(5):
        feeder.ready(float(i), lambda worker, i=i: sent.append(worker))
    assert sorted(sent) == ["big", "big", "small"]
    feeder.finished("small")
    assert sent[-1] == "small"
    feeder.finished("big")
    assert sent[-1] == "big" and len(sent) == 5


def test_a_closed_feeder_sends_nothing_and_counts_what_it_held():
    sent = []
    feeder = Feeder(lambda: ["w0"])
    feeder.ready(1.0, lambda worker: sent.append(1))
    feeder.ready(2.0, lambda worker: sent.append(2))
    assert feeder.close() == 1
    feeder.finished("w0")
    assert sent == [1]


def test_an_idle_cluster_waits_a_moment_so_the_longest_of_a_burst_starts_first():
    """Cached builds come back in any order within a moment: with one slot, the first
    evaluation goes after settle_s, and it is the longest of those that came meanwhile."""
    import time

    sent = []
    feeder = Feeder(lambda: ["w0"], settle_s=0.2)
    for name, seconds in (("short", 1.0), ("long", 9.0), ("mid", 3.0)):
        feeder.ready(seconds, lambda worker, name=name: sent.append(name))
    assert sent == []
    time.sleep(0.5)
    assert sent == ["long"]
    feeder.finished("w0")  # a busy cluster's next goes at once
    feeder.ready(0.5, lambda worker: sent.append("later"))
    assert sent == ["long", "mid"]
    feeder.close()


class _FakeFuture:
    def __init__(self, fn, args):
        self.fn, self.args, self.value, self.callbacks = fn, args, None, []

    def add_done_callback(self, cb):
        self.callbacks.append(cb)

    def finish(self, value):
        self.value = value
        for cb in self.callbacks:
            cb(self)

    def result(self):
        return self.value

    def cancelled(self):
        return False


class _FakeClient:
    """Three workers with one GPU each; submitted tasks wait until the test finishes them."""

    def __init__(self):
        self.submitted = []

    def scheduler_info(self):
        return {"workers": {f"tcp://w{i}": {"resources": {"GPU": 1}} for i in range(3)}}

    def subscribe_topic(self, topic, handler):
        pass

    def submit(self, fn, *args, key, pure, resources=None, workers=None, allow_other_workers=None):
        future = _FakeFuture(fn, args)
        future.workers = workers
        self.submitted.append((fn.__name__, key, args, future))
        return future


def test_the_dask_executor_sends_the_longest_built_tasks_to_free_gpus_only():
    """Five built tasks of known times on a 3-GPU cluster: the three longest go at once,
    the next longest only when one finishes; a failed build goes first."""
    from harness.run.dask_cluster import DaskExecutor
    from harness.run.dask_worker import WorkerArgs
    from harness.records import BuildResult, Options, Source, Status, TaskResult, TaskSpec

    client = _FakeClient()
    seconds = {"a": 1.0, "b": 5.0, "c": 3.0, "d": 9.0, "e": 2.0}
    executor = DaskExecutor(client, "cuda", WorkerArgs(None), durations={f"fp-{k}": v for k, v in seconds.items()})
    executor.feeder.settle_s = 0  # as each arrives (the settling is tested above)
    specs = {k: TaskSpec(k, "s", Source(f"/p/{k}.py", f"# {k}\n"), Source(f"/s/{k}.py", f"# s {k}\n"),
                         Options(), fingerprint=f"fp-{k}") for k in seconds}
    outs = {k: executor.submit(spec) for k, spec in specs.items()}
    builds = {args[0].problem: f for name, _, args, f in client.submitted if name == "build_task"}
    for k in "abcde":  # built in submission order, as builds finishing
        builds[k].finish(BuildResult(True, None, "", 0.0, True, ""))

    def evals():
        return [args[0].problem for name, _, args, _ in client.submitted if name == "eval_task"]

    assert evals() == ["a", "b", "c"]  # slots were free as each arrived: no reason to wait
    eval_of = {args[0].problem: f for name, _, args, f in client.submitted if name == "eval_task"}
    assert sorted(eval_of[k].workers[0] for k in "abc") == ["tcp://w0", "tcp://w1", "tcp://w2"]  # one per GPU
    eval_of["a"].finish((TaskResult("a", "s", "/s/a.py", Status.OK, ""), ""))
    assert evals() == ["a", "b", "c", "d"]  # the longest waiting, not the first submitted
    eval_of = {args[0].problem: f for name, _, args, f in client.submitted if name == "eval_task"}
    assert eval_of["d"].workers == eval_of["a"].workers  # to the GPU that freed
    assert outs["a"].result().result.status is Status.OK
    late = TaskSpec("f", "s", Source("/p/f.py", "# f\n"), Source("/s/f.py", "# s f\n"), Options())
    executor.submit(late)
    [f for name, _, args, f in client.submitted if name == "build_task" and args[0].problem == "f"][0].finish(
        BuildResult(False, Status.BUILD_ERROR, "error: x", 0.0, False, ""))
    eval_of["b"].finish((TaskResult("b", "s", "/s/b.py", Status.OK, ""), ""))
    assert evals()[-1] == "f"  # a failed build first: it only says so
