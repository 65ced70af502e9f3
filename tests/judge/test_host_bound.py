"""The host_bound flag (judge/main.py): a side whose host takes clearly longer to issue a
call than the call runs. A side near even must read the same from run to run (on 4 H100s
one candidate was flagged in 9 of 12 warm reruns), so the flag needs a margin."""
from types import SimpleNamespace

from harness.judge import main
from harness.judge.timing import PairResult, Side
from harness.records import Flag


def _flags(ref_host_events: tuple[float, float], sol_host_events: tuple[float, float]) -> tuple[set, list]:
    def side(host: float, events: float) -> Side:
        # The first call is left out (it met new memory): a wild first value must not count.
        return Side(host_ms=[50.0] + [host] * 5, claimed_ms=[0.001] + [events] * 5)

    warm = PairResult(side(*ref_host_events), side(*sol_host_events), "", "cuda_hold", 1, 0.0, 0.0)
    judge = SimpleNamespace(flags=set(), notes=[])
    main._host_bound(judge, warm)
    return judge.flags, judge.notes


def test_a_side_near_even_is_not_host_bound():
    assert _flags((0.011, 0.010), (0.012, 0.010)) == (set(), [])


def test_a_side_clearly_host_bound_is_flagged_and_named():
    flags, notes = _flags((0.010, 0.010), (0.040, 0.005))
    assert flags == {Flag.HOST_BOUND}
    assert notes == ["solution takes 40.0 us of host time to issue a call that runs 5.0 us on the device"]


def test_the_margin_is_a_quarter():
    assert _flags((0.0126, 0.010), (0.001, 0.010))[0] == {Flag.HOST_BOUND}
    assert _flags((0.0124, 0.010), (0.001, 0.010))[0] == set()
