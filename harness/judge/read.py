"""The judge reads the candidate's outputs itself, while the candidate is frozen.

The candidate says where an output lies (locate.py); this module
turns that into a tensor the judge holds: on a GPU a view of the candidate's
allocator segment, mapped here over CUDA IPC (cuda_ipc.py), or of the judge's
own lent buffer for an output written into a lent input; on the CPU a copy of
the bytes read with process_vm_readv, else through /proc/<pid>/mem. No value
the candidate computed is sent: what is read is what the memory holds after the
call, so an output finished later (on request, by a thread, by a replay) is read
unfinished.

Every field is checked: shape, strides, dtype and the span they cover must
fit inside the memory they name. A view is valid while the candidate is
frozen; whoever keeps a value across the candidate's next request clones it.
"""
from __future__ import annotations

import base64
import binascii
import concurrent.futures
import ctypes
import errno
import os
from typing import Any, Callable

import torch

from ..shared import channel, cuda_ipc


# Allocations mapped at once: a batch of large outputs can hold one each (the allocator
# gives an allocation of over 10 MB a segment of its own).
MAX_MAPS = 8192
READ_LIMIT_S = 10.0  # a read of the candidate's memory that takes longer is blocked, not slow


class OutputUnreadable(Exception):
    """An output whose memory the judge cannot read, or whose description does not
    fit that memory; the message says which."""


def span_bytes(shape: list[int], stride: list[int], itemsize: int) -> int:
    """Bytes from a tensor's first element to the end of its last one."""
    if any(s == 0 for s in shape):
        return 0
    return (sum((s - 1) * st for s, st in zip(shape, stride)) + 1) * itemsize


