"""A held pair (Timer._held_pair) compares the candidate's outputs before it lets the
candidate run again. The outputs it reads are views of the candidate's memory, valid while
it is frozen; the request for the candidate's claim (its own events) continues it. Asked
between the read and the comparison, a worker thread that launches each call's kernel after
forward returns would finish its outputs during that request, untimed, and be compared
finished (thread_after_forward.py; the 1.45x its twin read on an H200 was the twin's zero
fill, not this: timing.py). The order is what these stand-ins record; the GPU run of the
fixture is tests/cli/test_adversarial.py's."""
from types import SimpleNamespace

import torch

from harness.judge import held, timing


class _Drain:
    def wait(self, **_):
        return 0.0

    def settle(self):
        return 0.0


def _timer(events: list) -> timing.Timer:
    t = object.__new__(timing.Timer)
    t.spent = timing.Spent()
    t.call_host_s = 0.0
    t.fixed_s = t.ref_fixed_s = 0.0
    t.cuda = True
    t.j = SimpleNamespace(
        holds=SimpleNamespace(
            queue=lambda n, limit, host_s: events.append("queue") or held.Queued(1, {"host_ms": 1.0}, None),
            release=lambda side, seq, limit, stopped_cpu=None: events.append("release") or 0.001,
            stopped_cpu_s=0.0, stopped_cpu_read={},
            claim=lambda seq: events.append("claim (the candidate runs)") or 0.9,
        ),
        sync=lambda: None, note_threads=lambda reply: None, drain=_Drain(), device=torch.device("cpu"),
        remote=SimpleNamespace(freezer=SimpleNamespace(cpu_seconds=lambda: 0.0, cpu_by_member=lambda: {})))
    t.held_cotenant_s = t.held_wall_s = 0.0
    t._draw = lambda n: events.append("draw")
    t._write_lent = lambda n: events.append("write")
    t._flush = lambda: None
    t._read_calls = lambda reply, n: events.append("read") or ["out"] * n
    t._eager_reference = lambda: None
    t._reference_and_compare = lambda batch, outs, n, graph, keep: events.append("compare") or ((0.001, 0.9, 1.0), None)
    return t


def test_outputs_are_compared_before_the_candidate_is_asked_anything_else(monkeypatch):
    monkeypatch.setattr(timing.Timer, "limit", property(lambda self: None))
    events: list = []
    p = _timer(events)._held_pair(4)
    assert events == ["draw", "queue", "write", "release", "read", "compare", "claim (the candidate runs)"]
    assert p.sol[1] == 0.9  # the claim still reaches the pair


def test_the_stopped_candidates_cpu_is_counted_through_the_settle_after_the_done_word(monkeypatch):
    """The measure runs until the GPU is idle after the done word (drain.settle): CPU the
    stopped candidate's processes used in that part counts against it too (Timer._after)."""
    monkeypatch.setattr(timing.Timer, "limit", property(lambda self: None))
    t = _timer([])
    t.j.holds.stopped_cpu_s, t.j.holds.stopped_cpu_read = 0.02, {7: 1.0}  # 20 ms inside release
    t.j.remote.freezer.cpu_by_member = lambda: {7: 1.3, 8: 0.1}  # 0.3 s more, and a new process's 0.1 s
    t._held_pair(4)
    assert abs(t.held_cotenant_s - 0.42) < 1e-9
