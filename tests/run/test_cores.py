"""Cores that builds and other tasks cannot take from a GPU lane (harness/run/cores.py).

The split is a pure function of the CPUs kbench may use, the lanes and the SMT siblings;
the rest checks that the processes kbench starts get it: a build process and its
compilers born on the rest (the build pool's threads are pinned there), a judge started
ahead born on the rest too, and a judge with its candidate moved onto its lane's CPUs as
its task starts. On a CPU box, where the run itself reserves nothing (one lane, after
its builds), the executor is given a split by hand."""
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from conftest import ROOT

CPUS = sorted(os.sched_getaffinity(0))
two_cpus = pytest.mark.skipif(len(CPUS) < 2, reason="needs 2 CPUs to tell a lane's from the rest")


# -- the split ------------------------------------------------------------------------

def test_each_lane_gets_two_cores_from_the_top_and_the_rest_the_others():
    from harness.run.cores import split

    s = split(range(16), 4)
    assert s.reserved and s.lanes == ((8, 9), (10, 11), (12, 13), (14, 15))
    assert s.rest == tuple(range(8))
    assert s.lane(3) == (14, 15) and s.spare() == s.rest
    every = [c for lane in s.lanes for c in lane] + list(s.rest)
    assert sorted(every) == list(range(16))  # disjoint, and nothing lost


def test_a_lane_takes_whole_cores_with_their_smt_siblings():
    """CPU n and n+8 share a core: a lane's two cores are four CPUs, and no build runs on a
    sibling of a lane's CPU (it would share the core's pipeline with the timed work)."""
    from harness.run.cores import split

    siblings = {c: (c % 8, c % 8 + 8) for c in range(16)}
    s = split(range(16), 2, siblings)
    assert s.lanes == ((4, 5, 12, 13), (6, 7, 14, 15))
    assert s.rest == (0, 1, 2, 3, 8, 9, 10, 11)


def test_the_split_works_on_the_cpus_kbench_was_given():
    """A container or taskset may give any CPUs: only those are split; siblings outside
    them are ignored."""
    from harness.run.cores import split

    s = split([3, 5, 7, 9, 11, 13], 1, {3: (3, 4), 13: (13, 12)})
    assert s.lanes == ((11, 13),) and s.rest == (3, 5, 7, 9)


@pytest.mark.parametrize("cpus, lanes", [(2, 1), (5, 2), (9, 4), (1, 1)])
def test_too_few_cores_reserve_nothing_and_say_why(cpus, lanes):
    from harness.run.cores import split

    s = split(range(cpus), lanes)
    assert not s.reserved and s.lane(0) == () and s.spare() == ()
    line = s.describe()
    assert line.startswith("cores: none reserved for timing (") and f"for {lanes} GPU lane" in line, line
    assert "too few for 2 per lane and 2 for builds" in line


def test_just_enough_cores():
    from harness.run.cores import split

    assert split(range(4), 1).lanes == ((2, 3),)
    assert split(range(10), 4).lanes == ((2, 3), (4, 5), (6, 7), (8, 9))


def test_the_run_level_line_names_each_gpus_cpus():
    from harness.run.cores import split

    line = split(range(16), 2).describe([0, 3])
    assert line == ("cores: reserved for timing, GPU 0: CPUs 12-13; GPU 3: CPUs 14-15; builds and judges waiting "
                    "their turn on CPUs 0-11")


def test_reservation_can_be_turned_off():
    from harness.run.cores import for_run

    s = for_run(1, enabled=False)
    assert not s.reserved and s.describe() == "cores: none reserved for timing (--no-reserve-cores)"


def test_cpu_lists_read_and_write_as_sysfs_does():
    from harness.run.cores import cpu_list, parse_cpu_list

    assert parse_cpu_list("0-3,8,10-11\n") == (0, 1, 2, 3, 8, 10, 11)
    assert cpu_list((11, 10, 8, 3, 2, 1, 0)) == "0-3,8,10-11"
    assert cpu_list(()) == ""


# -- applying it ----------------------------------------------------------------------

def _affinity_of_child(**popen) -> set[int]:
    out = subprocess.run([sys.executable, "-c", "import os; print(sorted(os.sched_getaffinity(0)))"],
                         capture_output=True, text=True, check=True, **popen).stdout
    return set(eval(out))


@two_cpus
def test_a_process_started_inside_spawning_on_is_born_there():
    from harness.run.cores import spawning_on

    before = os.sched_getaffinity(0)
    with spawning_on({CPUS[0]}):
        assert _affinity_of_child() == {CPUS[0]}
    assert os.sched_getaffinity(0) == before  # the thread has its mask back
    with spawning_on(()):  # nothing reserved: nothing changes
        assert _affinity_of_child() == before


