"""End to end on the CPU: the same pipeline a GPU run uses, over hostile fixtures.

Each fixture solution declares the verdict it must get (tests/expect.py).
"""
import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import HANG_LIMITS, ROOT
from expect import mismatches
from harness.records import SCHEMA_VERSION
from harness.report.write import load_run
from harness.report.store import STORE_NAME

FIXTURES = ROOT / "tests" / "fixtures" / "cpu"
PROBLEMS, SOLUTIONS = FIXTURES / "problems", FIXTURES / "solutions"


@pytest.fixture(scope="module")
def full_run(run_cli, tmp_path_factory):
    out = tmp_path_factory.mktemp("run") / "r"
    tmp = tmp_path_factory.mktemp("tmpdir")  # kbench's and its children's temporary folders
    # The form the README promises, untimed: these tests are about verdicts, messages and files
    # (timing on the CPU clock is tested by the adversarial set, beside controls), and a timing
    # flag that a loaded machine raises on an ok task would change the gate's count.
    proc = run_cli("run", "--problems", str(PROBLEMS), "--solutions", str(SOLUTIONS), "--out", str(out),
                   "--device", "cpu", "--timeout", "60", "--no-timing",
                   env={**HANG_LIMITS, "TMPDIR": str(tmp)})  # hang.py: 10 s, not 30
    return proc, out, tmp


def test_every_fixture_gets_its_verdict(full_run):
    proc, out, _ = full_run
    results = json.loads((out / "results.json").read_text())["results"]
    assert len(results) == 17, proc.stderr[-3000:]
    assert mismatches(results) == []


def test_writes_three_files_and_a_log_per_task(full_run):
    proc, out, _ = full_run
    data = json.loads((out / "results.json").read_text())
    assert data["schema_version"] == SCHEMA_VERSION
    assert data["run"]["device"] == "cpu" and data["run"]["finished"]
    for r in data["results"]:
        assert {"problem", "solution_set", "solution_path", "status", "message", "flags", "ref_ms", "sol_ms",
                "speedup"} <= r.keys()
        assert Path(r["log_path"]).is_file()
    csv = (out / "results.csv").read_text().splitlines()
    assert csv[0].startswith("problem,solution_set,solution_path,status") and len(csv) == 18
    md = (out / "report.md").read_text()
    assert "## Summary" in md and "fast_1" in md and "## Failures and flags" in md


def test_build_error_message_is_the_compilers_line_and_log_keeps_the_rest(full_run):
    _, out, _ = full_run
    r = next(r for r in json.loads((out / "results.json").read_text())["results"]
             if r["solution_path"].endswith("cpp_build_error.py"))
    assert "main.cpp:" in r["message"] and "error:" in r["message"]
    log = Path(r["log_path"]).read_text()
    assert "Error building extension" in log and "ninja" in log


def test_verbose_build_error_carries_the_compilers_line_and_a_removed_api_hint(full_run):
    """verbose=True makes torch print the compiler's output instead of raising it:
    the message must still be the compiler's line, not "Error building extension"."""
    _, out, _ = full_run
    r = next(r for r in json.loads((out / "results.json").read_text())["results"]
             if r["solution_path"].endswith("verbose_build_error.py"))
    assert r["status"] == "build_error"
    assert r["message"].startswith("main.cpp:") and "error: cannot convert" in r["message"], r["message"]
    assert "DeprecatedTypeProperties" in r["message"] and "Error building extension" not in r["message"]
    assert "hint: the solution uses a torch C++ API removed from this torch version" in r["message"]
    assert "error: cannot convert" in Path(r["log_path"]).read_text()  # the full output stays in the log


def test_model_style_failures_carry_the_tools_own_line(full_run):
    """The `styles` set: an nvcc flag given to g++ (verbose=True), a library ld cannot
    find (torch's load() on a file, verbose=True), a Triton kernel that does not compile."""
    _, out, _ = full_run
    by_name = {Path(r["solution_path"]).name: r for r in json.loads((out / "results.json").read_text())["results"]
               if r["solution_set"] == "styles"}
    flag = by_name["nvcc_flag_to_gxx.py"]["message"]
    assert flag.startswith("c++: error: unrecognized command-line option") and "--use_fast_math" in flag.split("|")[0]
    assert "it goes in extra_cuda_cflags" in flag
    ld = by_name["ld_missing_library.py"]["message"]
    assert ld == "/usr/bin/ld: cannot find -lkbench_no_such_lib: No such file or directory"
    triton = by_name["triton_compile_error.py"]
    assert triton["status"] == "build_error" and "Triton compile error at 6:8: `y = tl.relu(x)`" in triton["message"]
    for r in by_name.values():
        assert "Error building extension" not in r["message"] and "collect2" not in r["message"]


def test_gate_fails_the_run_and_table_printed(full_run):
    proc, _, _ = full_run
    assert proc.returncode == 1
    assert "level1/2_Hinge" in proc.stdout and "verdict" in proc.stdout  # the final table is data: stdout
    assert "gate: 13 of 17 tasks failed" in proc.stderr


