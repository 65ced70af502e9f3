"""Is the GPU idle? Asked from the judge, with a probe kernel timed on its host clock.

Freezing the candidate (freeze.py) does not stop the work it queued on the
GPU, and the judge cannot see another process's work with CUDA events: events
in the judge's stream read a kernel's own time even while the GPU's time
slices went to the other context. A tiny kernel timed by the host clock can:
on an H100 it took ~20 us with the GPU idle, and ~2.4 ms (one time slice)
while another process's work was queued, until that work drained (EVIDENCE.md,
ipc probe 2026-11-26). So waiting for the GPU to be idle is probing until a
probe comes back fast.
"""
from __future__ import annotations

import time

import torch

from ..shared import stats

_perf = time.perf_counter
# A probe slower than this many times an idle one (and this many seconds more) met other work.
BUSY_FACTOR = 3.0
BUSY_MIN_EXTRA_S = 30e-6


class Drain:
    def __init__(self, device: torch.device):
        self.device = device
        self.buf = torch.zeros(1 << 14, device=device)
        self.copy = torch.empty_like(self.buf)
        for _ in range(5):  # the first launches load the kernel
            self.probe()
        self.idle_s = stats.median([self.probe() for _ in range(21)])
        self.busy_above_s = max(BUSY_FACTOR * self.idle_s, self.idle_s + BUSY_MIN_EXTRA_S)

    def probe(self) -> float:
        """A kernel and a small device-to-device copy, timed on the host: another
        context's queued copies hold the copy engines as its kernels hold the SMs."""
        t0 = _perf()
        self.buf.add_(1.0)
        self.copy.copy_(self.buf)
        torch.cuda.synchronize(self.device)
        return _perf() - t0

    def wait(self, limit_s: float = 60.0, busy_above_s: float | None = None) -> float:
        """Probe until the GPU is idle; the seconds it was found busy (0.0 when the
        first probe was fast). Gives up after `limit_s` (a hang is the caller's to judge).
        `busy_above_s`: a probe slower than this met other work (default: 3x an idle one)."""
        above = busy_above_s or self.busy_above_s
        start = _perf()
        while True:
            if self.probe() <= above:
                return 0.0 if _perf() - start <= above else _perf() - start
            if _perf() - start > limit_s:
                return _perf() - start

    def settle(self, limit_s: float = 60.0) -> float:
        """Seconds until a probe comes back fast, that probe included. After a held batch
        (timing.py) the judge adds this to its measure, and measures it the same way
        after empty held batches for the fixed cost: the first probe after another
        context ran is slow by a context switch (~0.3 ms on an H100), which only that
        calibration can tell from work still running."""
        start = _perf()
        while self.probe() > self.busy_above_s and _perf() - start <= limit_s:
            pass
        return _perf() - start
