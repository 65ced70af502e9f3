"""A stream held shut until the host has queued a whole timed call.

CUDA events see the device only if the start event, the call's kernels and
the end event reach the GPU before it runs them: otherwise the gaps while the
host dispatches (Python, allocations, pybind, a model's several torch ops) are
timed as if they were the kernel's. So before the start event a one-thread
kernel on every SM spins until the host writes a word of pinned host memory;
the host queues the start event, the call and the end event, then writes the
word, and the GPU runs everything back to back. Holding every SM (not just the
timed stream) keeps work the call puts on a private stream from running, and
being counted as host time, before the release. (nvbench's "blocking kernel" is the model; this one is written
in PTX and launched through the driver API with ctypes, so no compiler is
needed when kbench starts.)

A call that synchronizes inside (`.item()`, a device synchronize, a copy to the
host) waits for a stream that waits for the host: the kernel gives up after
`timeout_ms` on the GPU's own clock and records that it did, and the caller
times that side another way (timer.py).
"""
from __future__ import annotations

import ctypes
import ctypes.util

_PTX = r"""
.version 7.0
.target sm_70
.address_size 64

// host[0]: the host writes `gen` there to release; host[1]: set to 1 on a timeout.
// Only block 0's first thread reads host memory (a read crosses PCIe; thousands of
// threads polling it would slow the host's own launches); it passes the release
// on through `dev`, a word in device memory the other blocks poll. Their other
// threads exit at once: a block keeps its SM while any of its threads runs.
.visible .entry kbench_hold(.param .u64 host, .param .u64 dev, .param .u32 gen, .param .u64 timeout_ns)
{
    .reg .pred p<5>;
    .reg .b32 r<6>;
    .reg .b64 rd<8>;
    mov.u32 r1, %tid.x;
    setp.ne.u32 p1, r1, 0;
    @p1 bra DONE;
    ld.param.u64 rd1, [host];
    ld.param.u64 rd2, [dev];
    ld.param.u32 r2, [gen];
    ld.param.u64 rd3, [timeout_ns];
    mov.u32 r3, %ctaid.x;
    setp.eq.u32 p2, r3, 0;
    mov.u64 rd4, %globaltimer;
SPIN:
    @p2 ld.volatile.u32 r4, [rd1];
    @!p2 ld.volatile.global.u32 r4, [rd2];
    setp.eq.u32 p3, r4, r2;
    @p3 bra RELEASED;
    mov.u64 rd5, %globaltimer;
    sub.u64 rd6, rd5, rd4;
    setp.lt.u64 p4, rd6, rd3;
    @!p4 bra TIMEOUT;
    nanosleep.u32 100;
    bra SPIN;
TIMEOUT:
    mov.u32 r5, 1;
    st.volatile.u32 [rd1+4], r5;
    bra DONE;
RELEASED:
    @p2 st.volatile.global.u32 [rd2], r2;
DONE:
    ret;
}
"""

_CU_MEMHOSTALLOC_PORTABLE = 0x1
_CU_MEMHOSTALLOC_DEVICEMAP = 0x2
_CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16
_CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97
_CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8


def _driver():
    try:
        return ctypes.CDLL(ctypes.util.find_library("cuda") or "libcuda.so.1")
    except OSError:
        return None


# Resolved when kbench's clocks are imported, before any solution code runs.
_cuda = _driver()
_fns = {}
if _cuda is not None:
    for _name in ("cuModuleLoadData", "cuModuleGetFunction", "cuMemHostAlloc", "cuMemHostGetDevicePointer_v2",
                  "cuLaunchKernel", "cuCtxGetCurrent", "cuCtxGetDevice", "cuDeviceGetAttribute", "cuFuncSetAttribute",
                  "cuMemAlloc_v2", "cuMemsetD32_v2"):
        _fns[_name] = getattr(_cuda, _name, None)