def test_leaves_no_temporary_folder(full_run):
    """Judges are ended by kbench once their verdict is read, or killed (hang.py, the crashes):
    none of them cleans up, and their candidates' scratch folders must still not stay behind."""
    _, _, tmp = full_run
    # torchinductor_<user> is torch's own cache, kept between runs by design
    assert sorted(p.name for p in tmp.iterdir() if not p.name.startswith("torchinductor_")) == []


def test_unmatched_solution_file_is_reported(full_run):
    proc, out, _ = full_run
    run = json.loads((out / "results.json").read_text())["run"]
    assert any("7_NoSuchProblem.py" in u for u in run["unmatched"])
    assert "unmatched" in proc.stderr


def test_exit_zero_filters_and_resume(run_cli, tmp_path):
    """-p and -s select the tasks, --exit-zero makes a failing gate exit 0, and --resume of
    the same command reuses every finished task (one run and its resume, not two runs)."""
    args = ["run", "--problems", str(PROBLEMS), "--solutions", str(SOLUTIONS), "--device", "cpu", "-p", "Hinge",
            "-s", "basic", "--exit-zero", "--time-budget", "1"]
    first = run_cli(*args, "--out", str(tmp_path / "r"))
    assert first.returncode == 0, first.stderr
    before = json.loads((tmp_path / "r" / "results.json").read_text())["results"]
    assert {r["problem"] for r in before} == {"level1/2_Hinge"} and {r["solution_set"] for r in before} == {"basic"}
    assert len(before) == 3 and any(r["status"] != "ok" for r in before)  # the gate failed, and exit 0 anyway
    again = run_cli(*args, "--resume", str(tmp_path / "r"))
    assert again.returncode == 0, again.stderr
    assert "3 reused from the earlier run, 0 to run" in again.stderr
    after = json.loads((tmp_path / "r" / "results.json").read_text())["results"]
    assert [r["speedup"] for r in after] == [r["speedup"] for r in before]


def usage_error(*args: str) -> str:
    """The CLI in this process (no kbench to start: these stop before any task): exit 2 and
    the one line on stderr."""
    from click.testing import CliRunner

    import cli

    res = CliRunner().invoke(cli.main, ["run", *args])
    assert res.exit_code == 2, res.output
    assert "Traceback" not in res.output and res.stderr.count("\n") == 1, res.stderr
    return res.stderr


def test_no_gpu_says_so_in_one_line():
    """Folders given and no GPU: a CUDA run cannot happen, and the line says what can.
    (With no folders given, `kbench run` runs the CPU demo set: tests/cli/test_demo.py.)"""
    pytest.importorskip("torch")
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    line = usage_error("--problems", str(PROBLEMS), "--solutions", str(SOLUTIONS))
    assert "no CUDA GPU" in line and "--device cpu" in line


def test_graph_timing_on_cpu_is_refused_in_one_line():
    line = usage_error("--device", "cpu", "--problems", str(PROBLEMS), "--solutions", str(SOLUTIONS),
                       "--timing-mode", "graph")
    assert "--timing-mode graph needs --device cuda" in line


def test_typo_in_folder_name():
    line = usage_error("--device", "cpu", "--problems", str(FIXTURES / "problemz"), "--solutions", str(SOLUTIONS))
    assert "did you mean" in line


def test_empty_solutions_folder(tmp_path):
    assert "no solutions to run" in usage_error("--device", "cpu", "--problems", str(PROBLEMS), "--solutions",
                                                str(tmp_path))


def test_problem_with_syntax_error_is_the_problems_error(run_cli, tmp_path):
    (tmp_path / "p" / "level1").mkdir(parents=True)
    (tmp_path / "p" / "level1" / "1_Broken.py").write_text("def get_inputs(:\n")
    sol = tmp_path / "s" / "mine" / "level1"
    sol.mkdir(parents=True)
    (sol / "1_Broken.py").write_text("import torch\nclass ModelNew(torch.nn.Module):\n    pass\n")
    proc = run_cli("run", "--device", "cpu", "--problems", str(tmp_path / "p"), "--solutions", str(tmp_path / "s"),
                   "--out", str(tmp_path / "r"))
    assert proc.returncode == 1
    r = json.loads((tmp_path / "r" / "results.json").read_text())["results"][0]
    assert r["status"] == "problem_error" and "1_Broken.py, line 1: " in r["message"] and "SyntaxError" in r["message"]


