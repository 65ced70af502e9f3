"""The candidate-side guard names what a solution replaced in its own process:
torch functions, kbench's module globals, and the methods of kbench's classes.
It can only add the tampering flag (nothing the judge relies on is in that process)."""
import torch

from harness.shared import batches, locate
from harness.candidate import guard


def test_an_untouched_process_reports_nothing():
    before = guard.snapshot()
    torch.ones(3).sum()  # ordinary work replaces nothing
    assert guard.changed(before) == []


def test_a_replaced_method_on_a_kbench_class_is_named():
    before = guard.snapshot()
    original = locate.Locator.at
    locate.Locator.at = lambda self, t: original(self, t)
    try:
        touched = guard.changed(before)
        assert "harness.shared.locate.Locator.at" in touched
        assert all(name.startswith("harness.shared.locate.Locator.at") for name in touched)  # and its code
    finally:
        locate.Locator.at = original
    assert guard.changed(before) == []


def test_a_replaced_kbench_global_and_torch_function_are_named():
    before = guard.snapshot()
    original_replay, original_softmax = batches._replay, torch.softmax
    batches._replay = lambda graph: None
    torch.softmax = lambda *a, **k: original_softmax(*a, **k)
    try:
        touched = guard.changed(before)  # (and _replay's code, where torch's is a Python function)
        assert {"harness.shared.batches._replay", "torch.softmax"} <= set(touched)
        assert all(t in ("harness.shared.batches._replay", "harness.shared.batches._replay.__code__", "torch.softmax")
                   for t in touched)
    finally:
        batches._replay, torch.softmax = original_replay, original_softmax
    assert guard.changed(before) == []


def test_a_swapped_code_object_is_named():
    """Assigning a function's __code__ leaves the function object (what the
    guard first recorded) where it was, and changes what it does."""
    before = guard.snapshot()
    fn = batches.Eager.run
    original = fn.__code__

    def run(self, n, log=None):
        self.outs = []  # no calls at all

    fn.__code__ = run.__code__
    try:
        assert guard.changed(before) == ["harness.shared.batches.Eager.run.__code__"]
    finally:
        fn.__code__ = original
    assert guard.changed(before) == []