class Reader:
    def __init__(self, device: torch.device, pid: int, lent: Callable[[int], torch.Tensor | None],
                 on_stuck: Callable[[], None] = lambda: None):
        """`pid`: the candidate's process; `lent(id)`: the judge's tensor lent under that id;
        `on_stuck`: ends the candidate, when a read of its memory blocks."""
        self.device, self.pid, self.lent, self.on_stuck = device, pid, lent, on_stuck
        self._reads = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="kbench-read")
        self._maps: dict[bytes, tuple[int, int]] = {}  # handle -> (address here, allocation size)
        self._mem: int | None = None  # /proc/<pid>/mem, opened once
        self._vm_read = True  # process_vm_readv allowed (_copy)

    def read(self, desc: Any, segs: list | None = None) -> Any:
        """The output structure a reply describes, tensors read from where it says."""
        if not isinstance(desc, dict):
            raise channel.ChannelError("bad output description")
        if "seq" in desc:
            items = desc.get("items")
            if not isinstance(items, list):
                raise channel.ChannelError("bad output sequence")
            out = [self.read(x, segs) for x in items]
            return tuple(out) if desc["seq"] == "tuple" else out
        if "v" in desc:
            v = desc["v"]
            if not (v is None or type(v) in (bool, int, float, str)):
                raise channel.ChannelError("bad output value")
            return v
        if "repr" in desc:
            return channel.Opaque(str(desc["repr"])[:100])
        return self.tensor(desc, desc.get("at"), segs or [])

    def tensor(self, layout: dict, at: Any, segs: list) -> Any:
        dtype, shape, stride, itemsize, span = _checked_layout(layout)
        kind, device = str(layout.get("t")), str(layout.get("device"))
        if kind != "Tensor":  # refused on its type: its values are never read
            return channel.Returned(torch.empty(shape, dtype=dtype, device="meta"), kind[:100], device[:20])
        if span == 0:
            return torch.empty(shape, dtype=dtype, device=device if device in ("cpu", "cuda") else "cpu")
        if not isinstance(at, list) or not at:
            raise channel.ChannelError("bad output location")
        if at[0] == "addr" and device == "cpu" and len(at) == 2 and isinstance(at[1], int):
            raw = self._read_host(at[1], span)
        elif at[0] in ("seg", "lent") and device == "cuda" and len(at) == 3 and _ints(at[1:]):
            raw = self._map_device(at, span, segs)
        else:
            raise channel.ChannelError(f"an output on {device!r} at {str(at)[:60]}")
        if raw.data_ptr() % itemsize:
            raise OutputUnreadable(f"an output at an address not aligned to its {itemsize}-byte elements")
        return raw.view(dtype).as_strided(shape, stride)

    def read_rows(self, layout: Any, ats: list, segs: list) -> list[torch.Tensor] | None:
        """A batch's outputs that are one tensor each, alike in shape, strides and dtype
        (`layout`, the first call's description), at `ats`: read with the layout's checks
        made once, not once per call (a 3 us kernel's batch of 800 calls spent 68 us a call
        reading them one by one, H200). On the CPU every output's bytes are read in one job;
        on a GPU each output is a view of its allocation, mapped once. None where they are
        not laid out so (the caller reads them one by one). Overlapping outputs are the
        caller's to refuse."""
        if not (isinstance(layout, dict) and layout.get("t") == "Tensor" and ats):
            return None
        dtype, shape, stride, itemsize, span = _checked_layout(layout)
        device = str(layout.get("device"))
        if span == 0 or span % itemsize:
            return None
        if device == "cpu":
            if not all(type(a) is list and len(a) == 2 and a[0] == "addr" and type(a[1]) is int for a in ats):
                return None
            raw = self._read_host_many([a[1] for a in ats], span)
            return list(raw.view(dtype).as_strided((len(ats), *shape), (span // itemsize, *stride)).unbind(0))
        if device != "cuda":
            return None
        if not all(type(a) is list and len(a) == 3 and a[0] == "seg" and _ints(a[1:]) and a[2] % itemsize == 0
                   for a in ats):
            return None
        typed: dict[int, tuple[torch.Tensor, int]] = {}  # segment index -> (its memory as `dtype`, its bytes)
        outs = []
        for _, index, offset in ats:
            if index not in typed:
                base, size = self._segment(segs, index)
                if base % itemsize or size % itemsize:
                    return None
                typed[index] = (torch.as_tensor(cuda_ipc.DeviceBytes(base, size), device=self.device).view(dtype), size)
            memory, size = typed[index]
            if offset + span > size:
                raise OutputUnreadable(f"an output of {span} bytes at offset {offset} of a {size}-byte allocation")
            outs.append(memory.as_strided(shape, stride, offset // itemsize))
        return outs

    def _read_host_many(self, addresses: list[int], span: int) -> torch.Tensor:
        """The `span` bytes at each address, one after another, read in one job."""
        out = torch.empty(len(addresses) * span, dtype=torch.uint8)

        def read_all() -> tuple[int, int] | None:
            for i, address in enumerate(addresses):
                got = self._copy(out, i * span, address, span)
                if got != span:
                    return i, got
            return None

        short = self._host_job(read_all, f"the outputs' {len(addresses)} x {span} bytes",
                               f"{len(addresses)} outputs of {span} bytes from 0x{min(addresses):x}")
        if short is not None:
            raise OutputUnreadable(f"read {short[1]} of the output's {span} bytes at 0x{addresses[short[0]]:x}")
        return out

    def _map_device(self, at: list, span: int, segs: list) -> torch.Tensor:
        where, index, offset = at
        if where == "lent":
            t = self.lent(index)
            if t is None:
                raise OutputUnreadable(f"an output in lent buffer {index}, which the judge never lent")
            base, size = t.data_ptr(), t.numel() * t.element_size()
        else:
            base, size = self._segment(segs, index)
        if offset < 0 or offset + span > size:
            raise OutputUnreadable(f"an output of {span} bytes at offset {offset} of a {size}-byte allocation")
        return torch.as_tensor(cuda_ipc.DeviceBytes(base + offset, span), device=self.device)

    def _segment(self, segs: list, index: int) -> tuple[int, int]:
        """(address here, bytes) of the allocation a reply names at `index`, mapped once."""
        if not 0 <= index < len(segs) or not isinstance(segs[index], str):
            raise channel.ChannelError("an output in a segment the reply does not name")
        b64 = segs[index]
        try:
            handle = base64.b64decode(b64, validate=True)
        except (binascii.Error, ValueError):
            raise channel.ChannelError("a segment handle that is not base64") from None
        if handle not in self._maps:
            if len(self._maps) >= MAX_MAPS:
                raise OutputUnreadable(f"outputs in more than {MAX_MAPS} separate allocations")
            try:
                ptr = cuda_ipc.open_handle(handle)
                self._maps[handle] = (ptr, cuda_ipc.address_range(ptr)[1])
            except cuda_ipc.IpcError as e:
                raise OutputUnreadable(f"cannot map the candidate's output memory: {e}") from None
        return self._maps[handle]

    def _read_host(self, address: int, span: int) -> torch.Tensor:
        out = torch.empty(span, dtype=torch.uint8)
        got = self._host_job(lambda: self._copy(out, 0, address, span),
                             f"the output's {span} bytes at 0x{address:x}", f"the output's {span} bytes at 0x{address:x}")
        if got != span:
            raise OutputUnreadable(f"read {got} of the output's {span} bytes at 0x{address:x}")
        return out

    def _copy(self, out: torch.Tensor, at: int, address: int, span: int) -> int:
        """`span` bytes of the candidate's memory at `address` into `out[at:]`; how many were
        read. process_vm_readv first: one copy, where /proc/<pid>/mem goes page by page
        (8 MB of a child's memory: 1.90 ms against 4.06 ms, bench/cpu_read.md), and on the
        CPU path the judge reads every timed call's output. Whatever it cannot read
        (not allowed here, or memory the candidate made unreadable: process_vm_readv does
        not force, /proc/<pid>/mem does) is read through /proc/<pid>/mem, so what is read
        is what it always was."""
        got = 0
        if self._vm_read and _VM_READV is not None and 0 <= address < (1 << 63) and span:
            got = _vm_readv(self.pid, out.data_ptr() + at, address, span)
            if got < 0:
                if ctypes.get_errno() in (errno.EPERM, errno.ENOSYS):
                    self._vm_read = False  # never allowed here: /proc/<pid>/mem from now on
                got = 0
        if got < span:
            got += os.preadv(self._mem, [memoryview(out.numpy())[at + got:at + span]], address + got)
        return got

    def _host_job(self, job: Callable[[], Any], what: str, where: str) -> Any:
        """`job`'s reads of the candidate's memory (_copy). /proc/<pid>/mem is opened first,
        whatever reads it: it is the fallback, and opening it is the permission check."""
        if self._mem is None:
            try:
                self._mem = os.open(f"/proc/{self.pid}/mem", os.O_RDONLY)
            except OSError as e:
                raise OutputUnreadable(f"cannot open the candidate's memory ({e.strerror}): a kernel that forbids "
                                       "a parent to read its child (Yama ptrace_scope 2 or 3)") from None
        try:
            # In a thread with a limit: memory behind userfaultfd or a FUSE mapping can block a
            # read for as long as the (stopped) candidate likes; ending it ends the read.
            return self._reads.submit(job).result(READ_LIMIT_S)
        except concurrent.futures.TimeoutError:
            self.on_stuck()
            raise OutputUnreadable(f"reading {what} blocked for {READ_LIMIT_S:g} s (memory behind userfaultfd or a "
                                   "FUSE file?); candidate killed") from None
        except OSError as e:
            raise OutputUnreadable(f"cannot read {where} in the candidate's memory ({e.strerror})") from None

    def release(self) -> None:
        """Unmap every segment (no view of them may be used after this): an allocation
        the candidate has freed stays in use while it is mapped here."""
        if self._maps and torch.cuda.is_initialized():
            torch.cuda.synchronize(self.device)
        for ptr, _ in self._maps.values():
            try:
                cuda_ipc.close(ptr)
            except cuda_ipc.IpcError:
                pass
        self._maps.clear()

    def close(self) -> None:
        self.release()
        if self._mem is not None:
            os.close(self._mem)
            self._mem = None


class _Iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]


_VM_READV = getattr(ctypes.CDLL(None, use_errno=True), "process_vm_readv", None)
if _VM_READV is not None:
    _VM_READV.restype = ctypes.c_ssize_t
    _VM_READV.argtypes = [ctypes.c_int, ctypes.POINTER(_Iovec), ctypes.c_ulong, ctypes.POINTER(_Iovec),
                          ctypes.c_ulong, ctypes.c_ulong]


def _vm_readv(pid: int, dest: int, address: int, span: int) -> int:
    """process_vm_readv of `span` bytes from `address` in `pid` to `dest` here: bytes read
    (fewer up to an unreadable page), or -1 (errno set)."""
    local, remote = _Iovec(dest, span), _Iovec(address, span)
    return _VM_READV(pid, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)


def _checked_layout(layout: dict) -> tuple[torch.dtype, list[int], list[int], int, int]:
    """(dtype, shape, strides, bytes an element, bytes spanned) of an output's description, checked."""
    dtype = channel.dtype_of(layout.get("dtype"))
    shape, stride = layout.get("shape"), layout.get("stride")
    if not (_ints(shape) and _ints(stride) and len(shape) == len(stride) and len(shape) <= 16):
        raise channel.ChannelError("bad output shape or strides")
    itemsize = torch.empty((), dtype=dtype).element_size()
    return dtype, shape, stride, itemsize, span_bytes(shape, stride, itemsize)


def _ints(xs: Any) -> bool:
    return isinstance(xs, list) and all(type(x) is int and x >= 0 for x in xs)
