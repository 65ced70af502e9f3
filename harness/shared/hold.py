"""A hold on a CUDA stream that only the judge releases: the device's time for a batch, not the host's.

Both sides queue a timed batch the same way (batches.py runs the calls):
a wait on a word of host memory (cuStreamWaitValue32, served by the GPU's
front end: no SM spins), the calls, then a write of a "done" word
(cuStreamWriteValue32, ordered after every call of the stream). Nothing runs
until the judge writes the release word with a plain CPU store; it starts its
clock right before that store and stops it when it sees the done word, so its
clock holds the device running the calls back to back, not Python launching
them. That covers the legacy default stream too (where models launch, and a
CUDA graph cannot hold a launch). bench/hold_probe.md measured it on an H100:
68 of 68 batches within 5% + 1 us per call of the profiler's kernel sum.

The words live in one page of a memfd the judge makes and lends to the
candidate; each process maps it and registers its mapping with the driver
(cuMemHostRegister, DEVICEMAP). Per side, one cache line each:
  RELEASE: the batch number the held stream may run (the judge writes it),
  DONE:    the batch number the stream finished (the GPU writes it),
  QUEUED:  calls launched so far in this batch (the host loop writes it): the
           judge's sign that a forward that synchronizes is stuck behind the hold.
The candidate can write any word of its side (it maps the page): a DONE written
early ends the judge's clock before the GPU drained, which the judge's drain
probe after the clock catches and adds (timing.py); a RELEASE written early runs
the calls on the inputs of the batch before, whose outputs then fail.
"""
from __future__ import annotations

import ctypes
import mmap
import os

import torch

PAGE = 4096
SIDES = {"candidate": 0, "reference": 256}  # word offsets: each side its own words, 1 KiB apart
RELEASE, DONE, QUEUED = 0, 16, 32  # word offsets within a side, 64 bytes apart

_REGISTER_FLAGS = 0x01 | 0x02  # CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP
_WAIT_GEQ = 0x0  # CU_STREAM_WAIT_VALUE_GEQ: (int32)(*addr - value) >= 0, safe across wrap-around
_WRITE_DEFAULT = 0x0  # CU_STREAM_WRITE_VALUE_DEFAULT: ordered after earlier work, with a memory barrier


class HoldUnavailable(RuntimeError):
    """The driver cannot hold a stream here (no libcuda, no stream memory operations)."""


class _Driver:
    """The driver entry points a hold needs, through ctypes (torch exposes none of them)."""

    def __init__(self):
        try:
            lib = ctypes.CDLL("libcuda.so.1")
        except OSError as e:
            raise HoldUnavailable(f"libcuda.so.1 cannot be loaded: {e}") from None
        u32, u64, vp = ctypes.c_uint32, ctypes.c_uint64, ctypes.c_void_p
        self.register = self._fn(lib, ["cuMemHostRegister_v2", "cuMemHostRegister"], [vp, ctypes.c_size_t, ctypes.c_uint])
        self.unregister = self._fn(lib, ["cuMemHostUnregister"], [vp])
        self.device_pointer = self._fn(lib, ["cuMemHostGetDevicePointer_v2", "cuMemHostGetDevicePointer"],
                                       [ctypes.POINTER(u64), vp, ctypes.c_uint])
        self.wait = self._fn(lib, ["cuStreamWaitValue32_v2", "cuStreamWaitValue32"], [vp, u64, u32, ctypes.c_uint])
        self.write = self._fn(lib, ["cuStreamWriteValue32_v2", "cuStreamWriteValue32"], [vp, u64, u32, ctypes.c_uint])
        self.error_string = self._fn(lib, ["cuGetErrorString"], [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)])

    @staticmethod
    def _fn(lib, names, argtypes):
        for name in names:
            f = getattr(lib, name, None)
            if f is not None:
                f.argtypes, f.restype = argtypes, ctypes.c_int
                return f
        raise HoldUnavailable(f"the CUDA driver has none of {names}")

    def check(self, rc: int, what: str) -> None:
        if rc != 0:
            s = ctypes.c_char_p()
            self.error_string(rc, ctypes.byref(s))
            raise HoldUnavailable(f"{what} failed: {(s.value or b'?').decode()} ({rc})")


_driver: _Driver | None = None


def _drv() -> _Driver:
    global _driver
    if _driver is None:
        _driver = _Driver()
    return _driver


def new_page() -> int:
    """A memfd of one page for a task's holds (the judge's; lent to the candidate)."""
    fd = os.memfd_create("kbench-hold", os.MFD_CLOEXEC)
    os.ftruncate(fd, PAGE)
    return fd


class Page:
    """One process's mapping of the hold page, registered with the driver for `device`."""

    def __init__(self, fd: int, device: torch.device):
        self.mm = mmap.mmap(fd, PAGE, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        self.words = (ctypes.c_uint32 * (PAGE // 4)).from_buffer(self.mm)
        self.device = device
        addr = ctypes.addressof(self.words)
        drv = _drv()
        with torch.cuda.device(device):
            torch.cuda.current_stream(device)  # the primary context, current on this thread
            drv.check(drv.register(ctypes.c_void_p(addr), PAGE, _REGISTER_FLAGS), "cuMemHostRegister")
            base = ctypes.c_uint64()
            drv.check(drv.device_pointer(ctypes.byref(base), ctypes.c_void_p(addr), 0), "cuMemHostGetDevicePointer")
        self.base = base.value
        self.addr = addr

    def close(self) -> None:
        """Unregister and unmap: a later page mapped at the same address could not be
        registered while the driver still held this one (a judge has one page a task,
        for its life; a process that makes several must close each)."""
        with torch.cuda.device(self.device):
            _drv().unregister(ctypes.c_void_p(self.addr))
        del self.words
        self.mm.close()

    def word(self, side: str, which: int) -> int:
        return self.words[SIDES[side] + which]

    def set(self, side: str, which: int, value: int) -> None:
        self.words[SIDES[side] + which] = value & 0xFFFFFFFF

    def hold(self, side: str, stream: torch.cuda.Stream, seq: int) -> None:
        """Queue on `stream`: wait until the judge releases batch `seq`."""
        drv = _drv()
        dptr = self.base + 4 * (SIDES[side] + RELEASE)
        drv.check(drv.wait(ctypes.c_void_p(stream.cuda_stream), dptr, seq & 0xFFFFFFFF, _WAIT_GEQ), "cuStreamWaitValue32")

    def done(self, side: str, stream: torch.cuda.Stream, seq: int) -> None:
        """Queue on `stream`, after its calls: say batch `seq` is done."""
        drv = _drv()
        dptr = self.base + 4 * (SIDES[side] + DONE)
        drv.check(drv.write(ctypes.c_void_p(stream.cuda_stream), dptr, seq & 0xFFFFFFFF, _WRITE_DEFAULT),
                  "cuStreamWriteValue32")