def test_ctrl_c_ends_the_process_even_if_the_orderly_stop_hangs(monkeypatch):
    """The SIGINT handler raises KeyboardInterrupt and arms a deadline: if cleanup
    then hangs (a lock left held by the interrupt), the process still exits 130."""
    import threading

    import cli
    import harness.shared.isolate

    exited = threading.Event()
    codes = []
    monkeypatch.setattr(cli, "INTERRUPT_GRACE_S", 0.05)
    monkeypatch.setattr(cli.os, "_exit", lambda code: (codes.append(code), exited.set()))
    monkeypatch.setattr(harness.shared.isolate, "kill_all", lambda: None)
    said = io.StringIO()
    monkeypatch.setattr(cli.sys, "stderr", said)
    reporter = cli.console.RichReporter(cli.GatePolicy())
    reporter.run_folder(Path("results/20261126-140000-2"))
    from harness.shared import scratch_root

    scratch = Path(scratch_root.for_children())  # the judges' scratch folders' parent: atexit does not run
    previous = {stop: signal.getsignal(stop) for stop in cli.STOP_SIGNALS}
    try:
        with pytest.raises(KeyboardInterrupt):
            cli._interrupt_with_deadline(reporter, signal.SIGINT, None)
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # a second Ctrl-C is plain
        assert exited.wait(5) and codes == [130]  # the "hung" cleanup never returned; the deadline ended it
        assert "continue with --resume results/20261126-140000-2" in said.getvalue()  # the run's own folder
        assert not scratch.exists()
    finally:
        for stop, handler in previous.items():
            signal.signal(stop, handler)


@pytest.mark.parametrize("stop, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_ctrl_c_keeps_finished_tasks(kbench_cache, tmp_path, stop, code):
    """Ctrl-C, or the SIGTERM that `timeout` and CI runners send: the finished tasks are in
    results.json (a SIGTERM ended kbench at once, leaving results.json as the run's start
    wrote it: no results, though 7 of 20 tasks had finished, H200 2026-11-28)."""
    out = tmp_path / "r"
    env = dict(os.environ, KBENCH_CACHE=str(kbench_cache), PYTHONUNBUFFERED="1")
    # The AddReLU set holds a task that hangs: interrupt while it runs.
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "cli.py"), "run", "--problems", str(PROBLEMS), "--solutions", str(SOLUTIONS),
         "--out", str(out), "--device", "cpu", "-p", "AddReLU", "--timeout", "120", "--time-budget", "1"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    deadline = time.monotonic() + 300
    done = []
    while time.monotonic() < deadline:
        if (out / STORE_NAME).is_file():  # each task is appended there as it finishes
            done = load_run(out, lambda warning: None).results
            if any(Path(r.solution_path).name == "exit_at_import.py" for r in done):
                break  # the next task in order is the hang
        time.sleep(0.5)
    assert done, "no task finished in time"
    time.sleep(2)
    proc.send_signal(stop)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == code, err
    assert f"finished tasks are saved in {out}: continue with --resume {out}" in err  # the path, not RUN_DIR
    kept = json.loads((out / "results.json").read_text())  # written on the way out
    assert len(kept["results"]) >= len(done) and kept["run"]["finished"] is None


def test_a_tasks_seconds_outside_the_judges_phases_are_accounted(full_run):
    """Per-task overhead includes the worker's seconds outside every phase of the
    judge; results name them (close, teardown, judge_wait, handoff) so a user can
    see where a slow task's overhead went, and together with the phases they make
    up the worker's wall time. On the CPU no judge is started ahead: each task's judge
    is forked from the run's template as the task needs it (the first waits for the
    template's imports before its spec leaves), so its spec hardly waits (judge_wait;
    an exec'd judge's import of torch took ~1.9 s of it on the 2-core CI box)."""
    _, out, _ = full_run
    judged = [r for r in json.loads((out / "results.json").read_text())["results"] if r["phase"] != "build"]
    assert judged
    for r in judged:
        phases = r["phase_seconds"]
        assert {"close", "teardown", "judge_wait", "handoff"} <= phases.keys() and min(phases.values()) >= 0
        assert phases["judge_wait"] < 1.0, r["solution_path"]
        spent = r["spent_seconds"]
        not_overhead = spent.get("inputs", 0.0) + spent.get("timing", 0.0)
        # Phases are rounded to milliseconds each: a few of them may add up a little over.
        assert abs(sum(phases.values()) - (r["overhead_seconds"] + not_overhead)) < 0.05, r["solution_path"]


def test_handoff_is_split_into_the_wait_for_the_judge_and_the_rest():
    """launch._with_handoff: of the worker's seconds outside the judge's phases, those from
    the spec's sending to the judge reading it (one clock, CLOCK_MONOTONIC) are judge_wait."""
    from harness.run.launch import _with_handoff

    data = {"phase_seconds": {"check": 1.0}, "worker_seconds": 1.2, "close_seconds": 0.1, "spec_read_at": 100.5}
    phases = _with_handoff(data, worker_seconds=2.0, after_result_s=0.2, sent_at=100.0)
    assert phases == {"check": 1.0, "close": 0.1, "teardown": 0.2, "judge_wait": 0.5, "handoff": 0.0}
    # never more than the seconds outside the phases, and none without the judge's reading
    assert _with_handoff(data, 2.0, 0.2, sent_at=90.0)["judge_wait"] == 0.5
    assert _with_handoff({**data, "spec_read_at": None}, 2.0, 0.2, sent_at=100.0)["handoff"] == 0.5
