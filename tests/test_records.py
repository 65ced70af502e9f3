"""results.json is the contract between a run and every later reader (report, compare,
--resume, notebooks): a record written must read back as the same record."""
import dataclasses
import json
from dataclasses import replace as dataclasses_replace

import pytest

from harness.records import (
    SCHEMA_VERSION,
    CheckResult,
    Flag,
    RunInfo,
    RunResults,
    SideTiming,
    Status,
    TaskResult,
    Timing,
    UserError,
    results_from_json,
    to_json_dict,
)


def _full_run() -> RunResults:
    timing = Timing(
        ref=SideTiming(median_ms=2.0, iqr_ms=0.05, n=3, samples_ms=(1.95, 2.0, 2.1)),
        sol=SideTiming(median_ms=1.0, iqr_ms=0.02, n=3, samples_ms=(0.99, 1.0, 1.03)),
        speedup=2.0,
        speedup_ci=(1.9, 2.1),
        clock="cuda_burst",
        stop_reason="converged",
        calls_per_batch=10,
        fixed_ms=0.11,
        ref_fixed_ms=0.03,
        floor_ms=0.5,
        bytes_moved=1_500_000_000,
    )
    check = CheckResult(
        passed=True, message="5 trials", trials=6, max_abs_err=1e-6, max_rel_err=2e-5, rel_l2_err=3e-7,
        rel_l2_err_fp64=4e-7, ref_rel_l2_err_fp64=1e-7, tolerance=1e-5, notes=("check input 1", "re-checked after timing"),
    )
    ok = TaskResult(
        problem="level1/23_Softmax", solution_set="gpt", solution_path="solutions/gpt/level1/23_Softmax.py",
        status=Status.OK, message="", flags=(Flag.NOISY, Flag.BELOW_ROOFLINE), ref_ms=2.0, sol_ms=1.0, speedup=2.0,
        phase="done", seconds=12.5, log_path="results/r1/logs/0.log", check=check, timing=timing, fingerprint="abc123",
    )
    failed = TaskResult(
        problem="level1/1_Conv", solution_set="gpt", solution_path="solutions/gpt/level1/1_Conv.py",
        status=Status.BUILD_ERROR, message="error: expected ';'", phase="build", seconds=3.0,
    )
    info = RunInfo(
        run_id="r1", kbench_version="0.1.0", device="NVIDIA H100 80GB HBM3", torch_version="2.13.0", cuda_version="12.8",
        options={"trials": 5, "seed": 42, "fail_on": ["tampering"]}, started="2025-01-01T00:00:00+00:00",
        finished=None, unmatched=("solutions/x.py: a solution file must sit in a set folder",),
    )
    return RunResults(run=info, results=(ok, failed))


def _round_trip(run: RunResults) -> RunResults:
    return results_from_json(json.loads(json.dumps(to_json_dict(run))))


def test_round_trip_gives_equal_records():
    run = _full_run()
    assert _round_trip(run) == run


def test_round_trip_restores_enums_and_tuples():
    back = _round_trip(_full_run())
    ok, failed = back.results
    assert type(ok.status) is Status and ok.status is Status.OK
    assert failed.status is Status.BUILD_ERROR
    assert ok.flags == (Flag.NOISY, Flag.BELOW_ROOFLINE) and all(type(f) is Flag for f in ok.flags)
    assert isinstance(back.results, tuple) and isinstance(back.run.unmatched, tuple)
    assert isinstance(ok.timing.speedup_ci, tuple) and ok.timing.speedup_ci == (1.9, 2.1)
    assert isinstance(ok.timing.ref.samples_ms, tuple)
    assert isinstance(ok.check.notes, tuple)
    assert isinstance(ok.check, CheckResult) and isinstance(ok.timing.sol, SideTiming)
    # records are hashable again (frozen dataclasses of tuples), so they work as dict keys and in sets
    assert hash(ok.timing.sol) == hash(_full_run().results[0].timing.sol)


