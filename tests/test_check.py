"""The numeric comparison every verdict rests on, against formulas computed here
in float64, in one chunk and in many."""
import math

import pytest
import torch

from harness import check
from harness.check import Mismatch, compare_outputs


def _manual(sol: torch.Tensor, ref: torch.Tensor) -> dict:
    s, r = sol.double().reshape(-1), ref.double().reshape(-1)
    d = (s - r).abs()
    nz = r != 0
    return {"rel_l2": math.sqrt(float((d * d).sum()) / float((r * r).sum())), "max_abs": float(d.max()),
            "max_rel": float((d[nz] / r[nz].abs()).max()), "at": int(d.argmax())}


@pytest.fixture(params=[1 << 24, 997], ids=["one_chunk", "many_chunks"])
def chunk(request, monkeypatch):
    monkeypatch.setattr(check, "CHUNK", request.param)
    return request.param


def test_identical_outputs_have_zero_error(chunk):
    ref = torch.randn(64, 100)
    e = compare_outputs(ref.clone(), ref, ref.double())
    assert e.max_abs == 0 and e.rel_l2 == 0 and e.rel_l2_fp64 == 0 and e.max_rel == 0


def test_errors_within_tolerance_are_measured_exactly(chunk):
    torch.manual_seed(0)
    ref = torch.randn(64, 100)
    sol = ref * (1 + 1e-6 * torch.randn_like(ref))
    e = compare_outputs(sol, ref, None)
    m = _manual(sol, ref)
    assert e.rel_l2 == pytest.approx(m["rel_l2"], rel=1e-6)
    assert e.max_abs == pytest.approx(m["max_abs"], rel=1e-6)
    assert e.max_rel == pytest.approx(m["max_rel"], rel=1e-3)


def test_one_wrong_value_is_named_by_its_index(chunk):
    torch.manual_seed(1)
    ref = torch.randn(64, 100)
    sol = ref.clone()
    sol[37, 71] += 1.0  # in a late chunk when chunks are small
    with pytest.raises(Mismatch) as info:
        compare_outputs(sol, ref, None, l2_bound=1.0)  # the L2 bound alone would let it pass
    msg = str(info.value)
    assert "1 of 6400 values outside rtol" in msg and "worst at [37, 71]" in msg


def test_l2_error_against_float64_reference(chunk):
    torch.manual_seed(2)
    ref64 = torch.randn(64, 100, dtype=torch.float64)
    ref = ref64.float()
    sol = (ref64 * (1 + 3e-5 * torch.randn_like(ref64))).float()  # far beyond 10x the fp32 rounding
    with pytest.raises(Mismatch, match="relative L2 error vs float64 reference .* exceeds"):
        compare_outputs(sol, ref, ref64)
    e = compare_outputs(ref.clone(), ref, ref64)  # the fp32 reference against itself: its own error
    s64, r64 = ref64.reshape(-1), ref.double().reshape(-1)
    own = math.sqrt(float(((r64 - s64) ** 2).sum()) / float((s64 ** 2).sum()))
    assert e.rel_l2_fp64 == pytest.approx(own, rel=1e-6) and e.ref_rel_l2_fp64 == pytest.approx(own, rel=1e-6)
    assert e.tolerance == pytest.approx(max(10 * own, 1e-5))


def test_nan_only_where_the_reference_has_it(chunk):
    ref = torch.randn(50, 40)
    ref[3, 4] = float("nan")
    sol = ref.clone()
    compare_outputs(sol, ref, None)  # same NaN: fine, and the rest is compared
    sol[10, 10] = float("nan")
    with pytest.raises(Mismatch, match=r"NaN where the reference has none .* first at \[10, 10\]"):
        compare_outputs(sol, ref, None)
    sol = ref.clone()
    sol[20, 1] += 1.0
    with pytest.raises(Mismatch, match=r"worst at \[20, 1\]"):
        compare_outputs(sol, ref, None, l2_bound=1.0)


def test_integers_must_match_exactly(chunk):
    ref = torch.arange(100)
    sol = ref.clone()
    sol[42] = 0
    with pytest.raises(Mismatch, match=r"1 of 100 values differ .* first at \[42\]"):
        compare_outputs(sol, ref, None)


def test_half_precision_uses_its_own_tolerance(chunk):
    torch.manual_seed(3)
    ref = torch.randn(40, 50).half()
    sol = (ref.float() * (1 + 3e-4 * torch.randn(40, 50))).half()  # within fp16 rounding and its L2 floor
    compare_outputs(sol, ref, None)
    sol[5, 5] = ref[5, 5] + 10
    with pytest.raises(Mismatch, match=r"at \[5, 5\]"):
        compare_outputs(sol, ref, None)
