"""--resume keeps every earlier result and says what it reruns and why; a run folder
is locked while a run uses it."""
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from conftest import ROOT

FIXTURES = ROOT / "tests" / "fixtures" / "cpu"
PROBLEMS, SOLUTIONS = FIXTURES / "problems", FIXTURES / "solutions"


def _copy(src: Path, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(src, dst)


def _results(out: Path) -> list[dict]:
    return json.loads((out / "results.json").read_text())["results"]


def test_resume_keeps_earlier_results_and_says_why_it_reruns(run_cli, tmp_path):
    problems, solutions, out = tmp_path / "problems", tmp_path / "solutions", tmp_path / "r"
    for name in ("1_AddReLU.py", "2_Hinge.py"):
        _copy(PROBLEMS / "level1" / name, problems / "level1" / name)
    for rel in ("1_AddReLU/missing_relu.py", "2_Hinge/torch_ok.py", "2_Hinge/wrong_shape.py"):
        _copy(SOLUTIONS / "basic" / "level1" / rel, solutions / "basic" / "level1" / rel)
    args = ["run", "--problems", str(problems), "--solutions", str(solutions), "--device", "cpu", "--exit-zero",
            "--no-timing"]  # what reruns and why; timing adds nothing here
    first = run_cli(*args, "--out", str(out))
    assert first.returncode == 0, first.stderr
    before = _results(out)
    relu = next(r for r in before if r["problem"] == "level1/1_AddReLU")
    assert len(before) == 3

    # A filter and a changed option: the filtered tasks rerun, saying why; the other result stays.
    second = run_cli(*args, "-p", "Hinge", "--trials", "2", "--resume", str(out))
    assert second.returncode == 0, second.stderr
    assert "--resume: 2 tasks rerun: options changed (trials 5 -> 2)" in second.stderr
    after = _results(out)
    assert len(after) == 3
    assert [r["problem"] for r in after] == ["level1/2_Hinge", "level1/2_Hinge", "level1/1_AddReLU"]
    assert after[-1] == relu  # untouched

    # The problem set loses a problem and one solution file changes: one task reruns, for that reason.
    (problems / "level1" / "1_AddReLU.py").unlink()
    wrong = solutions / "basic" / "level1" / "2_Hinge" / "wrong_shape.py"
    wrong.write_text(wrong.read_text() + "\n# edited\n")
    third = run_cli(*args, "--trials", "2", "--resume", str(out))
    assert third.returncode == 0, third.stderr
    assert "1 reused from the earlier run, 1 to run" in third.stderr
    assert "--resume: 1 task reruns: its solution file changed" in third.stderr
    assert "options changed" not in third.stderr
    final = _results(out)
    assert len(final) == 3 and final[-1] == relu
    assert final[0] == after[0]  # torch_ok: reused as it was


def test_second_run_on_a_busy_folder_says_who_holds_it(run_cli, kbench_cache, tmp_path):
    solutions, out = tmp_path / "solutions", tmp_path / "r"
    _copy(SOLUTIONS / "basic" / "level1" / "1_AddReLU" / "hang.py", solutions / "basic" / "level1" / "1_AddReLU" / "hang.py")
    args = ["run", "--problems", str(PROBLEMS), "--solutions", str(solutions), "--device", "cpu", "-p", "AddReLU",
            "--time-budget", "1"]
    env = dict(os.environ, KBENCH_CACHE=str(kbench_cache), PYTHONUNBUFFERED="1")
    first = subprocess.Popen([sys.executable, str(ROOT / "cli.py"), *args, "--out", str(out), "--timeout", "120"],
                             env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while not (out / "results.json").is_file():
            assert first.poll() is None and time.monotonic() < deadline, "the first run never started its task"
            time.sleep(0.2)
        for how in (["--out", str(out)], ["--resume", str(out)]):
            second = run_cli(*args, *how, "--timeout", "5", timeout=120)  # unlocked, it would run the hang
            assert second.returncode == 2, second.stderr
            lines = second.stderr.strip().splitlines()
            assert len(lines) == 1 and f"is in use by pid {first.pid} since " in lines[0], second.stderr
        assert first.poll() is None
    finally:
        if first.poll() is None:
            first.send_signal(signal.SIGINT)
            try:
                first.wait(60)
            except subprocess.TimeoutExpired:
                first.kill()
                first.wait()
    # Once the first run is gone, the folder is free again: no stale lock.
    assert not (out / ".lock").exists()
