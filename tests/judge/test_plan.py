"""Calls per batch (Timer._plan). Eager batches carry the host's fixed cost, which must stay
a small share of a batch (FIXED_SHARE); held batches are measured on the device, where the
fixed cost is the same in every batch and errs by its spread, so they may be shorter
(HOLD_FIXED_SHARE): a pair then costs the judge less drawing, reading and comparing. Each
side's batch is planned on its own fixed cost: held, the candidate's carries a switch of
contexts (~0.35 ms), the judge's own reference ~0.015 ms."""
import math
from types import SimpleNamespace

import pytest
import torch

from harness.judge import timing

HELD = (350e-6, 15e-6)  # the candidate's and the reference's fixed costs, held
EAGER = (600e-6, 50e-6)


def _timer(monkeypatch, holding: bool, fixed: tuple[float, float]) -> timing.Timer:
    t = object.__new__(timing.Timer)
    t.j = SimpleNamespace(device=torch.device("cuda"))
    t.cuda, t.holding = True, holding
    t.fixed_s, t.ref_fixed_s = fixed
    t.copies = [[torch.empty(1024)]]  # small: memory does not cap these plans
    t.out_bytes = 4096
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (80 << 30, 80 << 30))
    return t


@pytest.mark.parametrize("ref_s, sol_s", [(6.8e-6, 9.4e-6), (1.35e-3, 8.3e-3), (365e-6, 366e-6)])
def test_held_batches_are_planned_shorter_than_eager_ones(monkeypatch, ref_s, sol_s):
    eager = _timer(monkeypatch, False, EAGER)._plan(ref_s, sol_s)
    held = _timer(monkeypatch, True, HELD)._plan(ref_s, sol_s)
    assert held < eager
    # Eager: the candidate's 0.6 ms at 2% asks for 30 ms of its calls (the reference's 10 ms floor).
    wanted = max(math.ceil(timing.TARGET_S["cuda"] / ref_s), math.ceil(EAGER[0] / timing.FIXED_SHARE / sol_s))
    assert eager == min(wanted, math.floor(timing.MAX_BATCH_S / max(ref_s, sol_s)), timing.MAX_CALLS)


def test_each_side_is_planned_on_its_own_fixed_cost(monkeypatch):
    """A 2 ms candidate beside a 7 us reference: two of its calls carry its 0.35 ms fixed
    cost at a tenth; the reference's batch needs its floor, not the candidate's fixed cost."""
    held = _timer(monkeypatch, True, HELD)._plan(6.7e-6, 2.0e-3)
    assert held == math.ceil(timing.TARGET_HELD_S / 6.7e-6)
    # The other way round: the fast candidate needs its fixed cost's tenth.
    held = _timer(monkeypatch, True, HELD)._plan(1.0e-3, 40e-6)
    assert held == math.ceil(HELD[0] / timing.HOLD_FIXED_SHARE / 40e-6)


def test_the_slower_side_caps_a_batch(monkeypatch):
    held = _timer(monkeypatch, True, HELD)._plan(1e-6, 50e-3)
    assert held == math.floor(timing.MAX_BATCH_S / 50e-3)
