"""Replays of several calls in one sample (harness/graph_clock.py): the plan, and
bursts of eager calls, which the judge uses where a CUDA graph is not valid. The
bursts' arithmetic and bookkeeping run on the CPU clock here; on a GPU the same
code runs behind the held stream (tests/test_gpu.py)."""
from __future__ import annotations

import torch

from harness import graph_clock, timer


def _copies(n: int) -> list[list]:
    return [[torch.full((4,), float(i))] for i in range(n)]


def test_a_burst_runs_its_calls_eagerly_over_the_rotating_copies():
    seen = []

    def call(inputs):
        seen.append(float(inputs[0][0]))
        return inputs[0] * 2

    burst = graph_clock.BurstSampler(call, _copies(3), timer.CpuClock(), calls=5, keep_all=True)
    burst.replay()
    assert seen == [0.0, 1.0, 2.0, 0.0, 1.0]
    assert [float(o[0]) for o in burst.outputs()] == [0.0, 2.0, 4.0, 0.0, 2.0]

    # Fresh values written into the copies are what the next burst reads: no call is replayed from memory.
    copies = _copies(2)
    burst = graph_clock.BurstSampler(lambda x: x[0] + 1, copies, timer.CpuClock(), calls=2, keep_all=False)
    burst.replay()
    copies[1][0].fill_(10.0)
    burst.queue()
    s = burst.finish()
    assert [float(o[0]) for o in burst.outputs()] == [11.0]  # only the last call's output is kept
    assert s.clock == "cpu_clock" and s.ms >= 0


def test_a_burst_is_capped_so_its_launches_fit_the_queue_behind_a_held_stream():
    calls = []
    burst = graph_clock.BurstSampler(lambda x: calls.append(1), _copies(1), timer.CpuClock(), calls=200)
    assert burst.calls == graph_clock.BURST_CALLS
    burst.replay()
    assert len(calls) == graph_clock.BURST_CALLS


def test_a_replay_sample_is_per_call_and_named_by_how_it_was_timed():
    held = timer.Sample(32.0, 40.0, 8.0, timer.CudaClock.HELD)
    s = graph_clock._per_call(held, 16, graph_clock.BURST_NAME)
    assert (s.ms, s.wall_ms, s.host_ms, s.clock) == (2.0, 2.5, 0.5, "cuda_burst")
    # A side that synchronizes inside keeps its host-wall clock: the name says what really timed it.
    wall = timer.Sample(32.0, 32.0, None, timer.CudaClock.HOST_WALL)
    s = graph_clock._per_call(wall, 16, graph_clock.NAME)
    assert (s.ms, s.host_ms, s.clock) == (2.0, None, "host_wall")


def test_the_plan_rotates_enough_copies_to_leave_l2_and_refuses_large_calls():
    l2x2 = 100 << 20
    p = graph_clock.plan(0.003, moved_bytes=512 << 10, out_bytes=256 << 10, flush_bytes=l2x2, auto=True)
    assert p.calls == 67  # ~0.2 ms of 3 us calls
    assert p.copies == 67  # each call reads a copy no other call of the replay touched
    p = graph_clock.plan(0.003, moved_bytes=40 << 20, out_bytes=20 << 20, flush_bytes=l2x2, auto=True)
    assert p.copies == 4  # 3 other copies' 120 MB pass through L2 between two reads of one
    assert graph_clock.plan(0.003, moved_bytes=l2x2, out_bytes=1, flush_bytes=l2x2, auto=True) is None
    assert graph_clock.plan(0.003, moved_bytes=l2x2, out_bytes=1, flush_bytes=l2x2, auto=False) is not None
