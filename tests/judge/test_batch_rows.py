"""A timed batch's work per call, done for the whole batch at once: its outputs read with
their layout checked once (Reader.read_rows), compared in a few operations
(check.rows_rel_l2), and its values drawn under vmap (Timer._draw_rows). Each must give
what the one-by-one path gives, and fall back to it where it cannot."""
import math
import os
from types import SimpleNamespace

import pytest
import torch

from harness.judge import check, read, timing


def _reader() -> read.Reader:
    """A reader of this process's own memory: /proc/<pid>/mem reads as the candidate's does."""
    return read.Reader(torch.device("cpu"), os.getpid(), lambda _id: None)


def _layout(t: torch.Tensor) -> dict:
    return {"t": "Tensor", "dtype": str(t.dtype).replace("torch.", ""), "shape": list(t.shape),
            "stride": list(t.stride()), "device": "cpu", "at": ["addr", t.data_ptr()]}


def test_outputs_read_as_rows_are_the_bytes_each_call_left():
    outs = [torch.randn(3, 5).t() for _ in range(7)]  # strided, as a kernel's output may be
    r = _reader()
    try:
        rows = r.read_rows(_layout(outs[0]), [["addr", o.data_ptr()] for o in outs], [])
        one_by_one = [r.read(_layout(o)) for o in outs]
    finally:
        r.close()
    assert len(rows) == 7 and rows[0].shape == (5, 3)
    for row, o, single in zip(rows, outs, one_by_one):
        assert torch.equal(row, o) and torch.equal(single, o)
    o[0, 0] = 1e6  # copies: what the candidate writes after the read does not reach them
    assert not torch.equal(rows[-1], o)


def test_outputs_not_laid_out_alike_are_left_to_the_one_by_one_read():
    r = _reader()
    a = torch.randn(4)
    try:
        assert r.read_rows({**_layout(a), "t": "Returned"}, [["addr", a.data_ptr()]] * 2, []) is None
        assert r.read_rows(_layout(a), [["addr", a.data_ptr()], ["seg", 0, 0]], []) is None
        assert r.read_rows({**_layout(a), "device": "cuda"}, [["lent", 0, 0], ["seg", 1, 0]], ["x", "y"]) is None
    finally:
        r.close()


def test_an_unreadable_address_is_named():
    r = _reader()
    try:
        with pytest.raises(read.OutputUnreadable, match="cannot read"):
            r.read_rows(_layout(torch.randn(4)), [["addr", 8], ["addr", 64]], [])
    finally:
        r.close()


def _timer_reading(monkeypatch) -> timing.Timer:
    from harness.judge.task import Judge

    t = object.__new__(timing.Timer)
    t.j = object.__new__(Judge)
    t.j.reader, t.j.phase_name, t.j.quiesce = _reader(), "timing", lambda: None
    return t


def test_one_buffer_for_every_call_is_refused_on_the_fast_path_too(monkeypatch):
    t = _timer_reading(monkeypatch)
    shared = torch.randn(16)
    first = _layout(shared)
    try:
        with pytest.raises(timing.TaskFailed, match="share memory"):
            t._read_calls({"first": first, "ats": [[], [["addr", shared.data_ptr()]], [["addr", shared.data_ptr()]]],
                           "odd": {}, "segs": []}, 3)
        half = shared.data_ptr() + 8 * 4  # calls overlapping by half an output
        with pytest.raises(timing.TaskFailed, match="calls 1 and 2 share memory"):
            t._read_calls({"first": first, "ats": [[], [["addr", half]]], "odd": {}, "segs": []}, 2)
        outs = [torch.randn(16) for _ in range(3)]
        got = t._read_calls({"first": _layout(outs[0]), "ats": [[], *[[["addr", o.data_ptr()]] for o in outs[1:]]],
                             "odd": {}, "segs": []}, 3)
        assert len(got) == 3 and all(torch.equal(g, o) for g, o in zip(got, outs))
    finally:
        t.j.reader.close()


@pytest.mark.parametrize("chunk_bytes", [1 << 28, 3 * 3 * 64 * 4])  # whole, and three calls a chunk
def test_rows_compared_at_once_give_the_one_by_one_errors(monkeypatch, chunk_bytes):
    monkeypatch.setattr(check, "BATCH_BYTES", chunk_bytes)
    monkeypatch.setattr(check, "CPU_BATCH_BYTES", chunk_bytes)
    torch.manual_seed(2)
    refs = [torch.randn(8, 8) for _ in range(7)]
    rows = torch.stack(refs).clone()
    rows[3] *= 1.01
    rows[5, 2, 2] = float("nan")
    rows[6] = 0.0
    fast, slow = check.rows_rel_l2(list(rows.unbind(0)), refs), check.batch_rel_l2(list(rows.unbind(0)), refs)
    assert fast[:5] == pytest.approx(slow[:5], rel=1e-9) and fast[3] == pytest.approx(0.01, rel=1e-4)
    assert math.isnan(fast[5]) and math.isnan(slow[5])
    assert fast[6] == pytest.approx(1.0) == slow[6]


