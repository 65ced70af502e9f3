"""KBENCH_JUDGE_WALK (judge/walk.py): the stays and returns of a walk through judge/'s modules,
as issue 30 counts them, which bench/judge_walk.py reports for a timed pair."""
import json
import sys

from harness.judge import check, limits, walk


def test_a_walk_counts_a_room_entered_again_as_a_return_and_ignores_code_outside_judge():
    w = walk.Walk()
    with w.recording():
        limits._seconds("KBENCH_NOT_SET_ANYWHERE", 1.0)
        sorted([3, 1, 2])  # not a room: no stay
        check._ratio(1.0, 4.0)
        limits._seconds("KBENCH_NOT_SET_ANYWHERE", 2.0)
    assert [room for room, _ in w.stays] == ["limits", "check", "limits"]
    assert w.returns() == 1


def test_a_call_that_comes_back_to_its_caller_room_is_a_stay_there(tmp_path):
    w = walk.Walk()
    with w.recording():
        check.compare_outputs(1.0, 1.0, None)  # check calls only check's own functions
    assert [room for room, _ in w.stays] == ["check"]
    out = tmp_path / "walk.json"
    w.write(str(out))
    assert json.loads(out.read_text()) == {"stays": [["check", "compare_outputs"]], "returns": 0}


def test_off_unless_asked(monkeypatch, tmp_path):
    monkeypatch.setattr(walk, "PATH", None)
    before = sys.getprofile()
    with walk.pair():
        assert sys.getprofile() is before  # no hook in the judge's loop unless asked
    out = tmp_path / "pair.json"
    monkeypatch.setattr(walk, "PATH", str(out))
    with walk.pair():
        limits._seconds("KBENCH_NOT_SET_ANYWHERE", 1.0)
    assert json.loads(out.read_text())["stays"] == [["limits", "_seconds"]]
