"""Judges forked from a template (harness/judge/template.py, shared/templates.py): what a
forked judge and its candidate hold, and that a template that fails costs nothing but speed."""
import os
import re
import signal
import time

import pytest

from harness.records import Status
from harness.shared import forked, isolate, sandbox, templates
from harness.run import launch, work

from test_isolate import _cpu_task


@pytest.fixture(autouse=True)
def _fresh_templates(monkeypatch):
    monkeypatch.delenv("KBENCH_FORK_JUDGES", raising=False)
    isolate.end_templates()
    yield
    isolate.end_templates()


def _ready_template(timeout: float = 60.0) -> templates.Template:
    """The one template, once its imports are done."""
    (template,) = templates._templates.values()
    end = time.monotonic() + timeout
    while not template.usable():
        assert not template.failed and time.monotonic() < end, template.failed or "template not ready"
        time.sleep(0.05)
    return template


def _ppid(pid: int) -> int:
    return int(open(f"/proc/{pid}/stat").read().rpartition(")")[2].split()[1])


def _candidate_of(judge: int, timeout: float = 30.0) -> int:
    end = time.monotonic() + timeout
    while not sandbox.children(judge):
        assert time.monotonic() < end, "the judge forked no candidate"
        time.sleep(0.01)
    return sandbox.children(judge)[0]


def _confined(pid: int, timeout: float = 30.0) -> None:
    """Until the candidate has confined itself (no_new_privs, set by the sandbox), which it
    does after closing what it inherited and before it imports any solution."""
    end = time.monotonic() + timeout
    while "NoNewPrivs:\t1" not in open(f"/proc/{pid}/status").read():
        assert time.monotonic() < end, "the candidate did not confine itself"
        time.sleep(0.01)


def test_a_forked_judge_is_kbenchs_child_and_its_candidate_holds_only_its_channel(tmp_path):
    """The first judge is exec'd while the template imports torch; the next is forked,
    is kbench's own child (reparented from the template's intermediate), and its
    candidate holds the log and its channel only: not the judge's stdin (its spec) nor
    its result pipe. It then judges its task as an exec'd judge would, and says how it
    was started."""
    spec, options, host = _cpu_task(tmp_path, "2_Hinge", "torch_ok.py")
    built, _ = work.build_one(spec, host)
    first = launch.start_worker(host.eval_config(options))
    assert not isinstance(first.proc, forked.ForkedProcess)
    _ready_template()
    child = launch.start_worker(host.eval_config(options))
    try:
        assert isinstance(child.proc, forked.ForkedProcess)
        assert _ppid(child.proc.pid) == os.getpid()
        assert os.getpgid(child.proc.pid) == child.proc.pid  # its own group: killed whole
        cand = _candidate_of(child.proc.pid)
        assert os.getpgid(cand) == cand
        _confined(cand)  # what it holds once solution code could run in it
        fds = {int(n): os.readlink(f"/proc/{cand}/fd/{n}") for n in os.listdir(f"/proc/{cand}/fd")}
        assert fds[0] == "/dev/null"
        log_pipe = os.readlink(f"/proc/{child.proc.pid}/fd/1")
        assert fds[1] == fds[2] == log_pipe
        rest = [target for fd, target in fds.items() if fd > 2]
        assert len(rest) == 1 and rest[0].startswith("socket:"), fds
        result = work.evaluate_built(spec, built, host, tmp_path / "task.log", child)
    finally:
        first.discard()
    assert result.status is Status.OK, result.message
    assert result.phase_seconds["judge_wait"] < 1.0
    assert result.sandbox  # the forked candidate confined itself (Landlock on this kernel)
    line = next(x for x in (tmp_path / "task.log").read_text().splitlines() if "this judge's start" in x)
    assert "forked from a template" in line


def test_a_template_that_dies_leaves_judges_to_exec(tmp_path, capfd):
    """A template killed (by a candidate on a kernel that does not scope signals, say)
    is not used again: the next judge is exec'd, its task is judged, and kbench says
    once why judges are exec'd."""
    spec, options, host = _cpu_task(tmp_path, "2_Hinge", "torch_ok.py")
    built, _ = work.build_one(spec, host)
    launch.start_worker(host.eval_config(options)).discard()
    template = _ready_template()
    os.kill(template.proc.pid, signal.SIGKILL)
    template.proc.wait()
    child = launch.start_worker(host.eval_config(options))
    assert not isinstance(child.proc, forked.ForkedProcess)
    result = work.evaluate_built(spec, built, host, tmp_path / "task.log", child)
    assert result.status is Status.OK, result.message
    assert "judges are started by exec from now on" in capfd.readouterr().err


def test_a_stopped_template_costs_one_bounded_wait(tmp_path, monkeypatch):
    """A template that stops answering (SIGSTOP) is given up after ANSWER_S."""
    monkeypatch.setattr(templates, "ANSWER_S", 1.0)
    spec, options, host = _cpu_task(tmp_path, "2_Hinge", "torch_ok.py")
    launch.start_worker(host.eval_config(options)).discard()
    template = _ready_template()
    os.kill(template.proc.pid, signal.SIGSTOP)
    started = time.monotonic()
    child = launch.start_worker(host.eval_config(options))
    assert time.monotonic() - started < 5
    assert not isinstance(child.proc, forked.ForkedProcess) and template.failed
    child.discard()


def test_fork_judges_off(tmp_path, monkeypatch):
    """KBENCH_FORK_JUDGES=0: every judge exec'd, no template started."""
    monkeypatch.setenv("KBENCH_FORK_JUDGES", "0")
    spec, options, host = _cpu_task(tmp_path, "2_Hinge", "torch_ok.py")
    for _ in range(2):
        child = launch.start_worker(host.eval_config(options))
        assert not isinstance(child.proc, forked.ForkedProcess)
        child.discard()
    assert templates._templates == {}


def test_a_judge_of_another_environment_gets_its_own_template(tmp_path):
    """The template's environment is the judge's, less CUDA_VISIBLE_DEVICES: a judge
    started with another (another run's build folder) does not fork from it."""
    spec, options, host = _cpu_task(tmp_path, "2_Hinge", "torch_ok.py")
    launch.start_worker(host.eval_config(options)).discard()
    _, _, other = _cpu_task(tmp_path / "other", "2_Hinge", "torch_ok.py")
    child = launch.start_worker(other.eval_config(options))
    assert not isinstance(child.proc, forked.ForkedProcess)
    child.discard()
    assert len(templates._templates) == 2
    assert all(re.search("KBENCH_WRITABLE", str(k)) for k in templates._templates)


def test_a_judge_needed_now_waits_for_the_template(tmp_path):
    """A judge a task needs at once (none was started ahead: every task of a CPU run)
    waits for the run's template to import torch, and is forked: one import, not two."""
    spec, options, host = _cpu_task(tmp_path, "2_Hinge", "torch_ok.py")
    built, _ = work.build_one(spec, host)
    result = work.evaluate_built(spec, built, host, tmp_path / "task.log")
    assert result.status is Status.OK, result.message
    line = next(x for x in (tmp_path / "task.log").read_text().splitlines() if "this judge's start" in x)
    assert "forked from a template" in line
