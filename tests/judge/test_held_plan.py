"""How many calls a held batch holds (Timer._try_holds): a held trial that stops queueing at
call k > 0 met the driver's queue depth (calls of several kernels launch several times) and
is tried again below k; a stop at call 0 is a forward that waits for the GPU, timed in eager
batches. A plan that grows past the queue depth on the last try keeps the last n that held:
an honest two-kernel GELU was timed in eager bursts at 0.36x, not held at 0.69x, when its
third try asked for 672 calls and the queue stopped at 510 (H200, 2026-11-29)."""
from types import SimpleNamespace

from harness.judge import held, timing


def _timer(depth: int, plans: dict[int, int], waits_at_call=None) -> tuple[timing.Timer, list]:
    """A Timer whose held trials queue up to `depth` calls (the driver's queue), or stop at
    call waits_at_call(n) of n (a synchronize), and whose plan after a trial of n calls is
    plans[n]."""
    tried: list[int] = []
    t = object.__new__(timing.Timer)
    t.plans, t.result = [], SimpleNamespace(notes=[])
    t.fixed_s = t.ref_fixed_s = 0.0
    t.budget = SimpleNamespace(fits=lambda s: True)
    t._bind = lambda n: None

    def trial(n):
        tried.append(n)
        if waits_at_call is not None:
            raise held.Stalled("candidate", waits_at_call(n))
        if n > depth:
            raise held.Stalled("candidate", depth)
        return SimpleNamespace(ref=(n * 3e-6,), sol=(n * 5e-6,), busy_before=0.0)

    t._held_trial = trial
    t._plan = lambda ref_s, sol_s: plans[len(tried) and tried[-1]]
    return t, tried


def test_a_plan_grown_past_the_queue_depth_on_the_last_try_keeps_the_n_that_held():
    t, tried = _timer(depth=510, plans={100: 400, 400: 672})
    assert t._try_holds(100) == (400, None)
    assert tried == [100, 400, 672]


def test_a_stop_inside_the_batch_is_tried_again_below_it():
    t, tried = _timer(depth=510, plans={100: 700, 408: 408})
    assert t._try_holds(100) == (408, None)
    assert tried == [100, 700, 408]  # 0.8 x the 510 calls queued


def test_a_forward_that_waits_for_the_gpu_is_not_held():
    t, tried = _timer(depth=800, plans={}, waits_at_call=lambda n: 0)
    n, why = t._try_holds(100)
    assert n == 100 and "waits for the GPU" in why and tried == [100]


def test_stops_inside_every_try_without_one_that_held_are_not_held():
    t, tried = _timer(depth=800, plans={}, waits_at_call=lambda n: n // 2)  # a synchronize halfway, wherever
    n, why = t._try_holds(100)
    assert why is not None and "stopped queueing at call 9 of 16" in why and tried == [100, 40, 16]
