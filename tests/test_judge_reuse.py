"""A judge process that serves several solutions of one problem, one after another.

The local executor keeps a judge after its task when another task of the same
problem is still to come (on a GPU host; forced here on the CPU path, where it
is off by default): the judge's process teardown, its CUDA context on a GPU,
then falls once per problem instead of once per task. What must not change:
each task still gets a candidate process of its own, everything the last one
started is dead before the next one runs, each task's log holds its own output
only, and the verdicts are those of a fresh judge."""
import os
import re
import time
from pathlib import Path

from conftest import ROOT

from harness import executors, isolate, work
from harness.records import Options, Source, Status, TaskSpec, TimingConfig

PROBLEM = ROOT / "tests" / "fixtures" / "adversarial" / "problems" / "level1" / "2_Affine.py"
MARKER = "kbench-reuse-test-sleeper"

CORRECT = '''
import os
import torch
import torch.nn as nn

print("IDENT {name}", flush=True)


def _sleeper_alive():
    for pid in os.listdir("/proc"):
        try:
            with open(f"/proc/{{pid}}/cmdline", "rb") as f:
                if b"{marker}" in f.read():
                    return True
        except OSError:
            pass
    return False


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.alive = _sleeper_alive()  # what the task before this one started, were it still running

    def forward(self, x):
        out = x * 1.5 + 0.25
        return out * 0 if self.alive else out
'''

SLEEPER = '''
import subprocess
import sys
import torch
import torch.nn as nn

print("IDENT {name}", flush=True)
subprocess.Popen([sys.executable, "-c", "import time  # {marker}\\ntime.sleep(600)\\n"], start_new_session=True,
                 stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, close_fds=True)


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.zeros_like(x)
'''


def _marker_alive() -> bool:
    for pid in os.listdir("/proc"):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if MARKER.encode() in cmdline and b"time.sleep" in cmdline:
            return True
    return False


def test_a_judge_serves_the_next_solution_of_its_problem_with_a_new_candidate(tmp_path):
    problem = PROBLEM.read_text()
    sources = {"s0": CORRECT, "s1": SLEEPER, "s2": CORRECT, "s3": CORRECT}
    opts = Options(device="cpu", timeout=60, timing=TimingConfig(budget_s=0.2))
    host = work.probe_host(tmp_path / "cache" / "builds", "cpu")
    ex = executors.LocalExecutor([host], reuse=True)
    futures = {}
    try:
        for name, text in sources.items():
            spec = TaskSpec("level1/2_Affine", name, Source(str(PROBLEM), problem),
                            Source(f"{name}/level1/2_Affine.py", text.format(name=name, marker=MARKER)), opts)
            futures[name] = ex.submit(spec, tmp_path / "logs" / f"{name}.log")
        results = {name: f.result(timeout=300).result for name, f in futures.items()}
    finally:
        ex.close()
    logs = {name: Path(r.log_path).read_text() for name, r in results.items()}
    detail = {n: (r.status.value, r.message[:200]) for n, r in results.items()}

    # The verdicts of fresh judges: the one that leaves a process behind returns zeros.
    assert results["s1"].status is Status.INCORRECT, detail
    for name in ("s0", "s2", "s3"):
        # ok also says the sleeper s1 started was gone when this solution looked for it
        assert results[name].status is Status.OK, (name, detail, logs[name][-2000:])
    # One judge served them in a row (the order is the lane's; the count is not).
    served = [re.findall(r"judge process (\d+), task (\d+) it serves", log) for log in logs.values()]
    pids = {p for s in served for p, _ in s}
    assert sum(len(s) for s in served) == 3 and len(pids) == 1, served
    # Each log holds its own task's output, never another's.
    for name, log in logs.items():
        assert f"IDENT {name}\n" in log, (name, log[-2000:])
        assert not [other for other in sources if other != name and f"IDENT {other}\n" in log], (name, log[-2000:])
        assert "end of task" not in log  # the judge's marker is cut out
    time.sleep(0.5)
    assert not _marker_alive(), "a process the solution started outlived its task"
    assert not [p for p in isolate._live if p.poll() is None], "a judge outlived the executor"


def test_the_log_is_cut_where_the_marker_is_even_across_reads():
    r, w = os.pipe()
    log = isolate._CappedLog(os.fdopen(r, "rb"))
    marker = "\n[kbench: end of task abc123]\n"
    with log._cv:
        log.marker = marker.encode()
    os.write(w, b"first task's line\n" + marker.encode()[:10])
    time.sleep(0.2)  # the drain reads the first half alone
    os.write(w, marker.encode()[10:] + b"second task's line\n")
    out = Path(os.environ.get("TMPDIR", "/tmp")) / f"cut-{os.getpid()}.log"
    out.unlink(missing_ok=True)
    assert log.cut(out, timeout=5) == 0
    assert out.read_text() == "first task's line\n"
    os.close(w)
    rest = out.with_suffix(".rest")
    rest.unlink(missing_ok=True)
    log.close(rest)
    assert rest.read_text() == "second task's line\n"
    out.unlink()
    rest.unlink()


def test_a_forged_marker_does_not_end_the_task_log():
    """The marker is a nonce kbench sends the judge only; a candidate printing the
    text of an old one (or any) does not split the log."""
    r, w = os.pipe()
    log = isolate._CappedLog(os.fdopen(r, "rb"))
    with log._cv:
        log.marker = b"\n[kbench: end of task real]\n"
    os.write(w, b"\n[kbench: end of task forged]\nmore\n\n[kbench: end of task real]\n")
    out = Path(os.environ.get("TMPDIR", "/tmp")) / f"forged-{os.getpid()}.log"
    out.unlink(missing_ok=True)
    log.cut(out, timeout=5)
    assert out.read_text() == "\n[kbench: end of task forged]\nmore\n"
    os.close(w)
    log.close(None)
    out.unlink()
