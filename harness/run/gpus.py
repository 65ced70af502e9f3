"""Which GPU a kbench GPU index names, for the processes kbench starts and for results.

`--gpus 0,1` counts the GPUs kbench itself sees. Under CUDA_VISIBLE_DEVICES=2,3
those are the host's GPUs 2 and 3, so a judge pinned to index 0 must be given
CUDA_VISIBLE_DEVICES=2, not 0 (which would be another job's GPU), and results
name GPU 2, as nvidia-smi does. No torch here: kbench's process uses it before
anything imports torch.
"""
from __future__ import annotations

import os


def _visible() -> list[str] | None:
    """CUDA_VISIBLE_DEVICES as a list, or None where it is not set."""
    raw = os.environ.get("CUDA_VISIBLE_DEVICES")
    if raw is None:
        return None
    return [part.strip() for part in raw.split(",") if part.strip()]


def visible_device(index: int) -> str:
    """The CUDA_VISIBLE_DEVICES value that pins a child process to kbench's GPU `index`."""
    visible = _visible()
    if visible is None:
        return str(index)
    if not 0 <= index < len(visible):
        raise IndexError(f"GPU index {index} is not among the {len(visible)} GPUs CUDA_VISIBLE_DEVICES="
                         f"{os.environ['CUDA_VISIBLE_DEVICES']!r} shows")
    return visible[index]


def gpu_number(index: int | None) -> int | None:
    """The GPU kbench's `index` runs on, as nvidia-smi numbers it (the index itself
    where CUDA_VISIBLE_DEVICES names GPUs by UUID); None: the first visible one."""
    visible = _visible()
    position = index or 0
    if visible is None:
        return position
    if position < len(visible) and visible[position].isdigit():
        return int(visible[position])
    return position


def capability(index: int | None) -> tuple[str, str] | None:
    """(name, "major.minor") of kbench's GPU `index` from NVML, in milliseconds and
    without a CUDA context, so that judges can start before kbench imports torch;
    None where NVML cannot say (no driver, MIG, GPUs named otherwise)."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:  # noqa: BLE001 - no NVML: torch will say what there is
        return None
    try:
        visible = _visible()
        entry = visible[index or 0] if visible is not None and (index or 0) < len(visible) else str(index or 0)
        if entry.isdigit():
            handle = pynvml.nvmlDeviceGetHandleByIndex(int(entry))
        elif entry.startswith("GPU-"):
            handle = pynvml.nvmlDeviceGetHandleByUUID(entry)
        else:
            return None
        name = pynvml.nvmlDeviceGetName(handle)
        major, minor = pynvml.nvmlDeviceGetCudaComputeCapability(handle)
        return (name.decode() if isinstance(name, bytes) else name), f"{major}.{minor}"
    except Exception:  # noqa: BLE001
        return None
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:  # noqa: BLE001
            pass
