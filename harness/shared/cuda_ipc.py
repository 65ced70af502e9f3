"""CUDA IPC of whole allocations through the driver API: used by BOTH processes.

The candidate's process exports the allocation (a segment of its caching
allocator) that holds an output; the judge opens it and reads the output
itself while the candidate is frozen (judge/read.py). torch's own tensor
sharing is not used for that: it shares a tensor, not its segment, creates a
reference-count file and an event per tensor (0.2-0.5 ms a tensor on an
H100), and refuses a tensor that is itself an import ("Attempted to send CUDA
tensor received from another process": an output written into a lent input).
Here a segment is exported once, a handle is 64 bytes, and the judge maps
each segment once (0.2-0.7 ms on an H100) and reads any output in it.

ctypes on libcuda only (no torch import here, so the candidate side can use it
before solution code runs); both processes call it with torch's primary
context current on the calling thread.
"""
from __future__ import annotations

import ctypes
from typing import Optional

HANDLE_BYTES = 64
_LAZY_ENABLE_PEER_ACCESS = 1


class IpcError(RuntimeError):
    """A driver call failed; the message names the call and the driver's error."""


class _Handle(ctypes.Structure):  # CUipcMemHandle: passed by value to cuIpcOpenMemHandle
    _fields_ = [("reserved", ctypes.c_char * HANDLE_BYTES)]


_lib: Optional[ctypes.CDLL] = None


def _cuda() -> ctypes.CDLL:
    global _lib
    if _lib is None:
        try:
            _lib = ctypes.CDLL("libcuda.so.1")
        except OSError as e:
            raise IpcError(f"no CUDA driver library: {e}") from None
    return _lib


def _check(result: int, what: str) -> None:
    if result != 0:
        text = ctypes.c_char_p()
        _cuda().cuGetErrorString(result, ctypes.byref(text))
        raise IpcError(f"{what} failed: {(text.value or b'?').decode(errors='replace')} ({result})")


def address_range(ptr: int) -> tuple[int, int]:
    """(base, size) of the allocation that holds device address `ptr`."""
    base, size = ctypes.c_uint64(), ctypes.c_size_t()
    _check(_cuda().cuMemGetAddressRange_v2(ctypes.byref(base), ctypes.byref(size), ctypes.c_uint64(ptr)),
           "cuMemGetAddressRange")
    return base.value, size.value


# CUpointer_attribute values (cuda.h)
_ATTR_BUFFER_ID, _ATTR_RANGE_START, _ATTR_RANGE_SIZE = 7, 11, 12


def allocation(ptr: int) -> tuple[int, int, int]:
    """(base, size, buffer id) of the allocation holding device address `ptr`. The
    buffer id is unique per allocation in the process's lifetime: a segment freed
    and allocated again at the same address gets a new one."""
    base, size, ident = ctypes.c_uint64(), ctypes.c_size_t(), ctypes.c_uint64()
    attrs = (ctypes.c_int * 3)(_ATTR_RANGE_START, _ATTR_RANGE_SIZE, _ATTR_BUFFER_ID)
    data = (ctypes.c_void_p * 3)(ctypes.cast(ctypes.byref(base), ctypes.c_void_p),
                                 ctypes.cast(ctypes.byref(size), ctypes.c_void_p),
                                 ctypes.cast(ctypes.byref(ident), ctypes.c_void_p))
    _check(_cuda().cuPointerGetAttributes(ctypes.c_uint(3), attrs, data, ctypes.c_uint64(ptr)),
           "cuPointerGetAttributes")
    return base.value, size.value, ident.value


def export(base: int) -> bytes:
    """The IPC handle of the allocation starting at `base` (cudaMalloc'd memory; an
    imported allocation, managed or stream-ordered memory cannot be exported)."""
    handle = _Handle()
    _check(_cuda().cuIpcGetMemHandle(ctypes.byref(handle), ctypes.c_uint64(base)), "cuIpcGetMemHandle")
    return ctypes.string_at(ctypes.addressof(handle), HANDLE_BYTES)  # .reserved would stop at the first NUL


def open_handle(handle: bytes) -> int:
    """Map another process's allocation into this one; its base address here."""
    if len(handle) != HANDLE_BYTES:
        raise IpcError(f"an IPC handle is {HANDLE_BYTES} bytes, not {len(handle)}")
    ptr = ctypes.c_uint64()
    _check(_cuda().cuIpcOpenMemHandle_v2(ctypes.byref(ptr), _Handle.from_buffer_copy(handle),
                                         ctypes.c_uint(_LAZY_ENABLE_PEER_ACCESS)), "cuIpcOpenMemHandle")
    return ptr.value


def close(ptr: int) -> None:
    _check(_cuda().cuIpcCloseMemHandle(ctypes.c_uint64(ptr)), "cuIpcCloseMemHandle")


class DeviceBytes:
    """`nbytes` of device memory at `ptr`, as __cuda_array_interface__ describes it:
    torch.as_tensor(DeviceBytes(...), device=...) is a uint8 view of it, no copy."""

    def __init__(self, ptr: int, nbytes: int):
        self.__cuda_array_interface__ = {"shape": (nbytes,), "typestr": "|u1", "data": (ptr, False),
                                         "version": 3, "strides": None}
