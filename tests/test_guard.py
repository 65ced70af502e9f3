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
        touched = guard.changed(before)
        assert "harness.timer.CpuClock.finish" in touched
        assert all(name.startswith("harness.timer.CpuClock.finish") for name in touched)  # and its code
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


def test_a_swapped_code_object_is_named():
    """Assigning a function's __code__ leaves the function object (what the
    guard first recorded) where it was, and changes what it does."""
    before = guard.snapshot()
    fn = timer.CpuClock.queue
    original = fn.__code__

    def queue(self, fn):
        self._fn = fn  # no flush

    fn.__code__ = queue.__code__
    try:
        assert guard.changed(before) == ["harness.timer.CpuClock.queue.__code__"]
    finally:
        fn.__code__ = original
    assert guard.changed(before) == []


def test_a_method_shadowed_on_a_kbench_instance_is_named():
    """A solution that finds the candidate's clock through the stack can set a
    `queue` on the instance (one that sleeps instead of flushing), or change its
    class to one that claims kbench's module: nothing global changes, so the
    guard looks at the objects themselves."""
    kinds = (timer.CpuClock, timer.CudaClock)
    clock = timer.CpuClock()
    assert guard.shadowed({"clock": (clock, kinds), "sampler": (None, ())}) == []
    clock.queue = lambda fn: None
    assert guard.shadowed({"clock": (clock, kinds)}) == ["harness.timer.CpuClock.queue on its instance"]

    class Fake:
        def finish(self):
            return None

    assert guard.shadowed({"clock": (Fake(), kinds)}) == [f"the candidate's clock (now a {__name__}.{Fake.__qualname__})"]
    spoof = timer.CpuClock()
    spoof.__class__ = type("CpuClock", (timer.CpuClock,), {"__module__": "harness.timer", "queue": lambda self, fn: None})
    assert guard.shadowed({"clock": (spoof, kinds)}) == ["the candidate's clock (now a harness.timer.CpuClock)"]


def test_a_clock_whose_flush_buffer_was_swapped_or_shrunk_is_named():
    """skip_flush.py swaps the clock's flush buffer for one element: no code and no
    class changes, yet every timed call then runs on warm caches. Shrinking the
    same tensor in place keeps its identity, so its storage and strides count too."""
    clock = timer.CpuClock()
    before = guard.held(clock)
    assert set(before) == {"flush_buf"}
    clock.flush_buf.zero_()  # what every honest queue does
    assert guard.swapped(clock, before) == []
    named = ["harness.timer.CpuClock.flush_buf on its instance (what it holds)"]
    original = clock.flush_buf
    clock.flush_buf = torch.zeros(1, dtype=torch.int32)
    assert guard.swapped(clock, before) == named
    clock.flush_buf = original
    assert guard.swapped(clock, before) == []
    clock.flush_buf.as_strided_((original.numel(),), (0,))  # every read hits one cached element
    assert guard.swapped(clock, before) == named
    clock.flush_buf = torch.empty(8 * 2**20, dtype=torch.int32)
    clock.flush_buf.resize_(1)
    assert guard.swapped(clock, before) == named