@two_cpus
def test_pin_tree_moves_every_thread_and_child():
    """A judge with threads and a candidate (here: a child) that has threads of its own."""
    from harness.run.cores import pin_tree

    code = ("import subprocess, sys, threading, time\n"
            "[threading.Thread(target=time.sleep, args=(30,), daemon=True).start() for _ in range(3)]\n"
            "subprocess.Popen([sys.executable, '-c', 'import threading, time; "
            "threading.Thread(target=time.sleep, args=(30,)).start(); time.sleep(30)'])\n"
            "time.sleep(30)\n")
    proc = subprocess.Popen([sys.executable, "-c", code], start_new_session=True)
    try:
        time.sleep(1.0)
        assert pin_tree(proc.pid, {CPUS[-1]})
        tids = []
        for pid in [proc.pid] + [int(c) for c in Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()]:
            tids += [int(t) for t in os.listdir(f"/proc/{pid}/task")]
        assert len(tids) >= 4 + 2
        assert all(os.sched_getaffinity(t) == {CPUS[-1]} for t in tids)
    finally:
        os.killpg(proc.pid, 9)
        proc.wait()


# -- the local executor: builds on the rest, a task's judge and candidate on its lane ---

def _by_hand(lane: int, rest: int):
    from harness.run.cores import CoreSplit

    return CoreSplit(lanes=((lane,),), rest=(rest,))


@two_cpus
def test_a_build_started_by_the_executor_runs_on_the_rest(monkeypatch, tmp_path):
    """A fake build stage that starts a process, from the executor's build pool as the real
    one does (and from a thread of its own, as build_all's pool does): both are born on the
    rest, and the pool's MAX_JOBS count (compile_slots) sees the rest's CPUs only."""
    import harness.build as build
    from harness.build import compile_slots
    from harness.run import executors, health, work
    from harness.records import BuildResult, Options, Source, TaskSpec

    monkeypatch.setattr(health, "keep_ready", lambda gpu: None)
    monkeypatch.setattr(health, "discard", lambda gpu: None)
    seen = {}

    def fake_build_all(tasks, cfg, on_done=None, on_found=None, timings=None):
        seen["build"] = _affinity_of_child()
        seen["slots"] = compile_slots()
        inner = threading.Thread(target=lambda: seen.__setitem__("build_thread", _affinity_of_child()))
        inner.start()
        inner.join()
        for task in tasks:
            on_done(task, BuildResult(False, None, "fake: not built", 0.0, False, ""), "")
        if on_found:
            on_found()

    monkeypatch.setattr(build, "build_all", fake_build_all)
    host = work.Host(tmp_path, "cuda", "fake GPU", "9.0", None, None, 4)
    executor = executors.LocalExecutor([host], core_split=_by_hand(CPUS[-1], CPUS[0]))
    try:
        assert executor.jobs == 1  # one CPU in the rest: one build at a time
        spec = TaskSpec("level1/1_P", "s", Source("/p/1_P.py", "# p\n"), Source("/s/a.py", "# a\n"), Options())
        [future] = executor.submit_many([(spec, tmp_path / "a.log")])
        future.result(timeout=60)
    finally:
        executor.close()
    assert seen == {"build": {CPUS[0]}, "slots": 1, "build_thread": {CPUS[0]}}
    assert executor.hosts[0].cpus == (CPUS[-1],) and executor.hosts[0].spare_cpus == (CPUS[0],)


REPORTS = '''"""Says where it runs, at import: in the build process (this file names cpp_extension, so
kbench builds it) and in the candidate, with the candidate's judge."""
import os

import torch
import torch.nn as nn

_judge = os.environ.get("KBENCH_JUDGE_PID")
print("kbench-affinity", "build" if os.environ.get("KBENCH_BUILD_DIR") else "candidate",
      sorted(os.sched_getaffinity(0)), sorted(os.sched_getaffinity(int(_judge))) if _judge else None, flush=True)


class ModelNew(nn.Module):
    def forward(self, x, y):
        return torch.relu(x + y - 1.0)
'''


