"""The candidate-side guard names what a solution replaced in its own process:
torch functions, kbench's module globals, and the methods of kbench's classes."""
import torch

from harness import timer
from harness.candidate import guard


def test_an_untouched_process_reports_nothing():
    before = guard.snapshot()
    torch.ones(3).sum()  # ordinary work replaces nothing
    assert guard.changed(before) == []


def test_a_replaced_method_on_a_kbench_class_is_named():
    before = guard.snapshot()
    original = timer.CpuClock.finish
    timer.CpuClock.finish = lambda self, *a, **k: original(self, *a, **k)
    try:
        assert guard.changed(before) == ["harness.timer.CpuClock.finish"]
    finally:
        timer.CpuClock.finish = original
    assert guard.changed(before) == []


def test_a_replaced_kbench_global_and_torch_function_are_named():
    before = guard.snapshot()
    original_counter, original_softmax = timer._perf_counter, torch.softmax
    timer._perf_counter = lambda: 0.0
    torch.softmax = lambda *a, **k: original_softmax(*a, **k)
    try:
        assert guard.changed(before) == ["harness.timer._perf_counter", "torch.softmax"]
    finally:
        timer._perf_counter, torch.softmax = original_counter, original_softmax
    assert guard.changed(before) == []