def test_outputs_unlike_each_other_are_left_to_the_one_by_one_comparison():
    rows = [torch.zeros(4), torch.zeros(4)]
    assert check.rows_rel_l2(rows, [torch.zeros(4), torch.zeros(5)]) is None
    assert check.rows_rel_l2(rows, [torch.zeros(4, dtype=torch.int64)] * 2) is None
    assert check.rows_rel_l2(rows, [torch.zeros(4), (torch.zeros(4),)]) is None
    assert check.rows_rel_l2([torch.zeros(4), (torch.zeros(4),)], rows) is None  # a solution output that is not one tensor
    assert check.rows_rel_l2(rows, [torch.zeros(4)]) is None  # not one a call


def _drawing_timer(get_inputs, n: int = 6) -> timing.Timer:
    """A Timer whose judge draws from `get_inputs` as Judge.make_inputs/make_input_rows do."""
    from harness.judge.task import Judge

    j = object.__new__(Judge)
    j.problem, j.device, j.precision, j.spec = SimpleNamespace(get_inputs=get_inputs), torch.device("cpu"), "fp32", {
        "problem_path": "p.py"}
    j.spend = lambda _name: __import__("contextlib").nullcontext()
    t = object.__new__(timing.Timer)
    t.j, t.rows_draw = j, None
    first = j.make_inputs(t._next_seed())
    t.staging = [torch.empty((n, *x.shape), dtype=x.dtype) if isinstance(x, torch.Tensor) else x for x in first]
    return t


def _distinct_rows(t: torch.Tensor) -> int:
    return len({tuple(r.flatten().tolist()) for r in t.unbind(0)})


def test_values_drawn_at_once_are_fresh_for_every_call_and_every_batch():
    t = _drawing_timer(lambda: [torch.randn(4, 3), torch.randint(0, 1000, (5,)), 7, torch.ones(2)])
    t._draw(6)  # the trial: single draws stand, rows tried beside them
    assert t.rows_draw is True
    x, idx, _, ones = t.staging
    before = x.clone()
    t._draw(6)
    assert _distinct_rows(x) == 6 and _distinct_rows(idx) == 6 and not torch.equal(x, before)
    assert torch.equal(ones, torch.ones(6, 2))  # what is the same in every draw stays the same


def test_a_get_inputs_that_vmap_cannot_run_or_that_draws_outside_torch_is_drawn_call_by_call():
    import numpy as np

    rng = np.random.default_rng(0)
    numpy_drawn = _drawing_timer(lambda: [torch.from_numpy(rng.standard_normal(4).astype("float32"))])
    numpy_drawn._draw(6)
    assert numpy_drawn.rows_draw is False  # under vmap every row would be the same
    numpy_drawn._draw(6)
    assert _distinct_rows(numpy_drawn.staging[0]) == 6

    def with_item():
        x = torch.randn(4)
        return [x * x.max().item()]

    item = _drawing_timer(with_item)
    item._draw(6)
    assert item.rows_draw is False
    item._draw(6)
    assert _distinct_rows(item.staging[0]) == 6


def test_one_allocation_named_twice_in_two_base64_spellings_is_still_one_buffer():
    """The one-by-one path's overlap check keys segments by handle, not by spelling: base64
    leaves a handle's last character's low bits free, so a reply can name one allocation
    as two segments (the fast path compares the addresses the judge mapped)."""
    import base64

    handle = bytes(range(64))
    spelled = base64.b64encode(handle).decode()
    alias = spelled[:85] + chr(ord(spelled[85]) + 1) + spelled[86:]
    assert alias != spelled and base64.b64decode(alias, validate=True) == handle
    out = {"t": "Tensor", "dtype": "float32", "shape": [4], "stride": [1], "device": "cuda"}
    with pytest.raises(timing.TaskFailed, match="share memory"):
        timing._refuse_shared_memory([{**out, "at": ["seg", 0, 0]}, {**out, "at": ["seg", 1, 0]}], [spelled, alias])


def test_each_draw_has_its_own_seed_not_the_last_ones_successor():
    t = object.__new__(timing.Timer)
    seeds = [t._next_seed() for _ in range(64)]
    assert len(set(seeds)) == 64 and not any(b - a == 1 for a, b in zip(seeds, seeds[1:]))


def test_a_batch_read_at_once_that_cannot_be_read_is_a_runtime_error_and_a_bad_layout_a_crash(monkeypatch):
    t = _timer_reading(monkeypatch)
    first = _layout(torch.randn(4))
    try:
        with pytest.raises(timing.TaskFailed, match="cannot read") as unreadable:
            t._read_calls({"first": {**first, "at": ["addr", 8]}, "ats": [[], [["addr", 64]]], "odd": {}, "segs": []}, 2)
        assert unreadable.value.status == timing.Status.RUNTIME_ERROR
        with pytest.raises(timing.TaskFailed, match="described its output wrongly") as crashed:
            t._read_calls({"first": {**first, "shape": [-1]}, "ats": [[], [["addr", 64]]], "odd": {}, "segs": []}, 2)
        assert crashed.value.status == timing.Status.CRASHED
    finally:
        t.j.reader.close()