class Unavailable(Exception):
    """No driver, no stream memory access or the PTX did not load: the caller falls back."""


class Gate:
    """One per process and device: `hold(stream)` queues the spin, `release()` opens it."""

    def __init__(self):
        if _cuda is None or not all(_fns.values()):
            raise Unavailable("the CUDA driver library (libcuda) is not loadable from Python")
        ctx = ctypes.c_void_p()
        if _fns["cuCtxGetCurrent"](ctypes.byref(ctx)) != 0 or not ctx.value:
            raise Unavailable("no current CUDA context")
        self._module = ctypes.c_void_p()
        self._fn = ctypes.c_void_p()
        _check(_fns["cuModuleLoadData"](ctypes.byref(self._module), ctypes.c_char_p(_PTX.encode())), "loading the PTX")
        _check(_fns["cuModuleGetFunction"](ctypes.byref(self._fn), self._module, b"kbench_hold"), "finding the kernel")
        host = ctypes.c_void_p()
        _check(_fns["cuMemHostAlloc"](ctypes.byref(host), 64, _CU_MEMHOSTALLOC_PORTABLE | _CU_MEMHOSTALLOC_DEVICEMAP),
               "allocating the pinned word")
        dev = ctypes.c_uint64()
        _check(_fns["cuMemHostGetDevicePointer_v2"](ctypes.byref(dev), host, 0), "mapping the pinned word")
        # The whole device is held: one block per SM, each taking all the shared
        # memory a block may, so no block of any stream (a private stream too) can
        # run beside them until the release.
        ordinal, value = ctypes.c_int(), ctypes.c_int()
        _check(_fns["cuCtxGetDevice"](ctypes.byref(ordinal)), "finding the device")
        _check(_fns["cuDeviceGetAttribute"](ctypes.byref(value), _CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, ordinal),
               "counting SMs")
        self.sms = value.value
        _check(_fns["cuDeviceGetAttribute"](ctypes.byref(value), _CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
                                             ordinal), "reading the shared memory size")
        self.smem = value.value
        _check(_fns["cuFuncSetAttribute"](self._fn, _CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, self.smem),
               "allowing the shared memory")
        self._word = (ctypes.c_uint32 * 2).from_address(host.value)
        self._word[0] = 0
        relay = ctypes.c_uint64()
        _check(_fns["cuMemAlloc_v2"](ctypes.byref(relay), 4), "allocating the relay word")
        _check(_fns["cuMemsetD32_v2"](relay, 0, 1), "clearing the relay word")
        self._args = [ctypes.c_uint64(dev.value), ctypes.c_uint64(relay.value), ctypes.c_uint32(0), ctypes.c_uint64(0)]
        self._params = (ctypes.c_void_p * 4)(*[ctypes.cast(ctypes.byref(a), ctypes.c_void_p) for a in self._args])
        self._gen = 0

    def hold(self, stream_handle: int, timeout_ms: float, whole_device: bool = True) -> None:
        """Queue the spin on `stream_handle` (0: the legacy default stream). The
        previous hold must have finished (the caller synchronized)."""
        # A new generation per hold: neither word needs clearing on the device.
        self._gen = self._gen % 0x7FFFFFFF + 1
        self._word[1] = 0
        self._args[2].value = self._gen
        self._args[3].value = int(timeout_ms * 1e6)
        blocks, smem = (self.sms, self.smem) if whole_device else (1, 0)
        _check(_fns["cuLaunchKernel"](self._fn, blocks, 1, 1, 32, 1, 1, smem, ctypes.c_void_p(stream_handle),
                                      self._params, None), "launching the hold")

    def release(self) -> None:
        self._word[0] = self._gen

    def timed_out(self) -> bool:
        """Whether the last hold gave up by itself (read after a synchronize)."""
        return bool(self._word[1])


def _check(code: int, what: str) -> None:
    if code != 0:
        raise Unavailable(f"CUDA driver error {code} {what}")
