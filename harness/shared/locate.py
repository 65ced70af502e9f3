"""Where the candidate's outputs lie, so that the judge can read them itself. Used by BOTH processes.

The candidate never sends an output's values: it says where each output tensor
is (its structure and location), and the judge reads the memory while that
process is frozen (judge/read.py). The judge locates its own reference's
outputs with the same code while it times them, throwing the answer away, so
that both sides carry the same bookkeeping per call (batches.py). On a GPU a location is a lent input (an
output written into, or viewing, what the judge lent) or a segment of this
process's allocator, exported once over CUDA IPC (cuda_ipc.py); on the CPU it
is an address the judge reads through /proc/<pid>/mem. Nothing here is
trusted: a wrong location makes the judge read the wrong bytes, which fail
the comparison; no location can make a wrong answer right.

Cheap on purpose: a timed batch describes every call's output inside the
time the judge measures (on the host, while the GPU runs the call), so a
known segment is found by bisection and exported at most once per batch.
"""
from __future__ import annotations

import base64
import bisect
from typing import Any

import torch

from harness.shared import channel, cuda_ipc


class Unlocatable(Exception):
    """An output in memory the judge cannot be given (managed memory, an expandable
    or stream-ordered segment); the message says which and why."""


class Locator:
    def __init__(self, device: torch.device):
        self.device = device
        self.lent: list[tuple[int, int, int]] = []  # (start, end, lent id), of every tensor lent to us
        self._starts: list[int] = []  # known segments, sorted by base
        self._segs: list[tuple[int, int, int]] = []  # (base, end, buffer id)
        self._handles: dict[int, bytes] = {}  # buffer id -> exported handle
        self.reply_segs: list[str] = []  # handles named by the reply being built, base64
        self._reply_index: dict[int, int] = {}  # buffer id -> index in reply_segs
        self._checked: set[int] = set()  # segment bases confirmed (allocation unchanged) in this reply

    def add_lent(self, t: torch.Tensor, ident: int) -> None:
        if t.device.type == "cuda" and t.numel():
            start = t.data_ptr()
            self.lent.append((start, start + t.numel() * t.element_size(), ident))

    def clear_lent(self) -> None:
        self.lent = []

    def begin_reply(self) -> None:
        self.reply_segs, self._reply_index, self._checked = [], {}, set()

    def at(self, t: torch.Tensor) -> list:
        """The location of tensor `t`'s first element, as the wire format has it."""
        ptr = t.data_ptr()
        if t.device.type != "cuda":
            return ["addr", ptr]
        if t.numel() == 0:
            return ["empty"]
        for start, end, ident in self.lent:
            if start <= ptr < end:
                return ["lent", ident, ptr - start]
        i = bisect.bisect_right(self._starts, ptr) - 1
        if i < 0 or ptr >= self._segs[i][1] or self._segs[i][0] not in self._checked:
            i = self._learn(ptr)
        base, _end, ident = self._segs[i]
        k = self._reply_index.get(ident)
        if k is None:
            k = self._reply_index[ident] = len(self.reply_segs)
            self.reply_segs.append(base64.b64encode(self._handles[ident]).decode())
        return ["seg", k, ptr - base]

    def _learn(self, ptr: int) -> int:
        """The segment holding `ptr`, asked of the driver (once per segment per reply:
        a segment freed and allocated again gets a new buffer id and handle)."""
        try:
            base, size, ident = cuda_ipc.allocation(ptr)
            if ident not in self._handles:
                self._handles[ident] = cuda_ipc.export(base)
        except cuda_ipc.IpcError as e:
            raise Unlocatable(f"an output at 0x{ptr:x} is in memory that cannot be shared with the judge ({e}): "
                              "allocate outputs with torch (torch.empty, torch::empty, zeros_like)") from None
        i = bisect.bisect_left(self._starts, base)
        if i < len(self._starts) and self._starts[i] == base:
            self._segs[i] = (base, base + size, ident)
        else:
            self._starts.insert(i, base)
            self._segs.insert(i, (base, base + size, ident))
        self._checked.add(base)
        return i

    # -- descriptions ----------------------------------------------------------
    def describe(self, out: Any) -> Any:
        """The wire description of an output structure: tensors by location."""
        if isinstance(out, torch.Tensor):
            # A subclass is refused by the judge on its type alone: its memory is not
            # located (data_ptr could run the subclass's code, and nothing needs it).
            return {**layout_of(out), "at": self.at(out) if type(out) is torch.Tensor else ["none"]}
        if type(out) in (list, tuple) or type(out).__module__ == "torch.return_types":
            return {"seq": "list" if type(out) is list else "tuple", "items": [self.describe(x) for x in out]}
        if out is None or type(out) in (bool, int, float, str):
            return {"v": out}
        return {"repr": type(out).__name__}


def layout_of(t: torch.Tensor) -> dict:
    kind = type(t).__name__ if type(t) is not torch.Tensor else "Tensor"
    return {"t": kind, "dtype": channel.dtype_name(t.dtype), "shape": list(t.shape), "stride": list(t.stride()),
            "device": t.device.type}


def leaves(out: Any) -> list:
    """The tensors of an output structure, in order (exact list and tuple types, and
    torch's named tuples: a subclass's __iter__ would run the solution's code)."""
    if isinstance(out, torch.Tensor):
        return [out]
    if type(out) in (list, tuple) or type(out).__module__ == "torch.return_types":
        return [x for item in out for x in leaves(item)]
    return []
