"""Held batches (harness/shared/hold.py): nothing runs before the judge releases, the
done word comes after the last call, and the judge's clock from release to done holds
the device's time, not the host's launches."""
import os
import time

import pytest
import torch

from harness.shared import batches, hold

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def test_a_page_is_one_shared_page_of_memory():
    fd = hold.new_page()
    try:
        assert os.fstat(fd).st_size == hold.PAGE
    finally:
        os.close(fd)
    # each side's words sit on cache lines of their own, inside the page
    words = [hold.SIDES[s] + w for s in hold.SIDES for w in (hold.RELEASE, hold.DONE, hold.QUEUED)]
    assert len(set(w * 4 // 64 for w in words)) == len(words)
    assert max(words) * 4 < hold.PAGE


def _release_and_time(page: hold.Page, seq: int) -> float:
    t0 = time.perf_counter()
    page.set("reference", hold.RELEASE, seq)
    while page.word("reference", hold.DONE) != seq:
        if time.perf_counter() - t0 > 10:
            raise AssertionError("the held batch never said it was done")
    return time.perf_counter() - t0


@pytest.mark.gpu
@cuda
@pytest.mark.parametrize("legacy", [True, False], ids=["legacy_default_stream", "side_stream"])
def test_nothing_runs_before_the_release_and_the_clock_holds_the_device_time(legacy):
    dev = torch.device("cuda")
    fd = hold.new_page()
    page = hold.Page(fd, dev)
    os.close(fd)
    try:
        _held_batch_runs_after_its_release(page, dev, legacy)
    finally:
        page.close()


def _held_batch_runs_after_its_release(page: hold.Page, dev: torch.device, legacy: bool) -> None:
    x = torch.randn(1 << 16, device=dev)
    outs = []

    def call(c):
        y = torch.empty_like(c[0])
        torch._foreach_mul_([y], 0.0)  # two launches: a call of several kernels
        y.add_(c[0]).relu_()
        outs.append(y)
        return y

    n = 200
    stream = torch.cuda.default_stream(dev) if legacy else torch.cuda.Stream(dev)
    with torch.cuda.stream(stream):
        b = batches.Eager(call, [[x]] * n)
        b.run(3)  # warm
        torch.cuda.synchronize()
        host_ms, events = batches.queue_held(b, n, dev, page, "reference", 7)
        assert page.word("reference", hold.QUEUED) == n
        time.sleep(0.05)  # the host would long have launched them all
        assert page.word("reference", hold.DONE) != 7, "the batch ran before its release"
        wall = _release_and_time(page, 7)
        torch.cuda.synchronize()
    device_ms = batches.held_ms(events)
    assert torch.equal(b.outs[-1], torch.relu(x))
    # The clock holds the device's time (the events') and a fixed cost, not the host's launches.
    assert wall * 1e3 < device_ms + 2.0, (wall, device_ms, host_ms)
    assert wall * 1e3 < host_ms or host_ms < 2.0


class _FakePage:
    """The words of a hold page, without a GPU: enough for the judge's stall rule."""

    def __init__(self):
        self.words = {}

    def word(self, side, which):
        return self.words.get((side, which), 0)

    def set(self, side, which, value):
        self.words[(side, which)] = value


def test_a_queue_that_stops_counting_is_released_and_says_where():
    from harness.judge.held import _StallWatch

    page = _FakePage()
    stall = _StallWatch(page, "candidate", 9, 0.02)
    for i in range(1, 6):  # counting: never a stall, however long it takes in all
        page.set("candidate", hold.QUEUED, i)
        stall.poll()
        time.sleep(0.012)
    assert stall.stalled is None and page.word("candidate", hold.RELEASE) == 0
    deadline = time.perf_counter() + 1
    while stall.stalled is None and time.perf_counter() < deadline:
        stall.poll()  # stuck at 5: a forward that waits for its own held stream
    assert stall.stalled == 5
    assert page.word("candidate", hold.RELEASE) == 9  # released, to go on unheld
    assert page.word("reference", hold.RELEASE) == 0  # the other side's words untouched
