"""The one wire between the judge and the candidate: messages and tensors.

A message is a JSON header plus raw byte blobs and, on Unix sockets, file
descriptors. JSON, never pickle: the judge decodes what an adversarial
process sent, and unpickling runs code.

Tensors the judge lends cross in two ways, each for a reason:
  * CPU: a memfd the judge maps too, so the judge sees any write the candidate
    makes into its inputs (input_mutation) without asking;
  * CUDA: CUDA IPC handles (torch's own reduction), so gigabytes are not copied
    through the host. The judge allocates what it shares from a private memory
    pool: an IPC handle opens a whole allocation, and the candidate must find
    only its own inputs there.
Each lent tensor carries an id, by which the candidate can say that an output
lies in it. Outputs never cross as values: the candidate says where they are
(locate.py) and the judge reads them (judge/read.py).
"""
from __future__ import annotations

import base64
import itertools
import json
import mmap
import os
import socket
import struct
import weakref
from typing import Any

import torch

MAX_HEADER = 64 << 20  # a header is small; anything bigger is a broken or hostile peer
MAX_BLOB = 64 << 30
MAX_FDS = 64
_LEN = struct.Struct("!QI")  # header bytes, number of blobs


class ChannelError(Exception):
    """The peer closed the channel or sent something that is not a message."""


# ---- framing -------------------------------------------------------------------

def send(sock: socket.socket, header: dict, blobs: list[bytes] = (), fds: list[int] = ()) -> None:
    head = json.dumps(header).encode()
    prefix = _LEN.pack(len(head), len(blobs)) + b"".join(struct.pack("!Q", len(b)) for b in blobs)
    if fds:
        socket.send_fds(sock, [prefix], list(fds))
    else:
        sock.sendall(prefix)
    sock.sendall(head)
    for b in blobs:
        sock.sendall(b)


def _read_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray(n)
    view, got = memoryview(buf), 0
    while got < n:
        k = sock.recv_into(view[got:], n - got)
        if k == 0:
            raise ChannelError("the other side closed the channel")
        got += k
    return bytes(buf)


def recv(sock: socket.socket) -> tuple[dict, list[bytes], list[int]]:
    data, fds, _flags, _addr = socket.recv_fds(sock, _LEN.size, MAX_FDS)
    if not data:
        raise ChannelError("the other side closed the channel")
    data += _read_exact(sock, _LEN.size - len(data)) if len(data) < _LEN.size else b""
    head_len, n_blobs = _LEN.unpack(data)
    if head_len > MAX_HEADER or n_blobs > 4096:
        raise ChannelError(f"message too large ({head_len} header bytes, {n_blobs} blobs)")
    sizes = [struct.unpack("!Q", _read_exact(sock, 8))[0] for _ in range(n_blobs)]
    if any(s > MAX_BLOB for s in sizes):
        raise ChannelError("blob too large")
    try:
        header = json.loads(_read_exact(sock, head_len))
    except ValueError as e:
        raise ChannelError(f"header is not JSON: {e}") from None
    if not isinstance(header, dict):
        raise ChannelError("header is not a JSON object")
    return header, [_read_exact(sock, s) for s in sizes], list(fds)


# ---- tensors -------------------------------------------------------------------

_DTYPES = {str(d).replace("torch.", ""): d for d in (
    torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8, torch.uint8, torch.int16,
    torch.int32, torch.int64, torch.bool, torch.complex64, torch.complex128)}


def dtype_of(name: Any) -> torch.dtype:
    if not isinstance(name, str) or name not in _DTYPES:
        raise ChannelError(f"unknown dtype {name!r}")
    return _DTYPES[name]


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


