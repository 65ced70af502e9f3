"""The host_bound flag (judge/main.py): a side whose host takes clearly longer to issue a
call than the call runs. A side near even must read the same from run to run (on 4 H100s
one candidate was flagged in 9 of 12 warm reruns), so the flag needs a margin; and where
batches were held, the device's time is the held measure, not a single call's events
(which also span the host's gaps between many small kernels)."""
from types import SimpleNamespace

from harness.judge import main
from harness.judge.timing import PairResult, Side
from harness.records import Flag


def _warm_side(host: float, events: float) -> Side:
    # The first call is left out (it met new memory): a wild first value must not count.
    return Side(host_ms=[50.0] + [host] * 5, claimed_ms=[0.001] + [events] * 5)


def _held_side(host: float, device: float) -> Side:
    return Side(ms=[device] * 10, host_ms=[host] * 10, figure=[device] * 10)


def _flags(ref_host_events, sol_host_events, clock="cuda_burst", ref_held=None, sol_held=None) -> tuple[set, list]:
    warm = PairResult(_warm_side(*ref_host_events), _warm_side(*sol_host_events), "", clock, 1, 0.0, 0.0)
    pair = PairResult(_held_side(*ref_held) if ref_held else Side(), _held_side(*sol_held) if sol_held else Side(),
                      "converged", clock, 10, 0.0, 0.0)
    judge = SimpleNamespace(flags=set(), notes=[])
    main._host_bound(judge, pair, warm)
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


def test_held_batches_give_the_device_time_that_single_calls_events_blur():
    """Many small kernels: a single call's events run as long as its host issues them
    (2.37 vs 2.30 ms, near even), while the held measure says 0.31 ms on the device."""
    flags, notes = _flags((0.02, 0.02), (2.37, 2.30), "cuda_hold", ref_held=(0.02, 0.0125), sol_held=(2.37, 0.313))
    assert flags == {Flag.HOST_BOUND}
    assert notes == ["reference takes 20.0 us of host time to issue a call that runs 12.5 us on the device",
                     "solution takes 2370.0 us of host time to issue a call that runs 313.0 us on the device"]


def test_held_figures_decide_over_the_warm_up():
    """Held near even: not flagged, whatever the warm-up's single calls said."""
    assert _flags((0.010, 0.010), (0.040, 0.005), "cuda_hold", ref_held=(0.010, 0.010),
                  sol_held=(0.011, 0.010))[0] == set()