@two_cpus
def test_a_real_build_and_judge_get_their_cpus(tmp_path):
    """A real task through the local executor (--device cpu, untimed): its build process
    imports the solution on the rest; its judge, started by the lane, and its candidate
    import it on the lane's CPU."""
    from harness.run import executors, work
    from harness.records import Options, Status, TaskSpec

    problem = ROOT / "tests" / "fixtures" / "cpu" / "problems" / "level1" / "1_AddReLU.py"
    solution = tmp_path / "reports.py"
    solution.write_text(REPORTS)
    options = Options(device="cpu", time=False, trials=1, timeout=120)
    spec = TaskSpec("level1/1_AddReLU", "s", work.source_of(problem), work.source_of(solution), options)
    host = work.Host(tmp_path / "cache", "cpu", use_cache=False)
    executor = executors.LocalExecutor([host], core_split=_by_hand(CPUS[-1], CPUS[0]))
    log = tmp_path / "task.log"
    try:
        [future] = executor.submit_many([(spec, log)])
        result = future.result(timeout=300).result
    finally:
        executor.close()
    text = log.read_text()
    assert result.status == Status.OK, (result.message, text[-3000:])
    lines = [line for line in text.splitlines() if line.startswith("kbench-affinity")]
    assert f"kbench-affinity build [{CPUS[0]}] None" in lines, text[-3000:]
    assert f"kbench-affinity candidate [{CPUS[-1]}] [{CPUS[-1]}]" in lines, text[-3000:]


# -- the run-level line -----------------------------------------------------------------

class _Lines:
    def __init__(self):
        self.lines = []

    def devices(self, text):
        self.lines.append(text)


def test_the_run_says_once_which_cores_each_gpu_times_on(monkeypatch):
    """Below the GPUs' line, with the GPUs as nvidia-smi numbers them; nothing on the CPU
    path; under Dask, that none are reserved."""
    from harness.records import Options
    from harness.run import cores, pipeline

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,6")
    monkeypatch.setattr(cores.os, "sched_getaffinity", lambda pid: set(range(16)))
    monkeypatch.setattr(cores, "sibling_map", lambda cpus: {})
    cfg = pipeline.RunConfig(Path("p"), Path("s"), options=Options(device="cuda"), gpus=(0, 1))
    split = pipeline._core_split(cfg, 2)
    said = _Lines()
    pipeline._say_cores(cfg, split, said)
    assert said.lines == ["cores: reserved for timing, GPU 4: CPUs 12-13; GPU 6: CPUs 14-15; builds and judges "
                          "waiting their turn on CPUs 0-11"]
    off = pipeline.RunConfig(Path("p"), Path("s"), options=Options(device="cuda"), gpus=(0,), reserve_cores=False)
    said = _Lines()
    pipeline._say_cores(off, pipeline._core_split(off, 1), said)
    assert said.lines == ["cores: none reserved for timing (--no-reserve-cores)"]
    for other in (pipeline.RunConfig(Path("p"), Path("s"), options=Options(device="cpu")),
                  pipeline.RunConfig(Path("p"), Path("s"), options=Options(device="cuda"), executor="dask")):
        assert not pipeline._core_split(other, 1).reserved
    said = _Lines()
    pipeline._say_cores(pipeline.RunConfig(Path("p"), Path("s"), options=Options(device="cpu")), cores.CoreSplit(), said)
    assert said.lines == []


@two_cpus
def test_judges_started_ahead_wait_on_the_rest_sized_for_their_lane(monkeypatch, tmp_path):
    """A judge is started with the starting thread on the rest (so it is born there), its
    OpenMP pools sized for its lane's CPUs; the early judges of each GPU carry their lane's."""
    from harness.records import Options
    from harness.run import gpus, launch
    from harness.run.cores import CoreSplit
    from harness.run.early_judges import EarlyJudges

    born = []

    class FakeChild:
        def __init__(self, args, env=None, result_pipe=False, **_):
            born.append((os.sched_getaffinity(0), env.get("OMP_NUM_THREADS")))

        def tell(self, line):
            pass

    monkeypatch.setattr(launch, "Child", FakeChild)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    split = CoreSplit(lanes=((CPUS[-1],),), rest=(CPUS[0],))
    before = os.sched_getaffinity(0)
    launch.start_worker(launch.EvalConfig(Options(), cpus=split.lane(0), spare_cpus=split.spare()))
    assert born == [({CPUS[0]}, "1")] and os.sched_getaffinity(0) == before

    monkeypatch.setattr(gpus, "capability", lambda index: ("NVIDIA H100 80GB HBM3", "9.0"))
    started = []
    monkeypatch.setattr(launch, "start_worker", lambda cfg: started.append(cfg) or FakeChild([], {}))
    monkeypatch.setattr(launch, "prepare", lambda child: None)
    wide = CoreSplit(lanes=((12, 13), (14, 15)), rest=tuple(range(12)))
    EarlyJudges.start(Options(), (2, 5), tmp_path / "builds", split=wide)
    assert [(c.gpu_index, c.cpus, c.spare_cpus) for c in started] == [(2, (12, 13), wide.rest), (5, (14, 15), wide.rest)]
