"""A cheap check of every timed call's output: random projections.

The output of each timed call is reduced to one number per tensor,
sum(out * w) with w drawn from a seed the judge picks for that call, and the
judge compares it with the same projection of the reference's output on the
same inputs. A replayed, memoized or skipped call gives a different number;
an honest one differs only by rounding. With w ~ N(0, 1) the difference is
distributed as N(0, |out - ref|^2), so the judge allows FP_SIGMAS times the
check's own L2 tolerance: a false alarm is a 6-sigma event, and a wrong output
(error far above the tolerance) is caught on almost every call.

Used on both sides: the candidate projects its outputs, the judge its
reference's. The projection reads the whole output, as the call that made it
must have written it, so it cannot be computed more cheaply than the output
for the problems kbench evaluates; any work the candidate does here instead
of in the timed call shows in the wall time the judge measures.
"""
from __future__ import annotations

from typing import Any

import torch

FP_SIGMAS = 6.0
_weights: dict[tuple, torch.Tensor] = {}  # one weight vector per task and output: drawn once, not per call


class NotPlain(ValueError):
    """An output that is not exactly a tensor, a number or a list or tuple of them."""


def _leaves(out: Any) -> list:
    # Exact types only (and torch's named tuples, torch.max(x, 1)'s, which are C
    # structures): a subclass's __iter__ would run the solution's code inside the
    # projection, outside the call the judge times.
    if type(out) in (list, tuple) or type(out).__module__ == "torch.return_types":
        return [x for item in out for x in _leaves(item)]
    return [out]


ROW = 4096  # the weights: one row of this many, the same for every row of the output


def _w(seed: int, k: int, device: torch.device) -> torch.Tensor:
    """The weights for output leaf k, drawn once per task (a sample pays one pass
    over its output). Knowing them in advance gives no shortcut: the projection
    still needs every element of the output."""
    key = (seed, k, str(device))
    if key not in _weights:
        if len(_weights) > 16:
            _weights.clear()
        gen = torch.Generator(device=device)
        gen.manual_seed(seed * 1000003 + k)
        _weights[key] = torch.randn(ROW, generator=gen, device=device, dtype=torch.float32)
    return _weights[key]


