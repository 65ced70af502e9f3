"""The gate is what CI sees: its exit code must fail on every wrong or cheating task
and on nothing else."""
import pytest

from harness.report.gate import DEFAULT_FAIL_FLAGS, EXIT_GATE_FAILED, EXIT_OK, GatePolicy, gate, parse_flags, verdict
from harness.records import Flag, Status, TaskResult, UserError


def result(status=Status.OK, flags=(), speedup=1.5, path="s/level1/1_A.py") -> TaskResult:
    return TaskResult("level1/1_A", "s", path, status, "msg", flags=tuple(flags), speedup=speedup)


DEFAULT = GatePolicy()


def test_ok_passes():
    v = verdict(result(), DEFAULT)
    assert v.passed and v.reasons == ()


@pytest.mark.parametrize("status", [s for s in Status if s is not Status.OK])
def test_every_other_status_fails_and_names_itself(status):
    v = verdict(result(status, speedup=None), DEFAULT)
    assert not v.passed
    assert v.reasons == (status.value,)


@pytest.mark.parametrize("flag", [Flag.TAMPERING, Flag.UNTIMED_WORK, Flag.INPUT_MUTATION, Flag.BELOW_ROOFLINE])
def test_default_fail_flags_fail_a_correct_task(flag):
    assert flag in DEFAULT_FAIL_FLAGS
    v = verdict(result(flags=[flag]), DEFAULT)
    assert not v.passed
    assert v.reasons == (f"flag {flag.value}",)


@pytest.mark.parametrize("flag", [Flag.NO_CUSTOM_KERNEL, Flag.NOISY])
def test_warning_flags_do_not_fail(flag):
    assert flag not in DEFAULT_FAIL_FLAGS
    assert verdict(result(flags=[flag]), DEFAULT).passed


def test_reasons_list_status_and_every_failing_flag():
    v = verdict(result(Status.INCORRECT, flags=[Flag.NOISY, Flag.TAMPERING, Flag.INPUT_MUTATION]), DEFAULT)
    assert v.reasons == ("incorrect", "flag tampering", "flag input_mutation")


def test_custom_fail_flags():
    policy = GatePolicy(fail_flags=frozenset({Flag.NO_CUSTOM_KERNEL}))
    assert not verdict(result(flags=[Flag.NO_CUSTOM_KERNEL]), policy).passed
    assert verdict(result(flags=[Flag.TAMPERING]), policy).passed
    none = GatePolicy(fail_flags=frozenset())
    assert verdict(result(flags=list(Flag)), none).passed


def test_min_speedup():
    policy = GatePolicy(min_speedup=1.2)
    assert verdict(result(speedup=1.2), policy).passed  # at the bound passes
    assert verdict(result(speedup=3.0), policy).passed
    slow = verdict(result(speedup=1.1), policy)
    assert not slow.passed and slow.reasons == ("speedup 1.10x < --min-speedup 1.2",)
    unmeasured = verdict(result(speedup=None), policy)
    assert not unmeasured.passed and "unmeasured" in unmeasured.reasons[0]
    # a failed task fails for its status, not again for its speed
    assert verdict(result(Status.INCORRECT, speedup=None), policy).reasons == ("incorrect",)


def test_without_min_speedup_a_slow_correct_task_passes():
    assert verdict(result(speedup=0.1), DEFAULT).passed
    assert verdict(result(speedup=None), DEFAULT).passed


def test_gate_exit_codes_and_failures():
    results = [
        result(path="a.py"),
        result(Status.BUILD_ERROR, speedup=None, path="b.py"),
        result(flags=[Flag.TAMPERING, Flag.UNTIMED_WORK], path="c.py"),
        result(flags=[Flag.NOISY], path="d.py"),
    ]
    g = gate(results, DEFAULT)
    assert g.exit_code == EXIT_GATE_FAILED == 1
    assert g.failed == (("b.py", "build_error"), ("c.py", "flag tampering; flag untimed_work"))


def test_gate_passes_when_every_task_passes():
    g = gate((result(path="a.py"), result(flags=[Flag.NOISY], path="b.py")), DEFAULT)
    assert g.exit_code == EXIT_OK == 0 and g.failed == ()
    assert gate([], DEFAULT).exit_code == EXIT_OK


def test_exit_zero_keeps_the_failures_but_exits_0():
    g = gate([result(Status.CRASHED, speedup=None, path="x.py")], GatePolicy(exit_zero=True))
    assert g.exit_code == EXIT_OK
    assert g.failed == (("x.py", "crashed"),)


def test_min_speedup_alone_can_fail_the_gate():
    g = gate([result(speedup=0.9, path="x.py")], GatePolicy(min_speedup=1.0))
    assert g.exit_code == EXIT_GATE_FAILED
    assert g.failed[0][0] == "x.py" and "--min-speedup 1" in g.failed[0][1]


def test_parse_flags():
    assert parse_flags("tampering") == {Flag.TAMPERING}
    assert parse_flags("tampering, untimed_work") == {Flag.TAMPERING, Flag.UNTIMED_WORK}
    assert parse_flags("none") == frozenset() and parse_flags("NONE") == frozenset() and parse_flags("") == frozenset()
    all_flags = ",".join(f.value for f in Flag)
    assert parse_flags(all_flags) == frozenset(Flag)


def test_parse_flags_round_trips_the_default():
    # the CLI's default --fail-on is built from DEFAULT_FAIL_FLAGS this way
    assert parse_flags(",".join(sorted(f.value for f in DEFAULT_FAIL_FLAGS))) == DEFAULT_FAIL_FLAGS


@pytest.mark.parametrize("text, bad", [("tamperin", "tamperin"), ("tampering,slow", "slow"), ("noisy, bogus ", "bogus")])
def test_parse_flags_error_names_the_bad_flag_and_the_valid_ones(text, bad):
    with pytest.raises(UserError) as e:
        parse_flags(text)
    msg = str(e.value)
    assert f"'{bad}'" in msg and "--fail-on" in msg
    for f in Flag:
        assert f.value in msg
    assert "\n" not in msg
