"""Child processes: started ahead of their work, given it later, logged, killed."""
import time

from harness.shared.isolate import Child, run_child
from harness.discover.shapes import bytes_of_files

from conftest import ROOT

WAITS_FOR_A_LINE = ["-c", "import sys, time; time.sleep(0.5); line = sys.stdin.readline().strip(); print('got', line)"]


def test_a_child_started_ahead_gets_its_line_and_its_log(tmp_path):
    child = Child(WAITS_FOR_A_LINE)
    time.sleep(1.0)  # it has finished "importing" and waits
    out = child.finish(tmp_path / "a.log", timeout=30, line="spec.json")
    assert out.returncode == 0 and not out.timed_out
    assert out.seconds < 5  # counted from finish, not from the start
    assert (tmp_path / "a.log").read_text().strip() == "got spec.json"


def test_timeout_counts_from_finish_and_kills(tmp_path):
    child = Child(["-c", "import sys, time; sys.stdin.readline(); time.sleep(60)"])
    time.sleep(1.5)
    out = child.finish(tmp_path / "b.log", timeout=1.0, line="x")
    assert out.timed_out and out.returncode is None and out.seconds < 10


def test_an_unused_child_is_discarded_without_a_log(tmp_path):
    child = Child(WAITS_FOR_A_LINE)
    child.discard()
    assert child.proc.returncode is not None
    assert list(tmp_path.iterdir()) == []


def test_run_child_gives_no_input(tmp_path):
    out = run_child(["-c", "import sys; print(repr(sys.stdin.read()))"], tmp_path / "c.log", timeout=30)
    assert out.returncode == 0 and (tmp_path / "c.log").read_text().strip() == "''"


def test_problem_bytes_come_from_the_meta_device(tmp_path):
    broken = tmp_path / "1_Broken.py"
    broken.write_text("def get_inputs(:\n")
    softmax = str(ROOT / "problems" / "level1" / "23_Softmax.py")
    sizes = bytes_of_files([softmax, str(broken)])
    assert sizes[str(broken)] is None  # no estimate: the task runs and meets its own error
    assert sizes[softmax]["input_bytes"] == sizes[softmax]["output_bytes"] > 4e9  # a softmax's output is its input's size
    assert sizes[softmax]["check_inputs"] >= 1  # its structured check sets, counted once here for every task


def test_workers_started_ahead_only_on_gpu_runs(monkeypatch):
    from harness.run import executors

    monkeypatch.setattr(executors.os, "cpu_count", lambda: 16)
    monkeypatch.delenv("KBENCH_PRESTART", raising=False)
    assert executors.prestart_depth("cpu") == 0  # the host clock times CPU tasks: no imports beside them
    assert executors.prestart_depth("cuda") == 4
    monkeypatch.setattr(executors.os, "cpu_count", lambda: 4)
    assert executors.prestart_depth("cuda") == 1  # one per 4 cores
    monkeypatch.setenv("KBENCH_PRESTART", "0")
    assert executors.prestart_depth("cuda") == 0


def test_lines_told_ahead_arrive_before_the_task_line(tmp_path):
    child = Child(["-c", "import sys\nfor line in sys.stdin: print('got', line.strip())"])
    child.tell("first")
    child.tell("second")
    out = child.finish(tmp_path / "d.log", timeout=30, line="task")
    assert out.returncode == 0
    assert (tmp_path / "d.log").read_text().split("\n")[:3] == ["got first", "got second", "got task"]


def _cpu_task(tmp_path, problem: str, solution: str):
    """A basic CPU fixture task, its options and a host whose cache is under tmp_path
    (not made yet)."""
    from harness.run import work
    from harness.records import Options, TaskSpec, TimingConfig

    fixtures = ROOT / "tests" / "fixtures" / "cpu"
    options = Options(device="cpu", trials=2, timing=TimingConfig(budget_s=0.2))
    spec = TaskSpec(f"level1/{problem}", "basic", work.source_of(fixtures / "problems" / "level1" / f"{problem}.py"),
                    work.source_of(fixtures / "solutions" / "basic" / "level1" / problem / solution), options)
    return spec, options, work.probe_host(tmp_path / "cache", "cpu")


def test_a_judge_told_it_is_next_still_judges_its_task(tmp_path):
    """The executor tells the next judge started ahead to prepare (its GPU context
    and clocks, on CUDA) before its task arrives; the judge reads that line, then
    its task. On the CPU there is nothing to prepare, but the protocol is the same."""
    from harness.run import launch, work
    from harness.records import Status

    spec, options, host = _cpu_task(tmp_path, "2_Hinge", "torch_ok.py")
    built, _ = work.build_one(spec, host)
    child = launch.start_worker(host.eval_config(options))
    launch.prepare(child)
    launch.prepare(child)  # told once only
    result = work.evaluate_built(spec, built, host, tmp_path / "task.log", child)
    assert result.status is Status.OK, result.message
    assert result.speedup is not None
    # Its start in its task's log, in seconds from its process's start, in the order they happened.
    import re

    line = next(x for x in (tmp_path / "task.log").read_text().splitlines() if "this judge's start" in x)
    ages = [float(x) for x in re.findall(r"at (\d+\.\d+) s", line)]
    assert len(ages) == 4 and ages == sorted(ages) and ages[0] > 0, line


def test_a_judge_started_before_the_build_cache_exists_loads_its_build(tmp_path, kbench_cache):
    """A cold run starts its first judges while the first builds start, and a judge's
    candidate starts at once and confines itself to the folders that exist then. On
    the H100 two candidates of a cold run could not take torch's lock beside their
    built extension ("Permission denied: .../ext/relu_small/lock": build_error for
    correct solutions); the judge's start now makes the build folder first."""
    import time

    from harness.run import launch, work
    from harness.shared import sandbox
    from harness.records import Status

    spec, options, host = _cpu_task(tmp_path, "1_AddReLU", "cpp_ok.py")
    assert not (tmp_path / "cache").exists()
    child = launch.start_worker(host.eval_config(options))
    time.sleep(3)  # its candidate has confined itself by now
    if (kbench_cache / "pch").is_dir():  # the session's precompiled header: the build, not the PCH, is under test
        (tmp_path / "cache").mkdir(exist_ok=True)
        (tmp_path / "cache" / "pch").symlink_to(kbench_cache / "pch")
    built, log = work.build_one(spec, host)
    assert built.ok, log[-2000:]
    result = work.evaluate_built(spec, built, host, tmp_path / "task.log", child)
    sandboxed = " (sandboxed)" if sandbox.landlock_abi() else " (no Landlock here: not a test of the confinement)"
    assert result.status is Status.OK, result.message + sandboxed
