"""Nothing a solution starts or writes outlives its task or leaves its scratch folder
(issue 11, containment). The escape fixtures run in the session's run of the whole CPU
adversarial set (conftest.adversarial_cpu, with its own build cache), which also
watches what happens after kbench has exited:

(a) 3 s later, no process carrying the fixtures' marker is alive (any found are killed);
(b) 5 s later, results.json has the bytes it had when kbench exited;
(c) no kbench-pwned-* file appeared in /tmp, ~, kbench's or torch's folder or the build cache's
    stores (any found are removed);
(d) the build the cache-poisoning fixture attacked still works in a second run;
and every escape fixture gets the verdict it declares."""
import json

import pytest

from conftest import POISON_VICTIM, ROOT
from expect import mismatches

CPU = ROOT / "tests" / "fixtures" / "adversarial" / "cpu"
ESCAPES = [
    "13_forged_verdict/level1/2_Affine/stack_walk_result.py",
    "13_forged_verdict/level1/2_Affine/gc_result_path.py",
    "13_forged_verdict/level1/2_Affine/fd_overwrite.py",
    "13_forged_verdict/level1/2_Affine/result_line_forge.py",
    "14_escape/level1/2_Affine/detached_rewrites_results.py",
    "14_escape/level1/2_Affine/new_session_sleeper.py",
    "14_escape/level1/2_Affine/double_fork_orphan.py",
    "14_escape/level1/2_Affine/stops_judge_template.py",
    "22_cache_poisoning/level1/2_Affine/poison_victim_build.py",
    "23_write_outside/level1/2_Affine/home_and_tmp.py",
    "23_write_outside/level1/2_Affine/from_constructor.py",
]
VICTIM = POISON_VICTIM


@pytest.fixture(scope="module")
def escaped(adversarial_cpu):
    """The session run, its results narrowed to the escape fixtures and their victim."""
    data = json.loads(adversarial_cpu["bytes_at_exit"]) if adversarial_cpu["bytes_at_exit"] else None
    if data is not None:
        wanted = {str(CPU / rel) for rel in ESCAPES + [VICTIM]}
        data["results"] = [r for r in data["results"] if r["solution_path"] in wanted]
    return {**adversarial_cpu, "escapes": data}


def test_escape_fixtures_get_their_verdicts(escaped):
    data = escaped["escapes"]
    assert data is not None, escaped["proc"].stderr[-3000:]
    assert len(data["results"]) == len(ESCAPES) + 1 and data["run"]["finished"]
    assert mismatches(data["results"]) == []


def test_no_process_a_solution_started_survives_the_run(escaped):
    assert escaped["alive_after_3s"] == {}


def test_results_json_unchanged_after_kbench_exits(escaped):
    assert escaped["bytes_at_exit"] is not None, escaped["proc"].stderr[-3000:]
    assert escaped["bytes_after_5s"] == escaped["bytes_at_exit"], "results.json was rewritten after kbench exited"


def test_nothing_written_outside_scratch(escaped):
    assert escaped["pwned"] == []


def test_poisoned_cache_leaves_the_victim_working(escaped):
    """A second run with the same build cache (conftest._victim_rerun, started as the
    session run ended): the victim's cached build still loads and passes."""
    proc, out = escaped["victim_rerun"].result(timeout=900)
    assert (out / "results.json").is_file(), proc.stderr[-3000:]
    (victim,) = json.loads((out / "results.json").read_text())["results"]
    assert victim["status"] == "ok", victim["message"]
