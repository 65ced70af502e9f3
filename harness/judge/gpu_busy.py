"""Whether the GPU is running kernels right now, by the driver's own counter.

A first call gets 30 s before it is called hung (limits.HANG_FIRST_MIN_S),
because it may compile: Triton's JIT and autotuner, torch.compile. Compiling runs
on the CPU and leaves the GPU idle between short benchmarks; a kernel that never
ends (a deadlocked grid barrier, a spin on a flag nobody sets) keeps it busy
without a pause. The judge samples NVML's utilization counter (the share of its
last sample period, 1/6 s to 1 s, in which any kernel ran) while a first call
runs, so such a hang is known in seconds (remote.Remote._wait_for_reply).

The counter is device-wide and read by the judge, not the candidate: the
candidate cannot make it say idle while its kernel spins, and making it say busy
only gets itself called hung sooner. It cannot tell whose kernels run, so a GPU
shared with another program's work reads busy; the rule then also needs no
compiler running in the candidate (its process table) and a limit that every
other call has already passed (see limits.for_calls).
"""
from __future__ import annotations

import torch

# Above this the sample period was busy throughout; a kernel that spins reads 100.
BUSY_PERCENT = 95


class GpuBusy:
    """Samples one CUDA device's utilization; `busy()` is None where it cannot be read
    (no nvidia-ml-py, a MIG slice, no NVML in this driver), and stays None after."""

    def __init__(self, device: torch.device):
        self.device = device
        self.readable = True

    def busy(self) -> bool | None:
        if not self.readable:
            return None
        try:  # the index is looked up here: a judge whose CUDA fails to start says so in its task, not here
            index = self.device.index if self.device.index is not None else torch.cuda.current_device()
            return torch.cuda.utilization(index) >= BUSY_PERCENT
        except Exception:  # noqa: BLE001 - ModuleNotFoundError, NVMLError_NotSupported, RuntimeError ...
            self.readable = False
            return None