def test_optional_nested_records_stay_none():
    back = _round_trip(_full_run())
    assert back.results[1].check is None and back.results[1].timing is None
    assert back.run.finished is None


def test_json_form_uses_plain_values():
    data = to_json_dict(_full_run())
    text = json.dumps(data)  # no custom encoder needed
    assert data["results"][0]["status"] == "ok"
    assert data["results"][0]["flags"] == ["noisy", "below_roofline"]
    assert data["results"][1]["status"] == "build_error"
    assert '"speedup_ci": [1.9, 2.1]' in text


def test_schema_version_is_written_at_the_top():
    data = to_json_dict(_full_run())
    assert data["schema_version"] == SCHEMA_VERSION
    assert list(data)[0] == "schema_version"
    # only the top level carries it
    assert "schema_version" not in data["run"] and "schema_version" not in data["results"][0]


def test_a_version_1_file_reads_as_is():
    """Version 2 added the problem_error status; every version 1 file is a version 2 file."""
    data = to_json_dict(_full_run())
    data["schema_version"] = 1
    assert results_from_json(data) == _full_run()


def test_problem_error_reads_back():
    run = _full_run()
    broken = dataclasses.replace(run.results[1], status=Status.PROBLEM_ERROR, message="problem file p.py: ...")
    run = dataclasses.replace(run, results=(run.results[0], broken))
    data = json.loads(json.dumps(to_json_dict(run)))
    assert data["schema_version"] == 2 and data["results"][1]["status"] == "problem_error"
    assert results_from_json(data) == run


@pytest.mark.parametrize("version", [SCHEMA_VERSION + 1, 0, "1", None, True])
def test_wrong_schema_version_raises_user_error(version):
    data = to_json_dict(_full_run())
    data["schema_version"] = version
    with pytest.raises(UserError, match="schema_version"):
        results_from_json(data)


def test_missing_schema_version_raises_user_error():
    data = to_json_dict(_full_run())
    del data["schema_version"]
    with pytest.raises(UserError, match="schema_version"):
        results_from_json(data)


def test_json_that_is_not_an_object_raises_user_error():
    with pytest.raises(UserError):
        results_from_json([1, 2, 3])


def test_unknown_extra_keys_are_ignored():
    data = to_json_dict(_full_run())
    data["written_by_a_newer_kbench"] = {"x": 1}
    data["run"]["new_run_field"] = "x"
    data["results"][0]["new_task_field"] = [1, 2]
    data["results"][0]["check"]["new_check_field"] = 3
    data["results"][0]["timing"]["new_timing_field"] = None
    data["results"][0]["timing"]["sol"]["new_side_field"] = 1.0
    assert results_from_json(data) == _full_run()


def test_missing_optional_keys_take_their_defaults():
    data = to_json_dict(_full_run())
    del data["results"][1]["flags"], data["results"][1]["fingerprint"], data["run"]["unmatched"]
    back = results_from_json(data)
    assert back.results[1].flags == () and back.results[1].fingerprint == "" and back.run.unmatched == ()


def test_precision_travels_in_options_and_a_bad_name_is_refused():
    """--precision is part of Options: in every TaskSpec's JSON, and so in the --resume
    fingerprint; a spec written before the option existed reads back as fp32."""
    from harness.records import PRECISIONS, Options

    assert PRECISIONS == ("fp32", "fp16", "bf16") and Options().precision == "fp32"
    half = Options(precision="bf16")
    assert to_json_dict(half)["precision"] == "bf16" and Options.from_json(to_json_dict(half)) == half
    old = to_json_dict(Options())
    del old["precision"]
    assert Options.from_json(old).precision == "fp32"
    with pytest.raises(ValueError, match="precision must be one of fp32, fp16, bf16, not 'fp8'"):
        Options(precision="fp8")
    info = _full_run().run  # its options, like those of results written before the option, name none
    assert info.precision == "fp32" and dataclasses_replace(info, options={"precision": "bf16"}).precision == "bf16"
