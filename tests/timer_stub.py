"""A timing.Timer with only what Timer._after reads, for tests of which flags and figures a
timing phase ends with (tests/judge/test_held_wait.py, tests/judge/test_claims.py)."""
from types import SimpleNamespace

from harness.judge import timing


def after(judged=(), claimed=(), calls: int = 1, cuda: bool = False, held_cpu_s: float = 0.0,
          held_wall_s: float = 0.0, ref_cpu_s: float = 0.0, ref_wall_s: float = 0.0, ref_ms: float = 0.088):
    """The result of _after on held batches whose candidate samples the judge measured at
    `judged` ms and the candidate's events at `claimed` (the reference at `ref_ms`), with its
    processes' CPU while stopped beside either side's batches."""
    t = object.__new__(timing.Timer)
    ref = SimpleNamespace(ms=[ref_ms] * len(judged), claimed_ms=[ref_ms] * len(judged), figure=None)
    sol = SimpleNamespace(ms=list(judged), claimed_ms=list(claimed), figure=None)
    t.result = SimpleNamespace(flags=set(), notes=[], ref=ref, sol=sol, baseline=None, calls=calls)
    t.j = SimpleNamespace(ask=lambda *a, **k: ({}, None), holds=SimpleNamespace(waited_s=0.0, kept_s=0.0))
    t.cotenant_s, t.ref_wall_s = ref_cpu_s, ref_wall_s
    t.held_cotenant_s, t.held_wall_s = held_cpu_s, held_wall_s
    t.holding, t.cuda = True, cuda
    t._after(0.0)
    return t.result
