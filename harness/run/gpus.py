"""Which GPU a kbench GPU index names, for the processes kbench starts and for results.

`--gpus 0,1` counts the GPUs kbench itself sees. Under CUDA_VISIBLE_DEVICES=2,3
those are the host's GPUs 2 and 3, so a judge pinned to index 0 must be given
CUDA_VISIBLE_DEVICES=2, not 0 (which would be another job's GPU), and results
name GPU 2, as nvidia-smi does. A run uses every GPU kbench sees unless --gpus
narrows it (choose), and says which on its first line (describe). No torch here:
kbench's process uses it before anything imports torch.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

from ..records import UserError


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


# ---- which GPUs a run uses ---------------------------------------------------------
# A user who gets 4 GPUs expects all 4 used, as torchrun, pytest-xdist's `-n auto` and
# Dask's LocalCUDACluster do: on a 4-GPU host the old default (the first GPU) ran all
# 19 tasks of a set on GPU 0 while three idled. CUDA_VISIBLE_DEVICES and --gpus narrow.


@dataclass(frozen=True)
class Gpu:
    """One GPU a run uses: kbench's index (as --gpus counts), its number as nvidia-smi
    gives it, and its name (None where neither NVML nor torch was asked)."""

    index: int
    number: int
    name: str | None = None

    def label(self) -> str:
        return f"{self.number}: {self.name}" if self.name else str(self.number)


def visible_count() -> int | None:
    """How many GPUs kbench sees, without torch: CUDA_VISIBLE_DEVICES's entries where it
    is set, else NVML's count; None where NVML cannot say (torch counts them later)."""
    visible = _visible()
    if visible is not None:
        return len(visible)
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:  # noqa: BLE001 - no driver or no NVML
        return None
    try:
        return int(pynvml.nvmlDeviceGetCount())
    except Exception:  # noqa: BLE001
        return None
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:  # noqa: BLE001
            pass


def choose(wanted: tuple[int, ...], count: int) -> tuple[int, ...]:
    """The indices a run spreads over: `wanted` (from --gpus) checked against the `count`
    GPUs kbench sees, or every one of them when nothing was asked for."""
    if count < 1:
        raise UserError("no CUDA GPU is visible (CUDA_VISIBLE_DEVICES="
                        f"{os.environ.get('CUDA_VISIBLE_DEVICES', 'unset')!r}); check nvidia-smi, or use --device cpu")
    if not wanted:
        return tuple(range(count))
    bad = [g for g in wanted if not 0 <= g < count]
    if bad or len(set(wanted)) != len(wanted):
        which = f"GPU {bad[0]} is not one of the {count} kbench sees (0-{count - 1})" if bad else "an index is repeated"
        raise UserError(f"--gpus {','.join(map(str, wanted))}: {which}; see nvidia-smi and CUDA_VISIBLE_DEVICES")
    return tuple(wanted)


def parse(text: str) -> tuple[int, ...]:
    """--gpus's text: '' or 'all' (every GPU kbench sees: ()), or indices '0,2'."""
    text = text.strip()
    if text in ("", "all"):
        return ()
    try:
        return tuple(int(x) for x in text.split(","))
    except ValueError:
        raise UserError(f"--gpus takes indices like '0,1' or 'all', not '{text}'") from None


def describe(used: list[Gpu], count: int) -> str:
    """The run's first line: which GPUs it uses, as nvidia-smi numbers them, and their cards."""
    numbers = ", ".join(str(g.number) for g in used)
    names = {g.name for g in used}
    if len(names) == 1:
        name = next(iter(names))
        cards = f": {name}" if name else ""
        if len(used) == 1:
            return f"using GPU {numbers} ({len(used)} of {count} visible){cards}"
        return f"using {len(used)} of {count} visible GPUs ({numbers}){cards}"
    return f"using {len(used)} of {count} visible GPUs: " + ", ".join(g.label() for g in used)