class Shared:
    """Tensors the judge lends the candidate (inputs, weights). Keeps every
    mapping and fd alive while lent; `close` ends the loan. Each lent tensor has
    an id; `by_id` finds it again while the judge holds it."""

    def __init__(self, device: torch.device):
        self.device = device
        self.maps: list[mmap.mmap] = []
        self.fds: list[int] = []
        self.pool = torch.cuda.MemPool() if device.type == "cuda" else None
        self._ids = itertools.count(1)
        self._lent: weakref.WeakValueDictionary = weakref.WeakValueDictionary()

    def by_id(self, ident: int) -> torch.Tensor | None:
        return self._lent.get(ident)

    def alloc_like(self, t: torch.Tensor) -> torch.Tensor:
        """A contiguous tensor with t's values in memory the candidate can map."""
        return self.alloc(t.shape, t.dtype, t.detach())

    def alloc(self, shape, dtype: torch.dtype, values: torch.Tensor | None = None) -> torch.Tensor:
        """A contiguous tensor in memory the candidate can map (with `values` copied in)."""
        out = self._alloc(shape, dtype, values)
        ident = next(self._ids)
        out._kbench_id = ident  # noqa: SLF001 - travels as the descriptor's id
        self._lent[ident] = out
        return out

    def _alloc(self, shape, dtype: torch.dtype, t: torch.Tensor | None) -> torch.Tensor:
        if self.device.type == "cuda":
            with torch.cuda.use_mem_pool(self.pool):
                out = torch.empty(shape, dtype=dtype, device=self.device)
            if t is not None:
                out.copy_(t)
            return out
        numel = 1
        for s in shape:
            numel *= s
        nbytes = numel * torch.empty((), dtype=dtype).element_size()
        fd = os.memfd_create("kbench-shared", os.MFD_CLOEXEC)
        os.ftruncate(fd, max(nbytes, 1))
        mm = mmap.mmap(fd, max(nbytes, 1))
        self.maps.append(mm)
        self.fds.append(fd)
        if nbytes:
            out = torch.frombuffer(mm, dtype=dtype, count=numel).view(shape)
            if t is not None:
                out.copy_(t)
        else:
            out = torch.empty(shape, dtype=dtype)
        out._kbench_fd = fd  # noqa: SLF001 - which fd carries it
        return out

    def lend(self, values: list) -> list:
        return [self.alloc_like(x) if isinstance(x, torch.Tensor) else x for x in values]

    def close(self) -> None:
        for fd in self.fds:
            os.close(fd)
        self.fds.clear()
        self.maps.clear()


def encode(obj: Any, fds: list[int]) -> Any:
    """JSON-able description of a nested structure of values the judge lends (from
    Shared). Tensors become descriptors: CUDA IPC handles, or memfds on the CPU."""
    if isinstance(obj, torch.Tensor):
        kind = type(obj).__name__ if type(obj) is not torch.Tensor else "Tensor"
        t = obj.detach()
        desc = {"t": kind, "dtype": dtype_name(t.dtype), "shape": list(t.shape), "device": t.device.type,
                "id": getattr(obj, "_kbench_id", 0)}
        if t.device.type == "cuda":
            desc["ipc"] = _ipc_descriptor(t)
        else:
            fd = getattr(obj, "_kbench_fd", None)
            if fd is None:
                raise ChannelError("a CPU tensor lent to the candidate must come from Shared.alloc_like")
            desc["fd"] = len(fds)
            fds.append(fd)
        return desc
    if isinstance(obj, (list, tuple)):
        return {"seq": "tuple" if isinstance(obj, tuple) else "list", "items": [encode(x, fds) for x in obj]}
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return {"v": obj}
    return {"repr": type(obj).__name__}