def _project_rows(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """[sum(row * w), |row|^2] in float64 for each row of `x` (n outputs of one
    shape, flattened, float32): one batched product of float32 row dot products,
    whatever n is (rounding near 1e-7 * sqrt(ROW), far inside the 1e-5 the
    comparison allows)."""
    n, numel = x.shape
    full = numel - numel % ROW
    if full:  # splitting a stride-1 dimension: a view, no copy
        proj = torch.matmul(x[:, :full].reshape(n, full // ROW, ROW), w).sum(1, dtype=torch.float64)
    else:
        proj = torch.zeros(n, dtype=torch.float64, device=x.device)
    if full < numel:
        proj = proj + torch.mv(x[:, full:].double(), w[: numel - full].double())
    # float32 is plenty for the norm (it only scales the allowance), and a float64
    # copy of a 6 GB output would not fit beside it.
    norm = torch.linalg.vector_norm(x, dim=1).double() if numel else proj * 0
    return torch.stack([proj, norm * norm], 1)


# On a GPU, outputs of one shape are stacked and projected together up to this many
# bytes: a burst's 16 outputs cost one batch of kernel launches, not 16 (on an H100
# host each output's projection took ~0.2 ms of dispatch, and under build load its
# noise exceeded the timing bound's allowance); a large output is projected where it
# lies, without a copy. On the CPU there is no launch to save and the copy costs more.
STACK_BYTES = 64 << 20
STACKS_ON = ("cuda",)  # device types


def project(out: Any, seed: int, trusted: bool = False) -> list[list[float]]:
    """[projection, squared norm] per output leaf (non-tensors: their value, 0)."""
    return project_many([out], seed, trusted)[0]


def project_many(outs: list, seed: int, trusted: bool = False) -> list[list[list[float]]]:
    """project() of each of `outs` (a graph replay's or a burst's kept outputs),
    with one transfer to the host per device for all of them. Untrusted outputs
    (the candidate's) must be exact tensors, numbers, lists and tuples, or
    NotPlain is raised before any of their code runs; the judge's reference
    outputs (`trusted`) may be subclasses and other numbers."""
    results: list[list[list[float]]] = []
    groups: dict[tuple, list[tuple[int, torch.Tensor]]] = {}  # (leaf k, numel, device) -> (output i, flat)
    for i, out in enumerate(outs):
        leaves = _leaves(out)
        results.append([[0.0, 0.0]] * len(leaves))
        for k, t in enumerate(leaves):
            projected = isinstance(t, torch.Tensor) and (trusted or type(t) is torch.Tensor)
            if not projected:
                if not trusted and (isinstance(t, torch.Tensor) or type(t).__module__ != "builtins"):
                    # A subclass's __float__ or __torch_function__ would run its code here.
                    raise NotPlain(f"output {k} is a {type(t).__module__}.{type(t).__qualname__}; "
                                   "return exactly torch.Tensor")
                number = type(t) in (int, float, bool) or (trusted and isinstance(t, (int, float)))
                results[i][k] = [float(t) if number else 0.0, 0.0]
                continue
            t = t.detach()
            if t.is_complex():
                t = torch.view_as_real(t)
            flat = t.reshape(-1)
            if flat.dtype != torch.float32:
                flat = flat.float()
            groups.setdefault((k, flat.numel(), flat.device), []).append((i, flat))
    batches = []  # (leaf k, [(output i, flat)], [n, 2] accumulated on the device)
    for (k, numel, device), members in groups.items():
        per = max(1, STACK_BYTES // max(4 * numel, 1)) if device.type in STACKS_ON else 1
        for at in range(0, len(members), per):
            part = members[at:at + per]
            x = part[0][1].unsqueeze(0) if len(part) == 1 else torch.stack([f for _, f in part])
            batches.append((k, part, _project_rows(x, _w(seed, k, device))))
    by_device: dict = {}
    for batch in batches:
        by_device.setdefault(batch[2].device, []).append(batch)
    for group in by_device.values():
        values = iter(torch.cat([acc for *_, acc in group]).tolist())
        for k, part, _ in group:
            for (i, flat), v in zip(part, values):
                if not all(abs(x) < float("inf") for x in v):  # NaN or Inf: project the finite part
                    finite = torch.nan_to_num(flat, nan=0.0, posinf=0.0, neginf=0.0)
                    v = _project_rows(finite.unsqueeze(0), _w(seed, k, flat.device))[0].tolist()
                results[i][k] = v
    return results


def mismatch(sol: list, ref: list, rel_tolerance: float) -> str | None:
    """Why the candidate's projections cannot come from a correct output, or None."""
    if not isinstance(sol, list) or len(sol) != len(ref):
        return f"{len(sol) if isinstance(sol, list) else '?'} outputs vs {len(ref)}"
    for k, (s, r) in enumerate(zip(sol, ref)):
        if not (isinstance(s, list) and len(s) == 2 and all(isinstance(v, (int, float)) for v in s)):
            return f"output {k}: malformed fingerprint"
        # Two parts. An error independent of the weights moves the projection by about
        # its L2 norm: FP_SIGMAS of the tolerance times the output's norm. An error that
        # scales the output (a normalizer rounded otherwise: every element of a softmax
        # row off by the same 1e-7) moves it by that share of the projection itself,
        # which for an all-positive output is hundreds of times its norm: a correct
        # softmax of 4096 x 393216 on the H100 was refused 'projection 1.221839e+02 vs
        # 1.221839e+02 (allowed +-6.53e-06)'. An output within the tolerance of the
        # reference's scale is within the check's own bound, so the tolerance bounds it.
        tol = max(rel_tolerance, 1e-7)
        allowed = FP_SIGMAS * tol * r[1] ** 0.5 + tol * abs(r[0]) + 1e-30
        if not abs(s[0] - r[0]) <= allowed:  # `not <=` so that NaN fails
            return f"output {k}: projection {s[0]:.6e} vs reference {r[0]:.6e} (allowed +-{allowed:.2e})"
    return None
