"""The executor seam: every executor gives the verdicts the local one gives.

The Dask test starts a cluster of 3 worker processes on this host (--device
cpu), kills one worker while it judges a task, and checks that the task ran
again elsewhere, was marked so, and that no task was lost. Its verdicts are
held to the fixtures' declared ones (KBENCH_EXPECT), the same declarations the
local executor's run of this set meets in test_cli_cpu.py."""
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from conftest import HANG_LIMITS, ROOT
from expect import mismatches

FIXTURES = ROOT / "tests" / "fixtures" / "cpu"
# Untimed: what is under test is where tasks run and what survives a dead worker. Three
# Dask workers timing CPU tasks at once on a 2-core machine read each other's load (an
# honest cpp_ok.py got timing_mismatch there), and timing adds nothing to the verdicts.
RUN = ["run", "--problems", str(FIXTURES / "problems"), "--solutions", str(FIXTURES / "solutions"), "-s", "basic",
       "--device", "cpu", "--no-timing", "--timeout", "40", "--exit-zero"]


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def _parent(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return 0


def _age(pid: int) -> float:
    """Seconds since `pid` started (0 when it is gone)."""
    try:
        ticks = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
        return float(Path("/proc/uptime").read_text().split()[0]) - ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def _busy_dask_worker(root: int, min_age: float) -> int | None:
    """A Dask worker process under `root` whose judge has had a candidate for at
    least `min_age` seconds: a task in flight (not a judge started ahead) that
    will not end before the kill lands. Killing a worker whose task had just
    replied killed no task at all (CI, stop 43: no task ran twice)."""
    pids = [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()]
    parents = {p: _parent(p) for p in pids}
    for pid in pids:
        if b"harness.judge" not in _cmdline(pid):
            continue
        worker = parents[pid]
        has_candidate = any(parents[c] == pid and b"harness.candidate" in _cmdline(c) and _age(c) >= min_age
                            for c in pids)
        chain, p = [], worker
        while p and p != root and len(chain) < 6:
            chain.append(p)
            p = parents.get(p, 0)
        if has_candidate and p == root and b"spawn" in _cmdline(worker):
            return worker
    return None


def test_dask_executor_matches_local_and_survives_a_killed_worker(kbench_cache, tmp_path):
    env = {**os.environ, "KBENCH_CACHE": str(kbench_cache), "PYTHONUNBUFFERED": "1", **HANG_LIMITS}  # hang.py: 10 s
    proc = subprocess.Popen([sys.executable, str(ROOT / "cli.py"), *RUN, "--out", str(tmp_path / "dask"),
                             "--executor", "dask", "--dask-workers", "3"],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    output: list[str] = []
    reader = threading.Thread(target=lambda: output.extend(proc.stdout), daemon=True)
    reader.start()
    killed = None
    deadline = time.monotonic() + 300
    while killed is None and proc.poll() is None and time.monotonic() < deadline:
        # hang.py's candidate lives 10 s (HANG_LIMITS); no other task's lives 3 s here, and
        # one that did would still be in flight when the kill lands at once.
        worker = _busy_dask_worker(proc.pid, min_age=3.0)
        if worker is not None:
            os.kill(worker, signal.SIGKILL)
            killed = worker
        time.sleep(0.2)
    proc.wait(timeout=600)
    reader.join(timeout=10)
    log = "".join(output)
    assert killed is not None, "no Dask worker was seen judging a task\n" + log[-3000:]
    assert proc.returncode == 0, log[-3000:]

    data = json.loads((tmp_path / "dask" / "results.json").read_text())
    results = data["results"]
    assert data["run"]["finished"] and len(results) == 12, log[-3000:]
    assert mismatches(results) == []
    retried = [r for r in results if r["attempts"] == 2]
    assert len(retried) == 1, [(r["solution_path"], r["attempts"]) for r in results]
    assert "ran 2 times: its earlier Dask worker died under it" in retried[0]["message"]
    assert all(r["worker"].startswith("tcp://") for r in results)
    # Where a Dask task's seconds outside its judge go: the submit's way to the worker, the
    # worker's own work around the task, the result's way back (its clock stamp is not kept).
    judged = [r["phase_seconds"] for r in results if r["status"] != "build_error"]
    assert judged and all(p.get("dask_wait", -1) >= 0 and p.get("dask_return", -1) >= 0 and "dask_after" in p
                          and "_ended_at" not in p for p in judged), judged
    for r in results:  # every log came back to the run folder
        assert Path(r["log_path"]).is_file() and "[kbench] worker log" in Path(r["log_path"]).read_text()
    time.sleep(1)
    assert not any(b"harness.judge" in _cmdline(int(p.name)) and _parent(int(p.name)) == killed
                   for p in Path("/proc").iterdir() if p.name.isdigit()), "the killed worker's judge lives on"


def test_scheduler_without_dask_executor_is_a_user_error():
    from click.testing import CliRunner

    import cli

    res = CliRunner().invoke(cli.main, ["run", "--device", "cpu", "--scheduler", "tcp://127.0.0.1:1"])
    assert res.exit_code == 2 and "--scheduler needs --executor dask" in res.stderr


def test_unreachable_scheduler_says_how_to_start_one(run_cli, tmp_path):
    res = run_cli(*RUN, "--out", str(tmp_path / "r"), "--executor", "dask", "--scheduler", "tcp://127.0.0.1:9",
                  timeout=120)
    assert res.returncode == 2, res.stderr[-2000:]
    line = res.stderr.strip().splitlines()[-1]
    assert "tcp://127.0.0.1:9" in line and "dask worker ADDRESS --resources GPU=1" in line


def test_a_dask_worker_keeps_as_many_judges_started_ahead_as_a_local_lane(monkeypatch):
    """On a GPU worker a task takes the oldest judge started for its options and the
    worker tops its judges back up to the local executor's depth at once, the first
    told it is next; judges for other options are ended. With one judge, started
    after each task, every short task waited for its judge's `import torch`."""
    from types import SimpleNamespace

    from harness.run import dask_worker as de, health, launch

    started, prepared, ended = [], [], []

    class FakeJudge:
        def __init__(self, n):
            self.n, self.proc = n, SimpleNamespace(poll=lambda: None)

        def discard(self):
            ended.append(self.n)

    monkeypatch.setattr(launch, "start_worker", lambda cfg: started.append(FakeJudge(len(started))) or started[-1])
    monkeypatch.setattr(launch, "prepare", lambda child: prepared.append(child.n))
    monkeypatch.setattr(health, "keep_ready", lambda gpu: None)
    monkeypatch.setattr(de, "prestart_depth", lambda device: 3)
    monkeypatch.setattr(de, "_spares", {})
    host = SimpleNamespace(gpu_index=0, eval_config=lambda options: options)
    a, b = (SimpleNamespace(options=SimpleNamespace(device="cuda", tag=t)) for t in "ab")

    assert de._take_spare(a, host) is None  # the worker's first task starts its own
    de._start_spares(a.options, host)
    assert [j.n for _, j in de._spares[0]] == [0, 1, 2] and prepared == [0]
    assert de._take_spare(a, host).n == 0
    de._start_spares(a.options, host)
    assert [j.n for _, j in de._spares[0]] == [1, 2, 3] and prepared[-1] == 1
    assert de._take_spare(b, host) is None and sorted(ended) == [1, 2, 3] and de._spares[0] == []


# ---- the local executor's choice of tasks, with fake builds and judges ---------------

def _fake_lanes(monkeypatch, gpus: int, seconds: dict[str, float], sizes: dict[str, int], log: list,
                durations: dict[str, float] | None = None):
    """A LocalExecutor over `gpus` lanes whose builds are all cached (delivered at once)
    and whose judging sleeps `seconds[problem]`, recording (lane, problem, start, end)."""
    from harness.build import stage as build
    from harness.run import executors, health, work
    from harness.records import BuildResult, Status, TaskResult

    monkeypatch.setattr(health, "keep_ready", lambda gpu: None)
    monkeypatch.setattr(health, "discard", lambda gpu: None)
    monkeypatch.setattr(health, "after", lambda result, gpu: True)

    def fake_build_all(tasks, cfg, on_done=None, on_found=None, timings=None):
        for task in tasks:
            on_done(task, BuildResult(True, None, "", 0.0, True, ""), "")
            time.sleep(0.01)  # delivered one by one, as a real cache check does
        on_found()

    def fake_evaluate(spec, built, host, log_path, child=None, shape=None):
        start = time.monotonic()
        time.sleep(seconds[spec.problem])
        log.append((host.gpu_index, spec.problem, start, time.monotonic()))
        return TaskResult(spec.problem, spec.solution_set, spec.solution_source.path, Status.OK, "")

    monkeypatch.setattr(build, "build_all", fake_build_all)
    monkeypatch.setattr(work, "evaluate_built", fake_evaluate)
    problems = {}

    def shape(path: str) -> dict:
        name = problems[Path(path).read_text()]
        return {"input_bytes": sizes[name], "output_bytes": 0, "check_inputs": None}

    hosts = [work.Host(Path(os.environ["KBENCH_TEST_CACHE"]), "cuda", "fake GPU", "9.0", None, g, 4) for g in range(gpus)]
    return executors.LocalExecutor(hosts, shapes=shape, durations=durations), problems


def _specs(names: list[str], problems: dict):
    from harness.records import Options, Source, TaskSpec

    specs = []
    for i, name in enumerate(names):
        text = f"# problem {name}\n"
        problems[text] = name
        specs.append((TaskSpec(name, "set", Source(f"/p/{name}.py", text), Source(f"/s/{name}_{i}.py", f"# {i}\n"),
                               Options(), fingerprint=f"fp-{name}-{i}"), None))
    return specs


def test_free_gpus_take_the_longest_tasks_first_and_spread_one_problems_tasks(monkeypatch, tmp_path):
    """Two GPUs, a warm run: the two long tasks of one problem, submitted last, start first,
    one on each GPU, and the short ones follow; in submission order (first ready, first
    taken) the long ones would start last and one GPU would idle while the other ran both."""
    monkeypatch.setenv("KBENCH_TEST_CACHE", str(tmp_path))
    log: list = []
    executor, problems = _fake_lanes(monkeypatch, 2, {"short": 0.1, "long": 0.6}, {"short": 10, "long": 1000}, log)
    futures = executor.submit_many(_specs(["short", "short", "short", "short", "long", "long"], problems))
    for f in futures:
        assert f.result(timeout=30).result.status.value == "ok"
    executor.close()
    first_two = sorted(log, key=lambda r: r[2])[:2]
    assert [r[1] for r in first_two] == ["long", "long"], log
    assert {r[0] for r in first_two} == {0, 1}, log  # on different GPUs
    makespan = max(r[3] for r in log) - min(r[2] for r in log)
    assert makespan < 0.6 + 2 * 0.1 + 0.25, makespan  # long ones in parallel, then the short ones shared


def test_a_batch_with_the_same_solution_twice_gets_both_results(monkeypatch, tmp_path):
    """One file, one build key: both tasks of it must finish (a dict keyed by the file lost one)."""
    monkeypatch.setenv("KBENCH_TEST_CACHE", str(tmp_path))
    log: list = []
    executor, problems = _fake_lanes(monkeypatch, 1, {"p": 0.01}, {"p": 1}, log)
    (spec, _), = _specs(["p"], problems)
    futures = executor.submit_many([(spec, None), (spec, None)])
    assert [f.result(timeout=30).result.status.value for f in futures] == ["ok", "ok"]
    executor.close()


def test_judges_start_with_kbench_one_per_gpu_and_end_if_torch_disagrees(monkeypatch, tmp_path):
    """The first task's judge starts before kbench imports torch (NVML names the GPU), is
    told it is next, and goes to its GPU's lane; if torch then names another capability
    (the arch list a judge builds for must be the device's), they are all ended."""
    from harness.run import executors, gpus, launch
    from harness.run.early_judges import EarlyJudges
    from harness.records import Options

    started, prepared, ended = [], [], []

    class FakeJudge:
        def discard(self):
            ended.append(self)

    monkeypatch.setattr(gpus, "capability", lambda index: ("NVIDIA H100 80GB HBM3", "9.0"))
    monkeypatch.setattr(launch, "start_worker", lambda cfg: started.append(cfg) or FakeJudge())
    monkeypatch.setattr(launch, "prepare", lambda child: prepared.append(child))
    monkeypatch.setattr(executors.os, "cpu_count", lambda: 16)
    options = Options()
    early = EarlyJudges.start(options, (0, 1), tmp_path / "builds")
    assert [c.gpu_index for c in started] == [0, 1] and all(c.arch == "9.0" for c in started)
    assert len(prepared) == 2
    early.keep_if("9.0")
    ready = early.take(1)
    assert ready == [(options, prepared[1])] and early.take(1) == []
    early.keep_if("8.0")  # torch disagrees: the one left is ended
    assert ended == [prepared[0]] and early.take(0) == []
    assert EarlyJudges.start(Options(device="cpu"), (), tmp_path).judges == {}
    monkeypatch.setattr(gpus, "capability", lambda index: None)  # no NVML: nothing started
    assert EarlyJudges.start(options, (), tmp_path).judges == {}


def test_a_task_that_took_long_last_time_starts_first_whatever_its_bytes(monkeypatch, tmp_path):
    """A hang (seconds on a small problem) ran last time: this time it starts first, on
    one GPU while the other takes the rest, instead of starting last and holding the run."""
    from harness.run import task_seconds
    from harness.records import Status, TaskResult

    monkeypatch.setenv("KBENCH_TEST_CACHE", str(tmp_path))
    names = ["big"] * 5 + ["hang"]
    results = [TaskResult(n, "set", f"/s/{n}_{i}.py", Status.OK, "", fingerprint=f"fp-{n}-{i}",
                          phase_seconds={"check": 1.0 if n == "hang" else 0.2}) for i, n in enumerate(names)]
    task_seconds.save(tmp_path, results)
    log: list = []
    executor, problems = _fake_lanes(monkeypatch, 2, {"big": 0.2, "hang": 1.0}, {"big": 10**9, "hang": 10}, log,
                                     durations=task_seconds.load(tmp_path))
    for f in executor.submit_many(_specs(names, problems)):
        f.result(timeout=30)
    executor.close()
    assert "hang" in [r[1] for r in sorted(log, key=lambda r: r[2])[:2]], log  # one of the two GPUs' first
    makespan = max(r[3] for r in log) - min(r[2] for r in log)
    assert makespan < 1.0 + 0.3, makespan  # the five big ones ran beside it on the other GPU (last: 1.4 s)


def test_a_new_candidate_of_a_problem_that_took_long_starts_first(monkeypatch, tmp_path):
    """New candidates (fingerprints never seen, as in an RL batch) of a problem whose tasks
    took long last time (2 s) start before those of a problem with more bytes (1.2 s by
    bytes): the problem's own seconds (under the same options) beat the bytes estimate."""
    from harness.run import task_seconds
    from harness.records import Options, Status, TaskResult

    monkeypatch.setenv("KBENCH_TEST_CACHE", str(tmp_path))
    earlier = [TaskResult("slow", "set", "/s/old.py", Status.OK, "", fingerprint="fp-old",
                          problem_sha256=_sha("# problem slow\n"), phase_seconds={"timing": 2.0})]
    task_seconds.save(tmp_path, earlier, Options())
    log: list = []
    executor, problems = _fake_lanes(monkeypatch, 2, {"big": 0.2, "slow": 0.8}, {"big": 10**9, "slow": 10}, log,
                                     durations=task_seconds.load(tmp_path))
    for f in executor.submit_many(_specs(["big"] * 4 + ["slow"], problems)):
        f.result(timeout=30)
    executor.close()
    assert "slow" in [r[1] for r in sorted(log, key=lambda r: r[2])[:2]], log  # one of the two GPUs' first
    makespan = max(r[3] for r in log) - min(r[2] for r in log)
    assert makespan < 0.8 + 0.3, makespan  # the four big ones beside it on the other GPU (slow last: 1.2 s)


def _sha(text: str) -> str:
    import hashlib

    return hashlib.sha256(text.encode()).hexdigest()


def test_expected_seconds_learn_a_problems_time_within_the_run():
    from harness.run.task_seconds import Expected, problem_key
    from harness.records import Options, Source, Status, TaskResult, TaskSpec

    spec = TaskSpec("p", "s", Source("/p.py", "# p\n"), Source("/s.py", "# s\n"), Options(), fingerprint="fp-1")
    other = TaskSpec("p", "s", Source("/p.py", "# p\n"), Source("/t.py", "# t\n"), Options(), fingerprint="fp-2")
    expected = Expected({"fp-1": 7.0, problem_key(spec.problem_source.sha256, Options()): 3.0})
    assert expected.seconds(spec, 1.0) == 7.0  # its own time first
    assert expected.seconds(other, 1.0) == 3.0  # else its problem's
    fresh = TaskSpec("q", "s", Source("/q.py", "# q\n"), Source("/u.py", "# u\n"), Options())
    assert expected.seconds(fresh, 1.5) == 1.5  # else the bytes estimate
    expected.learn(fresh, TaskResult("q", "s", "/u.py", Status.OK, "", phase_seconds={"check": 2.0, "timing": 4.0}))
    assert expected.seconds(replace_source(fresh), 1.5) == 6.0  # the problem's first task, this run
    expected.learn(fresh, TaskResult("q", "s", "/u.py", Status.BUILD_ERROR, ""))  # never judged: no GPU time
    assert expected.seconds(replace_source(fresh), 1.5) == 6.0
    longer = Options(trials=9)  # other options: another problem entry
    assert expected.seconds(TaskSpec("q", "s", fresh.problem_source, fresh.solution_source, longer), 1.5) == 1.5


def replace_source(spec):
    from dataclasses import replace

    from harness.records import Source

    return replace(spec, solution_source=Source("/v.py", "# another candidate\n"))


def test_four_gpus_finish_together_longest_first(monkeypatch, tmp_path):
    """Four lanes, tasks of known times (1 x 0.8 s, 2 x 0.4 s, 4 x 0.3 s, 8 x 0.1 s: 3.6 s
    of work, 0.9 s a lane): submitted shortest first, they start longest first and the
    lanes end within about one short task of each other; no lane idles while one has
    queued work (each free lane pulls the next)."""
    from harness.run import task_seconds
    from harness.records import Status, TaskResult

    monkeypatch.setenv("KBENCH_TEST_CACHE", str(tmp_path))
    names = ["t01"] * 8 + ["t03"] * 4 + ["t04"] * 2 + ["t08"]
    seconds = {"t01": 0.1, "t03": 0.3, "t04": 0.4, "t08": 0.8}
    results = [TaskResult(n, "set", f"/s/{n}_{i}.py", Status.OK, "", fingerprint=f"fp-{n}-{i}",
                          phase_seconds={"timing": seconds[n]}) for i, n in enumerate(names)]
    task_seconds.save(tmp_path, results)
    log: list = []
    executor, problems = _fake_lanes(monkeypatch, 4, seconds, {n: 1 for n in seconds}, log,
                                     durations=task_seconds.load(tmp_path))
    for f in executor.submit_many(_specs(names, problems)):
        f.result(timeout=30)
    executor.close()
    starts = [r[1] for r in sorted(log, key=lambda r: r[2])]
    assert sorted(starts[:4]) == ["t03", "t04", "t04", "t08"], starts  # the four longest, one per GPU
    assert starts[-8:] == ["t01"] * 8, starts
    ends = {}
    for gpu, _, _, end in log:
        ends[gpu] = max(ends.get(gpu, 0.0), end)
    t0 = min(r[2] for r in log)
    assert max(ends.values()) - t0 < 0.9 + 0.1 + 0.3, ends  # the ideal, one short task, slack for a busy host
    assert max(ends.values()) - min(ends.values()) < 0.1 + 0.25, ends


def test_each_lane_starts_its_share_of_judges_ahead(monkeypatch, tmp_path):
    """Four GPUs, 6 tasks left: each lane keeps 3 judges ahead (its share, 2, and one
    more for a lane that runs faster than the others), not 4 (all four lanes asking for
    every waiting task started 4x the judges, whose imports slowed the next); never
    more than the tasks left."""
    from harness.run import executors, work

    monkeypatch.setattr(executors.os, "cpu_count", lambda: 64)
    hosts = [work.Host(tmp_path, "cuda", "fake GPU", "9.0", None, g, 4) for g in range(4)]
    executor = executors.LocalExecutor(hosts, prestart=executors.prestart_depth("cuda"))
    try:
        assert executor.depth == 4
        assert [executor._share(n) for n in (0, 1, 2, 4, 6, 40)] == [0, 1, 2, 2, 3, 11]
    finally:
        executor.close()


def test_early_judges_top_up_every_gpu_to_its_share(monkeypatch, tmp_path):
    """At start one judge per GPU (told it is next); once 6 tasks are known, each of 4 GPUs
    gets 2, only the first prepared; a lane takes all of its GPU's."""
    from harness.run import executors, gpus, launch
    from harness.run.early_judges import EarlyJudges
    from harness.records import Options

    started, prepared = [], []

    class FakeJudge:
        def __init__(self, cfg):
            self.gpu = cfg.gpu_index

        def discard(self):
            pass

    monkeypatch.setattr(gpus, "capability", lambda index: ("NVIDIA H100 80GB HBM3", "9.0"))
    monkeypatch.setattr(launch, "start_worker", lambda cfg: started.append(cfg) or FakeJudge(cfg))
    monkeypatch.setattr(launch, "prepare", lambda child: prepared.append(child))
    monkeypatch.setattr(executors.os, "cpu_count", lambda: 64)
    early = EarlyJudges.start(Options(), (0, 1, 2, 3), tmp_path / "builds")
    early.top_up(6)
    assert {g: len(c) for g, c in early.judges.items()} == {0: 2, 1: 2, 2: 2, 3: 2}
    assert len(prepared) == 4 and len(started) == 8
    early.top_up(100)  # no more than a lane keeps ahead
    assert all(len(c) == 4 for c in early.judges.values())
    taken = early.take(2)
    assert len(taken) == 4 and all(j.gpu == 2 for _, j in taken) and taken[0][1] in prepared
