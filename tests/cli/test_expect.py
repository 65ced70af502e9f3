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


def _twin_run(tmp_path, attack: dict, twin: dict, declared: str):
    folder = tmp_path / "level1" / "2_Affine"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "attack.py").write_text(f"KBENCH_EXPECT = {declared}\n")
    (folder / "honest.py").write_text('KBENCH_EXPECT = {"status": "ok"}\n')
    base = {"problem": "level1/2_Affine"}
    return [{**base, "solution_path": str(folder / "attack.py"), **attack},
            {**base, "solution_path": str(folder / "honest.py"), **twin}]


TWIN = '{"status": "ok", "twin": "honest.py", "max_ratio": 1.3}'


def test_twin_ratio_allows_up_to_max_ratio_times_the_twin(tmp_path):
    assert mismatches(_twin_run(tmp_path, _result(speedup=1.9), _result(speedup=1.5), TWIN)) == []
    assert mismatches(_twin_run(tmp_path, _result(speedup=None), _result(speedup=1.5), TWIN)) == []


def test_twin_ratio_refuses_an_attack_that_works(tmp_path):
    """The issue's numbers: a clean ok at 70.9x against 7.3x for the same kernel honest."""
    bad = mismatches(_twin_run(tmp_path, _result(speedup=70.9), _result(speedup=7.3), TWIN))
    assert len(bad) == 1 and "70.9 > 1.3 x twin honest.py's 7.3" in bad[0]
    assert timing_only(bad[0])  # so a CPU run measures it again (tests/cli/test_adversarial.py)


def test_twin_ratio_does_not_apply_to_a_result_the_gate_fails(tmp_path):
    declared = ('{"any_of": [' + TWIN + ', {"status": "ok", "flags": ["timing_mismatch"]}]}')
    flagged = _result(speedup=70.9, flags=["timing_mismatch"])
    assert mismatches(_twin_run(tmp_path, flagged, _result(speedup=7.3), declared)) == []
    # a clean ok is held to the twin, whichever alternative it is read against
    assert len(mismatches(_twin_run(tmp_path, _result(speedup=70.9), _result(speedup=7.3), declared))) == 1


def test_a_twin_that_failed_or_is_missing_is_a_mismatch(tmp_path):
    bad = mismatches(_twin_run(tmp_path, _result(speedup=1.0), _result(status="incorrect"), TWIN), only="attack.py")
    assert len(bad) == 1 and "twin honest.py got incorrect" in bad[0] and not timing_only(bad[0])
    results = _twin_run(tmp_path / "alone", _result(speedup=1.0), _result(speedup=1.0), TWIN)[:1]
    bad = mismatches(results)
    assert len(bad) == 1 and "not judged in this run" in bad[0]


def test_timing_only_ignores_alternatives_with_another_status():
    line = ("level1/2_Affine a.py: status ok != incorrect (x, y) / speedup 9 > 1.3 x twin honest.py's 1 (9.00x the twin)")
    assert timing_only(line)
    assert not timing_only("level1/2_Affine a.py: status ok != incorrect (x) / unexpected flags ['tampering']")
    assert not timing_only("level1/2_Affine a.py: status crashed != ok (killed)")


def test_only_reports_the_named_fixture(tmp_path):
    results = _twin_run(tmp_path, _result(speedup=70.9), _result(speedup=7.3), TWIN)
    assert mismatches(results, only="honest.py") == []
    assert len(mismatches(results, only="attack.py")) == 1


def test_timing_only_misses_are_those_the_clock_decides():
    """A speedup above its bound or an unexpected timing_mismatch may be the loaded CPU
    clock; a wrong status, a missing flag or any other flag never is."""
    assert timing_only("level1/2_Affine import_problem_file.py: speedup 3.29 > max_speedup 1.5")
    assert timing_only("level1/2_Affine noncontiguous_out.py: unexpected flags ['timing_mismatch']")
    assert timing_only("level1/2_Affine x.py: unexpected flags ['timing_mismatch']; speedup 3 > max_speedup 1.5")
    assert not timing_only("level1/2_Affine x.py: unexpected flags ['tampering']; speedup 3 > max_speedup 1.5")
    assert not timing_only("level1/2_Affine x.py: unexpected flags ['tampering', 'timing_mismatch']")
    assert not timing_only("level1/2_Affine x.py: flags [] lack ['timing_mismatch']")
    # One alternative missed by the clock alone (the twin's ratio), the other by its flag: measured again.
    assert timing_only("level1/2_Affine inflated_fixed_cost.py: speedup 1.31 > 1.3 x twin honest_torch.py's 0.951 "
                       "(1.38x the twin) / flags ['no_custom_kernel', 'noisy'] lack ['timing_mismatch']")
    assert not timing_only("level1/2_Affine x.py: speedup 3 > max_speedup 1.5; flags [] lack ['tampering'] / "
                           "flags [] lack ['timing_mismatch']")
    assert not timing_only("level1/2_Affine x.py: status incorrect != ok (wrong)")
