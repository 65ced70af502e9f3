"""The timed calls' output check (harness/fingerprint.py): a burst's outputs are
projected in one batch, and each output's numbers are the ones it would get alone,
equal to the projection computed plainly in float64."""
import pytest
import torch

from harness import fingerprint


def _plain(t: torch.Tensor, seed: int, k: int = 0) -> list[float]:
    """sum(out * w) and |out|^2 in float64, the weights' row repeated over the output."""
    flat = t.detach().reshape(-1).double()
    w = fingerprint._w(seed, k, t.device).double()
    reps = -(-flat.numel() // fingerprint.ROW)
    return [float((flat * w.repeat(reps)[: flat.numel()]).sum()), float((flat * flat).sum())]


def _close(a: list[float], b: list[float]) -> bool:
    """The projection within 1e-5 of the output's norm (the check allows 6e-5 of it at
    its tightest), the squared norm within 1e-5 of itself (it only scales the allowance)."""
    return abs(a[0] - b[0]) <= 1e-5 * b[1] ** 0.5 + 1e-12 and abs(a[1] - b[1]) <= 1e-5 * b[1] + 1e-12


def test_batched_outputs_match_the_plain_projection():
    g = torch.Generator().manual_seed(0)
    # whole rows of the weights, a tail, fewer elements than one row, and none
    for shape in [(4, fingerprint.ROW), (3, 5000), (7, 11), (0, 3)]:
        outs = [torch.randn(shape, generator=g) for _ in range(5)]
        got = fingerprint.project_many(outs, seed=123)
        assert len(got) == 5
        for out, fp in zip(outs, got):
            assert len(fp) == 1 and _close(fp[0], _plain(out, 123)), (shape, fp, _plain(out, 123))
            assert fp == fingerprint.project(out, 123) or _close(fp[0], fingerprint.project(out, 123)[0])


def test_a_changed_output_changes_its_projection_only():
    """What the check is for: one call of a burst that wrote a different output (a
    replay, a skipped call) must show in that call's projection, not be averaged away."""
    g = torch.Generator().manual_seed(1)
    outs = [torch.randn(64, 300, generator=g) for _ in range(8)]
    before = fingerprint.project_many(outs, seed=7)
    outs[5] = outs[5].clone()
    outs[5][17, 3] += 1.0
    after = fingerprint.project_many(outs, seed=7)
    assert [i for i in range(8) if before[i] != after[i]] == [5]
    assert fingerprint.mismatch(after[5], before[5], 1e-5) is not None
    assert fingerprint.mismatch(after[4], before[4], 1e-5) is None


def test_tuples_mixed_shapes_dtypes_and_non_tensors():
    g = torch.Generator().manual_seed(2)
    outs = [(torch.randn(10, 10, generator=g), torch.randn(3, generator=g).half(), 2.5, None) for _ in range(3)]
    outs.append((torch.randn(4, 4, generator=g), torch.randn(3, generator=g).half(), 1, None))  # another shape
    got = fingerprint.project_many(outs, seed=9)
    for out, fp in zip(outs, got):
        assert _close(fp[0], _plain(out[0], 9, 0)) and _close(fp[1], _plain(out[1].float(), 9, 1))
        assert fp[2] == [float(out[2]), 0.0] and fp[3] == [0.0, 0.0]


def test_non_finite_values_project_their_finite_part():
    t = torch.ones(2, 5000)
    t[0, 0], t[1, 1] = float("nan"), float("inf")
    clean = torch.nan_to_num(t, nan=0.0, posinf=0.0)
    got = fingerprint.project_many([t, torch.ones(2, 5000)], seed=3)
    assert _close(got[0][0], _plain(clean, 3)) and _close(got[1][0], _plain(torch.ones(2, 5000), 3))


def test_gpu_outputs_are_stacked_up_to_the_limit(monkeypatch):
    stacked = []
    real_stack = torch.stack

    def stack(tensors, *a, **kw):
        stacked.append(len(tensors))
        return real_stack(tensors, *a, **kw)

    monkeypatch.setattr(fingerprint.torch, "stack", stack)
    g = torch.Generator().manual_seed(4)
    outs = [torch.randn(500, generator=g) for _ in range(7)]
    alone = fingerprint.project_many(outs, seed=5)
    assert stacked == [2] * 7  # on the CPU: each output alone (the stack of its [proj, norm])
    stacked.clear()
    monkeypatch.setattr(fingerprint, "STACKS_ON", ("cpu",))  # batch here as on a GPU:
    monkeypatch.setattr(fingerprint, "STACK_BYTES", 4 * 1500)  # three 500-element outputs per batch
    got = fingerprint.project_many(outs, seed=5)
    assert stacked == [3, 2, 3, 2, 2]  # outputs 0-2 and their [proj, norm]; 3-5; 6 alone
    assert all(_close(a[0], b[0]) and _close(a[0], _plain(o, 5)) for a, b, o in zip(got, alone, outs))


def test_a_candidates_subclass_output_is_refused_before_its_code_runs():
    """A subclass's __torch_function__ or __float__ would run the solution's code
    inside the projection, after the call the judge timed; the reference's outputs
    (trusted) are projected whatever their type."""
    ran = []

    class Lazy(torch.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            ran.append(func)
            return super().__torch_function__(func, types, args, kwargs or {})

    class Sneaky(float):
        def __float__(self):
            ran.append("float")
            return 0.0

    out = torch.randn(64)
    for bad in (out.as_subclass(Lazy), [out, Sneaky(1.0)], (Sneaky(2.0),)):
        with pytest.raises(fingerprint.NotPlain, match="return exactly torch.Tensor"):
            fingerprint.project(bad, 3)
    assert ran == []
    assert fingerprint.project(out.as_subclass(Lazy), 3, trusted=True) == fingerprint.project(out, 3)
    values = torch.max(torch.randn(4, 8), dim=1)  # torch's named tuple: a C structure, iterated
    assert fingerprint.project(values, 3) == fingerprint.project((values.values, values.indices), 3)
    assert fingerprint.project([out, 2, 1.5, None], 3)[1:] == [[2.0, 0.0], [1.5, 0.0], [0.0, 0.0]]


def test_a_correct_softmax_rounded_otherwise_is_not_refused_and_a_stale_one_is():
    """A softmax whose rows are normalized with a differently rounded sum is off by
    the same tiny factor in every element of a row. Its projection then moves by that
    share of the projection, which for an all-positive output is far larger than the
    output's norm: on the H100 a correct 4096 x 393216 softmax was refused as
    'projection 1.221839e+02 vs 1.221839e+02 (allowed +-6.53e-06)' in 1 to 3 runs of 8.
    The answer to other inputs (a replay) must still be refused."""
    torch.manual_seed(0)
    x = torch.rand(64, 393216)
    ref = torch.softmax(x, dim=1)
    rounded = ref * (1 + 2e-6)  # every element off by the same share, 5x inside the check's 1e-5
    rel = float((rounded.double() - ref.double()).norm() / ref.double().norm())
    assert rel < 1e-5  # the check itself would pass it
    fp_ref = fingerprint.project(ref, 7)
    assert fingerprint.mismatch(fingerprint.project(rounded, 7), fp_ref, 1e-5) is None
    stale = torch.softmax(torch.rand(64, 393216), dim=1)  # the right function of other inputs
    assert fingerprint.mismatch(fingerprint.project(stale, 7), fp_ref, 1e-5)
