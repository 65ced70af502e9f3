"""Nothing a solution starts or writes outlives its task or leaves its scratch folder
(issue 11, containment). The escape fixtures run through the CLI with their own build
cache; then, after kbench has exited:

(a) 3 s later, no process carrying the fixtures' marker is alive (any found are killed);
(b) 5 s later, results.json has the bytes it had when kbench exited;
(c) no kbench-pwned-* file appeared in /tmp or ~ (any found are removed);
(d) the build the cache-poisoning fixture attacked still works in a second run;
and every escape fixture gets the verdict it declares."""
import json
import shutil
import time

import pytest

from conftest import ROOT, kill_pids, marker_pids, pwned_files
from expect import mismatches

CPU = ROOT / "tests" / "fixtures" / "adversarial" / "cpu"
PROBLEMS = ROOT / "tests" / "fixtures" / "adversarial" / "problems"
ESCAPES = [
    "13_forged_verdict/level1/2_Affine/stack_walk_result.py",
    "13_forged_verdict/level1/2_Affine/gc_result_path.py",
    "13_forged_verdict/level1/2_Affine/fd_overwrite.py",
    "14_escape/level1/2_Affine/detached_rewrites_results.py",
    "14_escape/level1/2_Affine/new_session_sleeper.py",
    "14_escape/level1/2_Affine/double_fork_orphan.py",
    "22_cache_poisoning/level1/2_Affine/poison_victim_build.py",
    "23_write_outside/level1/2_Affine/home_and_tmp.py",
]
VICTIM = "00_legit/level1/2_Affine/verbose_zeros_like.py"


def _solutions(root, files):
    """A solutions tree with one set, `escapes`, holding copies of `files`."""
    for rel in files:
        dest = root / "escapes" / "level1" / "2_Affine" / rel.split("/")[-1]
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(CPU / rel, dest)
    return root


def _run(run_cli, solutions, out, cache):
    return run_cli("run", "--problems", str(PROBLEMS), "--solutions", str(solutions), "--out", str(out),
                   "--device", "cpu", "--time-budget", "1", "--timeout", "120", "-p", "2_Affine",
                   env={"KBENCH_CACHE": str(cache)})


@pytest.fixture(scope="module")
def escaped(run_cli, tmp_path_factory):
    """Run the escape fixtures once (the victim beside them) and watch what happens after kbench exits."""
    tmp = tmp_path_factory.mktemp("escapes")
    cache, out = tmp / "cache", tmp / "run"
    solutions = _solutions(tmp / "solutions", ESCAPES + [VICTIM])
    markers_before, pwned_before = marker_pids(), pwned_files()
    seen = {"cache": cache, "tmp": tmp}
    try:
        proc = _run(run_cli, solutions, out, cache)
        exited = time.monotonic()
        seen["proc"] = proc
        results = out / "results.json"
        seen["bytes_at_exit"] = results.read_bytes() if results.is_file() else None
        time.sleep(max(0.0, exited + 3 - time.monotonic()))
        seen["alive_after_3s"] = {pid: _cmdline(pid) for pid in marker_pids() - markers_before}
        time.sleep(max(0.0, exited + 5 - time.monotonic()))
        seen["bytes_after_5s"] = results.read_bytes() if results.is_file() else None
        seen["pwned"] = sorted(str(p) for p in pwned_files() - pwned_before)
    finally:
        kill_pids(marker_pids() - markers_before)
        for path in pwned_files() - pwned_before:
            path.unlink(missing_ok=True)
    return seen


def _cmdline(pid: int) -> str:
    try:
        return open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\0", b" ").decode(errors="replace")[:200]
    except OSError:
        return "(gone)"


def test_escape_fixtures_get_their_verdicts(escaped):
    assert escaped["bytes_at_exit"] is not None, escaped["proc"].stderr[-3000:]
    data = json.loads(escaped["bytes_at_exit"])
    assert len(data["results"]) == len(ESCAPES) + 1 and data["run"]["finished"]
    assert mismatches(data["results"]) == []


def test_no_process_a_solution_started_survives_the_run(escaped):
    assert escaped["alive_after_3s"] == {}


def test_results_json_unchanged_after_kbench_exits(escaped):
    assert escaped["bytes_at_exit"] is not None, escaped["proc"].stderr[-3000:]
    assert escaped["bytes_after_5s"] == escaped["bytes_at_exit"], "results.json was rewritten after kbench exited"


def test_nothing_written_outside_scratch(escaped):
    assert escaped["pwned"] == []


def test_poisoned_cache_leaves_the_victim_working(escaped, run_cli):
    """A second run with the same build cache: the victim's cached build still loads and passes."""
    solutions = _solutions(escaped["tmp"] / "victim_only", [VICTIM])
    out = escaped["tmp"] / "second"
    proc = _run(run_cli, solutions, out, escaped["cache"])
    assert (out / "results.json").is_file(), proc.stderr[-3000:]
    (victim,) = json.loads((out / "results.json").read_text())["results"]
    assert victim["status"] == "ok", victim["message"]