def decode(desc: Any, fds: list[int], keep: list, ids: list | None = None) -> Any:
    """Inverse of encode. Every field is checked: the peer may be hostile.
    `keep` collects mappings that must outlive the tensors built on them; `ids`,
    if given, collects (tensor, id) of every tensor."""
    if not isinstance(desc, dict):
        raise ChannelError("bad descriptor")
    if "seq" in desc:
        items = desc.get("items")
        if not isinstance(items, list):
            raise ChannelError("bad sequence")
        out = [decode(x, fds, keep, ids) for x in items]
        return tuple(out) if desc["seq"] == "tuple" else out
    if "v" in desc:
        return desc["v"]
    if "repr" in desc:
        return Opaque(str(desc["repr"]))
    dtype = dtype_of(desc.get("dtype"))
    shape = desc.get("shape")
    if not isinstance(shape, list) or not all(isinstance(s, int) and s >= 0 for s in shape):
        raise ChannelError("bad shape")
    numel = 1
    for s in shape:
        numel *= s
    nbytes = numel * torch.empty((), dtype=dtype).element_size()
    if "ipc" in desc:
        t = _from_ipc(desc["ipc"], dtype, shape)
    elif "fd" in desc:
        i = desc["fd"]
        if not isinstance(i, int) or not 0 <= i < len(fds):
            raise ChannelError("bad fd index")
        if numel == 0:
            t = torch.empty(shape, dtype=dtype)
        else:
            mm = mmap.mmap(fds[i], nbytes)
            keep.append(mm)
            t = torch.frombuffer(mm, dtype=dtype, count=numel).view(shape)
    else:
        raise ChannelError("tensor descriptor without data")
    if ids is not None and isinstance(desc.get("id"), int):
        ids.append((t, desc["id"]))
    return Returned(t, str(desc.get("t")), str(desc.get("device"))) if desc.get("t") != "Tensor" else t


class Opaque:
    """A value the candidate returned that is neither a tensor nor a plain number."""

    def __init__(self, kind: str):
        self.kind = kind

    def __repr__(self) -> str:
        return f"<{self.kind}>"


class Returned:
    """A tensor the candidate returned as a subclass: the judge holds its values
    but must fail the structure check with the type the candidate used."""

    def __init__(self, tensor: torch.Tensor, kind: str, device: str):
        self.tensor, self.kind, self.device = tensor, kind, device


# ---- CUDA IPC ------------------------------------------------------------------

def _ipc_descriptor(t: torch.Tensor) -> dict:
    from torch.multiprocessing.reductions import reduce_tensor

    _rebuild, args = reduce_tensor(t)
    (_cls, size, stride, offset, _scls, _dtype, device, handle, storage_bytes, storage_offset, _grad,
     ref_handle, ref_offset, event_handle, event_sync) = args
    b64 = lambda b: base64.b64encode(b).decode() if b is not None else None  # noqa: E731
    return {"size": list(size), "stride": list(stride), "offset": int(offset), "device": int(device),
            "handle": b64(handle), "storage_bytes": int(storage_bytes), "storage_offset": int(storage_offset),
            "ref_handle": b64(ref_handle), "ref_offset": int(ref_offset), "event": b64(event_handle),
            "event_sync": bool(event_sync)}


def _from_ipc(d: Any, dtype: torch.dtype, shape: list) -> torch.Tensor:
    from torch.multiprocessing.reductions import rebuild_cuda_tensor

    if not isinstance(d, dict):
        raise ChannelError("bad IPC descriptor")
    ints = ("offset", "device", "storage_bytes", "storage_offset", "ref_offset")
    if not all(isinstance(d.get(k), int) and d[k] >= 0 for k in ints):
        raise ChannelError("bad IPC descriptor")
    size, stride = d.get("size"), d.get("stride")
    if size != shape or not isinstance(stride, list) or not all(isinstance(s, int) for s in stride):
        raise ChannelError("IPC descriptor does not match its shape")
    unb = lambda s: base64.b64decode(s) if isinstance(s, str) else None  # noqa: E731
    try:
        return rebuild_cuda_tensor(
            torch.Tensor, torch.Size(size), tuple(stride), d["offset"], torch.UntypedStorage, dtype, d["device"],
            unb(d.get("handle")), d["storage_bytes"], d["storage_offset"], False, unb(d.get("ref_handle")),
            d["ref_offset"], unb(d.get("event")), bool(d.get("event_sync")),
        )
    except Exception as e:  # noqa: BLE001 - a forged handle must not take the judge down with a traceback
        raise ChannelError(f"cannot open the CUDA IPC handle: {str(e).splitlines()[0][:200]}") from None
