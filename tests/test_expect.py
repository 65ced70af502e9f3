"""The fixture expectation language (tests/expect.py) itself."""
from expect import _problems, expected, mismatches, timing_only


def _result(status="ok", speedup=None, flags=(), message=""):
    return {"status": status, "message": message, "flags": list(flags), "speedup": speedup, "timing": None}


def test_max_speedup_allows_none_and_slow_results():
    want = {"status": "ok", "max_speedup": 1.5}
    assert _problems(_result(speedup=None), want) == []
    assert _problems(_result(speedup=1.2), want) == []
    assert _problems(_result(speedup=1.5), want) == []


def test_max_speedup_refuses_a_faster_result():
    problems = _problems(_result(speedup=25.9), {"status": "ok", "max_speedup": 1.5})
    assert len(problems) == 1 and "25.9 > max_speedup 1.5" in problems[0]


def test_without_max_speedup_any_speedup_passes():
    assert _problems(_result(speedup=1000.0), {"status": "ok"}) == []


def test_max_speedup_inside_any_of(tmp_path):
    fixture = tmp_path / "memo.py"
    fixture.write_text('KBENCH_EXPECT = {"any_of": [{"status": "incorrect"}, {"status": "ok", "max_speedup": 1.5}]}\n')
    assert expected(fixture)["any_of"][1]["max_speedup"] == 1.5
    base = {"problem": "level1/2_Affine", "solution_path": str(fixture)}
    assert mismatches([{**base, **_result(speedup=1.1)}]) == []
    assert mismatches([{**base, **_result(status="incorrect")}]) == []
    assert len(mismatches([{**base, **_result(speedup=9.0)}])) == 1


def test_timing_only_misses_are_those_the_clock_decides():
    """A speedup above its bound or an unexpected timing_mismatch may be the loaded CPU
    clock; a wrong status, a missing flag or any other flag never is."""
    assert timing_only("level1/2_Affine import_problem_file.py: speedup 3.29 > max_speedup 1.5")
    assert timing_only("level1/2_Affine noncontiguous_out.py: unexpected flags ['timing_mismatch']")
    assert timing_only("level1/2_Affine x.py: unexpected flags ['timing_mismatch']; speedup 3 > max_speedup 1.5")
    assert not timing_only("level1/2_Affine x.py: unexpected flags ['tampering']; speedup 3 > max_speedup 1.5")
    assert not timing_only("level1/2_Affine x.py: unexpected flags ['tampering', 'timing_mismatch']")
    assert not timing_only("level1/2_Affine x.py: flags [] lack ['timing_mismatch']")
    assert not timing_only("level1/2_Affine x.py: status incorrect != ok (wrong)")
