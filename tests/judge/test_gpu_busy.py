"""The judge's reading of whether its GPU runs kernels (harness/judge/gpu_busy.py),
which shortens a first call's limit from 30 s to seconds when its kernel does not
end. Checked against the GPU itself: busy under a kernel that runs for seconds,
idle once it has ended."""
import time

import pytest

pytestmark = pytest.mark.gpu


def test_the_gpu_reads_busy_under_a_long_kernel_and_idle_after():
    import torch

    from harness.judge.gpu_busy import GpuBusy

    device = torch.device("cuda")
    meter = GpuBusy(device)
    torch.cuda.synchronize()
    time.sleep(1.5)  # longer than NVML's sample period: what ran before has left it
    assert meter.busy() is False
    # About 4 s of one spinning thread at the H100's ~1.7-2 GHz; a kernel holds the GPU busy however few SMs it uses.
    torch.cuda._sleep(int(8e9))
    time.sleep(1.5)
    during = []
    for _ in range(3):
        during.append(meter.busy())
        time.sleep(0.2)
    torch.cuda.synchronize()
    time.sleep(1.5)
    assert during == [True, True, True] and meter.busy() is False
