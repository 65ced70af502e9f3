#!/usr/bin/env python3
"""Probe (issue 30, section 2): can a judge process time a candidate process's GPU work by a *hold*?

The design under test:
  1. The candidate (a child process) enqueues on its stream a hold (the GPU waits on a word in host memory
     that only the judge sets), then N calls of a kernel, then a "done" write, and replies "queued".
  2. The judge SIGSTOPs it, writes fresh random inputs into buffers it lent over CUDA IPC, starts its host
     clock, releases the hold (one CPU store), and stops the clock when the GPU has drained.
  So the judge's wall time covers the device running N calls back to back, not Python launching them.

What it measures, per kernel x stream (a torch side stream, and the legacy default stream that models use)
x hold kind x batch length (~1, 3, 20 ms of device time):
  - hold wall per call: (release -> drain) less the same for N=0, over N, median of --reps batches.
    Two drain detectors are polled in the same loop: the "done" word in mapped host memory that the GPU
    writes at the batch's end, and cudaEventQuery on an interprocess event the child recorded there.
  - the child's own CUDA events around the N calls, today's eager burst (child launches N and syncs; judge
    wall less N=0), and (3 ms batches) the judge's own events on a judge stream that waits on the child's
    interprocess events (cudaStreamWaitEvent), to see whether those bound the child's work.
  - profiler device time (kernel sum per call), run LAST in the judge process on its own buffers, since
    the profiler slows the launches of the process that ran it.
Hold kinds: "memop" = cuStreamWaitValue32 / cuStreamWriteValue32 on the mapped words (no SM used);
            "spin"  = a 1-thread kernel polling the mapped word (with a device-side timeout) and a 1-thread
                      kernel writing the done word. Both built with NVRTC and launched with the driver API.
Failure cases: queue depth (how many launches fit behind a hold before a launch blocks), a forward that
synchronizes (.item() first call; synchronize() mid-batch), precomputing before the hold, launching on a
stream that is not held, the judge not releasing (its watchdog must), and the spin hold's own timeout.

Usage (repo root):  PYTHONUNBUFFERED=1 python bench/hold_probe.py --out $OUT/hold_probe.json
                    python bench/hold_probe.py --dry     # CPU stand-ins: tests the plumbing, numbers mean nothing
Never changes GPU clocks or settings. Inputs are random (normal_), never zeros. All measures run the same
back-to-back calls on the same buffers (L2-warm), so they compare like with like.
"""
from __future__ import annotations

import argparse
import contextlib
import ctypes
import glob
import json
import mmap
import os
import queue
import signal
import statistics
import sys
import tempfile
import threading
import time
import traceback

import torch
import torch.multiprocessing as mp

pc = time.perf_counter

# ---------------------------------------------------------------- the shared page
# One 4 KiB page of a /dev/shm file, mapped by both processes. The judge writes F with a CPU store;
# the child's GPU reads F (hold) and writes D (done) through cuMemHostRegister(DEVICEMAP); S is the spin
# hold's "timed out at batch k" word; P is the child's launch progress (diagnostics for stalls); A/B are
# stand-ins for interprocess events in --dry. Words sit 64 bytes apart (one cache line each).
F, D, S, P, A, B, H = 0, 16, 32, 48, 64, 80, 96
PAGE = 4096

# CUDA driver constants (cuda.h)
CU_MEMHOSTREGISTER_PORTABLE, CU_MEMHOSTREGISTER_DEVICEMAP = 0x01, 0x02
CU_STREAM_WAIT_VALUE_GEQ = 0x0  # (int32)(*addr - value) >= 0: wraps safely
CU_STREAM_WRITE_VALUE_DEFAULT = 0x0

KERNEL_SRC = r"""
extern "C" __global__ void hold_spin(volatile unsigned int* flag, unsigned int k,
                                     unsigned long long timeout_ns, volatile unsigned int* status) {
  // Poll the judge's word in mapped host memory (each read crosses PCIe) until it reaches k.
  // The device-side timeout means a lost judge cannot wedge the GPU forever: on timeout it marks S=k.
  unsigned long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  while ((int)(*flag - k) < 0) {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    if (t - t0 > timeout_ns) { *status = k; __threadfence_system(); return; }
    __nanosleep(64);
  }
}
extern "C" __global__ void done_write(volatile unsigned int* done, unsigned int k) {
  // Runs after every earlier kernel of the stream has finished; the fence orders the host-visible write.
  __threadfence_system();
  *done = k;
  __threadfence_system();
}
extern "C" __global__ void relu_raw(const float* __restrict__ x, float* __restrict__ y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] > 0.f ? x[i] : 0.f;
}
"""


def quant(xs, q):
    xs = sorted(x for x in xs if x == x)
    if not xs:
        return float("nan")
    k = (len(xs) - 1) * q
    lo = int(k)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def med(xs):
    return quant(xs, 0.5)


def agrees(x, ref):
    """The issue's bar: within 5% + 1 us of the reference (per call)."""
    if x != x or ref != ref:
        return None
    return abs(x - ref) <= 0.05 * ref + 1.0


def map_page(path):
    fd = os.open(path, os.O_RDWR)
    mm = mmap.mmap(fd, PAGE, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
    os.close(fd)
    words = (ctypes.c_uint32 * (PAGE // 4)).from_buffer(mm)
    return mm, words


# ---------------------------------------------------------------- CUDA driver + NVRTC through ctypes
class Driver:
    """The few driver calls torch does not expose: host registration, stream memory ops, module launch.
    They run on the primary context torch made current on this thread."""

    def __init__(self):
        self.lib = ctypes.CDLL("libcuda.so.1")
        u32, u64, vp = ctypes.c_uint32, ctypes.c_uint64, ctypes.c_void_p
        self._reg = self._fn(["cuMemHostRegister_v2", "cuMemHostRegister"], [vp, ctypes.c_size_t, ctypes.c_uint])
        self._dptr = self._fn(["cuMemHostGetDevicePointer_v2", "cuMemHostGetDevicePointer"], [ctypes.POINTER(u64), vp, ctypes.c_uint])
        self._wait = self._fn(["cuStreamWaitValue32_v2", "cuStreamWaitValue32"], [vp, u64, u32, ctypes.c_uint])
        self._write = self._fn(["cuStreamWriteValue32_v2", "cuStreamWriteValue32"], [vp, u64, u32, ctypes.c_uint])
        self._load = self._fn(["cuModuleLoadData"], [ctypes.POINTER(vp), vp])
        self._getf = self._fn(["cuModuleGetFunction"], [ctypes.POINTER(vp), vp, ctypes.c_char_p])
        self._launch = self._fn(["cuLaunchKernel"], [vp] + [ctypes.c_uint] * 7 + [vp, ctypes.POINTER(vp), ctypes.POINTER(vp)])
        self._errstr = self._fn(["cuGetErrorString"], [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)])
        self.fns = {}

    def _fn(self, names, argtypes):
        for n in names:
            f = getattr(self.lib, n, None)
            if f is not None:
                f.argtypes, f.restype = argtypes, ctypes.c_int
                return f
        raise RuntimeError(f"libcuda lacks {names}")

    def check(self, rc, what):
        if rc != 0:
            s = ctypes.c_char_p()
            self._errstr(rc, ctypes.byref(s))
            raise RuntimeError(f"{what}: CUDA driver error {rc} {s.value.decode() if s.value else ''}")

    def register(self, addr, size):
        self.check(self._reg(ctypes.c_void_p(addr), size, CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP), "cuMemHostRegister")
        d = ctypes.c_uint64()
        self.check(self._dptr(ctypes.byref(d), ctypes.c_void_p(addr), 0), "cuMemHostGetDevicePointer")
        return d.value

    def wait32(self, stream, dptr, value):
        self.check(self._wait(ctypes.c_void_p(stream), dptr, value, CU_STREAM_WAIT_VALUE_GEQ), "cuStreamWaitValue32")

    def write32(self, stream, dptr, value):
        self.check(self._write(ctypes.c_void_p(stream), dptr, value, CU_STREAM_WRITE_VALUE_DEFAULT), "cuStreamWriteValue32")

    def build(self, arch):
        image = nvrtc_compile(KERNEL_SRC, arch)
        self._image = ctypes.create_string_buffer(image)  # keep alive
        mod = ctypes.c_void_p()
        self.check(self._load(ctypes.byref(mod), ctypes.cast(self._image, ctypes.c_void_p)), "cuModuleLoadData")
        for name in ("hold_spin", "done_write", "relu_raw"):
            f = ctypes.c_void_p()
            self.check(self._getf(ctypes.byref(f), mod, name.encode()), f"cuModuleGetFunction {name}")
            self.fns[name] = f

    def launch(self, name, grid, block, stream, args):
        ptrs = (ctypes.c_void_p * len(args))(*[ctypes.cast(ctypes.pointer(a), ctypes.c_void_p) for a in args])
        self.check(self._launch(self.fns[name], grid, 1, 1, block, 1, 1, 0, ctypes.c_void_p(stream), ptrs, None), f"cuLaunchKernel {name}")


def nvrtc_compile(src, arch):
    """Compile to a cubin for this GPU (sm_XY); fall back to PTX (compute_XY) that the driver JITs."""
    names = ["libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"]
    tdir = os.path.dirname(torch.__file__)
    names += sorted(glob.glob(os.path.join(tdir, "..", "nvidia", "**", "libnvrtc.so*"), recursive=True))
    names += sorted(glob.glob("/usr/local/cuda*/lib64/libnvrtc.so*"))
    lib, err = None, []
    for n in names:
        if "builtins" in n:
            continue
        try:
            lib = ctypes.CDLL(n)
            break
        except OSError as e:
            err.append(str(e))
    if lib is None:
        raise RuntimeError("no libnvrtc: " + "; ".join(err[-3:]))
    for opt, get_size, get in ((f"--gpu-architecture=sm_{arch}", "nvrtcGetCUBINSize", "nvrtcGetCUBIN"),
                               (f"--gpu-architecture=compute_{arch}", "nvrtcGetPTXSize", "nvrtcGetPTX")):
        prog = ctypes.c_void_p()  # a fresh program per attempt
        rc = lib.nvrtcCreateProgram(ctypes.byref(prog), src.encode(), b"hold.cu", 0, None, None)
        if rc:
            raise RuntimeError(f"nvrtcCreateProgram {rc}")
        opts = (ctypes.c_char_p * 1)(opt.encode())
        rc = lib.nvrtcCompileProgram(prog, 1, opts)
        if rc:
            n = ctypes.c_size_t()
            lib.nvrtcGetProgramLogSize(prog, ctypes.byref(n))
            log = ctypes.create_string_buffer(n.value)
            lib.nvrtcGetProgramLog(prog, log)
            err.append(f"{opt}: rc {rc} {log.value.decode(errors='replace')[:400]}")
            continue
        n = ctypes.c_size_t()
        if getattr(lib, get_size)(prog, ctypes.byref(n)):
            err.append(f"{get_size} failed")
            continue
        buf = ctypes.create_string_buffer(n.value)
        getattr(lib, get)(prog, buf)
        return buf.raw
    raise RuntimeError("nvrtc: " + " | ".join(err))


# ---------------------------------------------------------------- the child's device: GPU and CPU stand-in
class GpuStream:
    def __init__(self, name, tstream):
        self.name, self.t, self.handle = name, tstream, tstream.cuda_stream  # legacy default stream: handle 0


class GpuDev:
    """Child-side device on the real GPU."""
    dry = False

    def __init__(self, words, addr, cyc_per_us):
        torch.cuda.set_device(0)
        torch.zeros(1, device="cuda")  # create the context (the driver calls below use it)
        self.W = words
        self.cyc = cyc_per_us
        self.drv = Driver()
        self.base = self.drv.register(addr, PAGE)  # the whole shared page, mapped for the GPU
        cap = torch.cuda.get_device_capability()
        self.drv.build(f"{cap[0]}{cap[1]}")
        self.streams = {"side": GpuStream("side", torch.cuda.Stream()),
                        "legacy": GpuStream("legacy", torch.cuda.default_stream())}
        self.other = GpuStream("other", torch.cuda.Stream())  # the stream an "unheld" attacker uses
        assert self.streams["legacy"].handle == 0, "torch's default stream is not the legacy stream here"
        # interprocess events (no timing: CUDA forbids timing on them) the judge can query / wait on
        self.ipc = {w: torch.cuda.Event(interprocess=True) for w in ("h", "a", "b")}  # h: just before the hold

    def dptr(self, word):
        return self.base + 4 * word

    def ctx(self, st):
        return torch.cuda.stream(st.t)

    def launch(self, st, f):
        f(st)

    def ev(self):
        return torch.cuda.Event(enable_timing=True)

    def record(self, ev, st):
        ev.record(st.t)

    def ev_ms(self, a, b):
        return a.elapsed_time(b)

    def ipc_record(self, which, st, seq):
        self.ipc[which].record(st.t)

    def ipc_handles(self):
        return {k: v.ipc_handle() for k, v in self.ipc.items()}

    def hold(self, st, k, kind, timeout_ms):
        if kind == "memop":
            self.drv.wait32(st.handle, self.dptr(F), k)
        else:
            self.drv.launch("hold_spin", 1, 1, st.handle,
                            [ctypes.c_uint64(self.dptr(F)), ctypes.c_uint32(k),
                             ctypes.c_uint64(int(timeout_ms * 1e6)), ctypes.c_uint64(self.dptr(S))])

    def done(self, st, k, kind):
        if kind == "memop":
            self.drv.write32(st.handle, self.dptr(D), k)
        else:
            self.drv.launch("done_write", 1, 1, st.handle, [ctypes.c_uint64(self.dptr(D)), ctypes.c_uint32(k)])

    def raw_relu(self, st, x, y):
        n = x.numel()
        self.drv.launch("relu_raw", (n + 255) // 256, 256, st.handle,
                        [ctypes.c_uint64(x.data_ptr()), ctypes.c_uint64(y.data_ptr()), ctypes.c_int(n)])

    def sleep(self, st, us):
        torch.cuda._sleep(int(us * self.cyc))

    def sync(self):
        torch.cuda.synchronize()

    def item_sync(self, x):
        return float(x.sum().item())  # what a forward that calls .item() does: a blocking D2H copy


class DryStream:
    """A CPU stand-in for a CUDA stream: a worker thread running queued closures in order. Its bounded
    queue stands in for the GPU's launch queue, so a launch blocks when it is full, as on the GPU."""

    def __init__(self, name, depth):
        self.name, self.handle = name, name
        self.q = queue.Queue(maxsize=depth)
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self):
        while True:
            f = self.q.get()
            try:
                f()
            except Exception:  # noqa: BLE001
                traceback.print_exc()
            finally:
                self.q.task_done()


class DryEv:
    t = float("nan")


class DryDev:
    dry = True

    def __init__(self, words, depth):
        self.W = words
        self.streams = {"side": DryStream("side", depth), "legacy": DryStream("legacy", depth)}
        self.other = DryStream("other", depth)

    def ctx(self, st):
        return contextlib.nullcontext()

    def launch(self, st, f):
        st.q.put(lambda: f(st))

    def ev(self):
        return DryEv()

    def record(self, ev, st):
        st.q.put(lambda: setattr(ev, "t", pc()))

    def ev_ms(self, a, b):
        return (b.t - a.t) * 1e3

    def ipc_record(self, which, st, seq):
        idx = {"a": A, "b": B, "h": H}[which]
        st.q.put(lambda: self.W.__setitem__(idx, seq))

    def ipc_handles(self):
        return {"a": A, "b": B, "h": H}

    def hold(self, st, k, kind, timeout_ms):
        W = self.W

        def spin():
            t0 = pc()
            lim = timeout_ms / 1e3 if kind == "spin" else 60.0
            while ((W[F] - k) & 0xFFFFFFFF) >= 0x80000000:
                if pc() - t0 > lim:
                    W[S] = k
                    return
                time.sleep(20e-6)
        st.q.put(spin)

    def done(self, st, k, kind):
        st.q.put(lambda: self.W.__setitem__(D, k))

    def raw_relu(self, st, x, y):
        torch.clamp_min(x, 0.0, out=y)

    def sleep(self, st, us):
        t = pc() + us * 1e-6
        while pc() < t:
            pass

    def sync(self):
        for st in list(self.streams.values()) + [self.other]:
            st.q.join()

    def item_sync(self, x):
        self.sync()
        return float(x.sum().item())


# ---------------------------------------------------------------- the candidate (child process)
KERNELS = ["relu", "softmax", "matmul", "sleep50", "sleep2000", "rawrelu"]


def input_shapes(name, dry):
    if name in ("relu", "rawrelu"):
        return [(16, 16384)]
    if name == "softmax":
        return [(256, 16384)]
    if name == "matmul":
        n = 256 if dry else 4096
        return [(n, n), (n, n)]
    return [(1024,)]  # sleeps read nothing; a buffer keeps the plumbing uniform


def make_call(name, dev, xs, box):
    """One call of the kernel, as a function of the stream, launched the way model code launches:
    torch ops on the current stream, the raw kernel on an explicit stream handle (0 = legacy)."""
    if name == "relu":
        return lambda st: box.__setitem__(0, torch.relu(xs[0]))
    if name == "softmax":
        return lambda st: box.__setitem__(0, torch.softmax(xs[0], dim=1))
    if name == "matmul":
        return lambda st: box.__setitem__(0, xs[0] @ xs[1])
    if name.startswith("sleep"):
        us = int(name[5:])
        return lambda st: dev.sleep(st, us)
    if name == "rawrelu":
        y = torch.empty_like(xs[0])
        box[0] = y

        def f(st):
            dev.raw_relu(st, xs[0], y)
        return f
    raise ValueError(name)


def child_main(conn, path, dry, cyc_per_us, dry_depth):
    mm, W = map_page(path)
    try:
        if dry:
            dev = DryDev(W, dry_depth)
            addr = 0
        else:
            addr = ctypes.addressof(W)
            dev = GpuDev(W, addr, cyc_per_us)
        conn.send(("ready", os.getpid(), dev.ipc_handles()))
    except Exception:  # noqa: BLE001
        conn.send(("err", traceback.format_exc()))
        return
    box = [None]
    st_ = {"call": None, "xs": None, "ev": None}
    ca, cb = dev.ev(), dev.ev()

    def prog(i):
        W[P] = i  # diagnostics only: where the child's launch loop is

    while True:
        msg = conn.recv()
        cmd = msg[0]
        try:
            if cmd == "exit":
                conn.send(("bye",))
                break
            if cmd == "setup":  # ("setup", kernel, lent inputs)
                _, name, xs = msg
                box[0] = None
                st_["xs"] = xs
                st_["call"] = make_call(name, dev, xs, box)
                for st in dev.streams.values():  # warm: lazy init (cuBLAS handles, module loads) off the clock
                    with dev.ctx(st):
                        for _ in range(3):
                            dev.launch(st, st_["call"])
                dev.sync()
                conn.send(("ok",))
            elif cmd == "burst":  # today's measure: launch n calls, synchronize, reply
                _, sname, n = msg
                st = dev.streams[sname]
                with dev.ctx(st):
                    dev.record(ca, st)
                    for _ in range(n):
                        dev.launch(st, st_["call"])
                    dev.record(cb, st)
                dev.sync()
                conn.send(("ok", dev.ev_ms(ca, cb)))
            elif cmd in ("queue", "depth"):
                # ("queue", k, stream, hold kind, n, variant, spin timeout ms, ipc seq)
                _, k, sname, hold, n, variant, tmo, seq = msg
                st = dev.streams[sname]
                call = st_["call"]
                W[P] = 0
                t0 = pc()
                info = {}
                with dev.ctx(st):
                    if variant == "precompute":  # attack: do the work before the hold, on old inputs
                        for i in range(n):
                            dev.launch(st, call)
                            prog(i + 1)
                    dev.ipc_record("h", st, seq)  # the judge writes inputs only once this (pre-hold work) is done
                    dev.hold(st, k, hold, tmo)
                    dev.record(ca, st)
                    dev.ipc_record("a", st, seq)
                    if variant == "unheld":  # attack: the work on a stream the hold does not cover
                        with dev.ctx(dev.other):
                            for i in range(n):
                                dev.launch(dev.other, call)
                                dev.launch(dev.other, lambda s: dev.sleep(s, 200))
                                prog(i + 1)
                    elif variant != "precompute":
                        for i in range(n):
                            if variant == "item_first" and i == 0:
                                dev.launch(st, call)
                                info["item"] = dev.item_sync(st_["xs"][0])  # blocks: the GPU is held
                            elif variant == "sync_mid" and i == n // 2:
                                dev.sync()
                                dev.launch(st, call)
                            else:
                                dev.launch(st, call)
                            prog(i + 1)
                    dev.record(cb, st)
                    dev.ipc_record("b", st, seq)
                    dev.done(st, k, hold)
                conn.send(("queued", (pc() - t0) * 1e6, int(W[P]), info))
            elif cmd == "times":  # after a batch: the child's own events, and whether the spin hold timed out
                dev.sync()
                conn.send(("ok", dev.ev_ms(ca, cb), int(W[S])))
            elif cmd == "out":
                dev.sync()
                o = box[0]
                conn.send(("ok", o))
            else:
                conn.send(("err", f"unknown {cmd}"))
        except Exception:  # noqa: BLE001
            conn.send(("err", traceback.format_exc()))
    dev = None  # the page stays mapped (ctypes views of it live on) until the process exits


# ---------------------------------------------------------------- the judge
class Watchdog:
    """The judge must always release: a thread that writes F=k if the batch armed for k is still held at
    its deadline (the main thread may be stuck or slow). Fires are counted and reported."""

    def __init__(self, W):
        self.W, self.k, self.deadline, self.fired = W, None, 0.0, []
        self.lock = threading.Lock()
        threading.Thread(target=self._run, daemon=True).start()

    def arm(self, k, seconds):
        with self.lock:
            self.k, self.deadline = k, pc() + seconds

    def disarm(self):
        with self.lock:
            self.k = None

    def _run(self):
        while True:
            time.sleep(0.001)
            with self.lock:
                if self.k is not None and pc() > self.deadline:
                    if ((self.W[F] - self.k) & 0xFFFFFFFF) >= 0x80000000:
                        self.W[F] = self.k
                        self.fired.append((self.k, pc()))
                    self.k = None


class Judge:
    def __init__(self, a):
        self.a, self.dry = a, a.dry
        self.dev = torch.device("cpu" if self.dry else "cuda:0")
        self.res = {"meta": {}, "depth": {}, "rows": [], "failures": {}, "profiler": {}, "notes": []}
        self.k = 0
        self.seq = 0
        self.gen = torch.Generator(device=self.dev)
        self.gen.manual_seed(int.from_bytes(os.urandom(4), "little"))

    def log(self, *x):
        print(*x, flush=True)

    # ---- plumbing
    def req(self, msg, timeout=120.0):
        self.conn.send(msg)
        if not self.conn.poll(timeout):
            raise RuntimeError(f"child did not answer {msg[0]} in {timeout}s")
        r = self.conn.recv()
        if r[0] == "err":
            raise RuntimeError("child: " + r[1][-1500:])
        return r

    def released(self, k):
        return ((self.W[F] - k) & 0xFFFFFFFF) < 0x80000000

    def release(self, k):
        self.W[F] = k

    def ipc_done(self, which, seq):
        if self.dry:
            return self.W[self.ipc[which]] == seq
        return self.ipc[which].query()

    def stop(self):
        if not self.dry:
            os.kill(self.cpid, signal.SIGSTOP)

    def cont(self):
        if not self.dry:
            os.kill(self.cpid, signal.SIGCONT)

    def sync(self):
        if not self.dry:
            torch.cuda.synchronize()

    def queue(self, sname, hold, n, variant="honest", tmo_ms=5000.0, stall_ms=None, cmd="queue"):
        """Send a batch; wait for "queued". While the hold is unset, a child whose launch progress stops
        for stall_ms is stuck (a launch that blocks on a full queue, or a forward that synchronizes): the
        judge releases the hold so the child can go on, and marks the batch stalled."""
        self.k += 1
        self.seq += 1
        k = self.k
        stall_ms = stall_ms or self.a.stall_ms
        self.W[P] = 0
        t0 = pc()
        self.conn.send((cmd, k, sname, hold, n, variant, tmo_ms, self.seq))
        last_p, last_t, stalled = -1, t0, None
        while not self.conn.poll(0.0005):
            now = pc()
            p = self.W[P]
            if p != last_p:
                last_p, last_t = p, now
            elif stalled is None and (now - last_t) * 1e3 > stall_ms:
                stalled = {"at_call": int(p), "detect_ms": (now - t0) * 1e3, "idle_ms": (now - last_t) * 1e3}
                self.release(k)
            if now - t0 > 60:
                self.release(k)
                raise RuntimeError("child never answered queue")
        r = self.conn.recv()
        if r[0] == "err":
            self.release(k)
            raise RuntimeError("child: " + r[1][-1500:])
        return k, r, stalled, (pc() - t0) * 1e6

    def write_inputs(self):
        """Fresh random inputs, written by the judge into the buffers it lent, after the child queued."""
        t = pc()
        for x in self.xs:
            x.normal_(generator=self.gen)
        self.sync()
        return (pc() - t) * 1e6

    def drain(self, k, seq, limit_s):
        """Poll both drain detectors: the done word (GPU -> mapped host memory) and cudaEventQuery on the
        child's interprocess event 'b'. Returns host times since the release (us), None if not seen."""
        t0 = pc()
        self.release(k)
        t_done = t_ev = None
        while True:
            now = pc()
            if t_done is None and self.W[D] == k:
                t_done = now
            if t_ev is None and self.ipc_done("b", seq):
                t_ev = pc()
            if (t_done is not None and t_ev is not None) or now - t0 > limit_s:
                break
        us = lambda t: None if t is None else (t - t0) * 1e6  # noqa: E731
        return us(t_done), us(t_ev)

    def judge_events_start(self):
        """The alternative: judge's own timing events on its own stream, made to wait on the child's
        interprocess events a (after the hold) and b (after the batch)."""
        if self.dry:  # stand-in: a thread that stamps when the dry 'ipc words' flip
            box = {}
            seq = self.seq

            def th():
                t = pc()
                while self.W[A] != seq and pc() - t < 10:
                    time.sleep(1e-5)
                box["j0"] = pc()
                while self.W[B] != seq and pc() - t < 10:
                    time.sleep(1e-5)
                box["j1"] = pc()
            t = threading.Thread(target=th, daemon=True)
            t.start()
            return (t, box)
        sj = self.jstream
        j0, j1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        sj.wait_event(self.ipc["a"])
        j0.record(sj)
        sj.wait_event(self.ipc["b"])
        j1.record(sj)
        return (j0, j1)

    def judge_events_ms(self, h):
        if self.dry:
            h[0].join(5)
            return (h[1].get("j1", float("nan")) - h[1].get("j0", float("nan"))) * 1e3
        h[1].synchronize()
        return h[0].elapsed_time(h[1])

    def batch(self, sname, hold, n, variant="honest", jev=False, check=False, release=True,
              wd_s=None, tmo_ms=5000.0, expect_ms=1.0):
        """One held batch, end to end. Returns a dict of what the judge saw."""
        prev = [x.clone() for x in self.xs] if check else None
        k, r, stalled, q_us = self.queue(sname, hold, n, variant, tmo_ms=tmo_ms)
        seq = self.seq
        self.stop()  # the candidate can launch nothing more, and cannot touch the flag, while timed
        # work queued before the hold on this stream (a precomputing candidate) must finish before the
        # inputs change, or it could read them: wait for the interprocess event recorded just before the hold
        t = pc()
        while not self.ipc_done("h", seq) and pc() - t < 5.0:
            pass
        prehold_us = (pc() - t) * 1e6
        in_us = self.write_inputs()
        fresh = [x.clone() for x in self.xs] if check else None
        if check:
            self.sync()
        jh = self.judge_events_start() if jev else None
        self.wd.arm(k, wd_s if wd_s is not None else 2.0 + 10 * expect_ms / 1e3)
        if release:
            done_us, ev_us = self.drain(k, seq, limit_s=5.0 + 10 * expect_ms / 1e3)
        else:  # failure case: the judge "forgets"; only the watchdog (or the spin's own timeout) releases
            t0 = pc()
            while self.W[D] != k and pc() - t0 < 10.0:
                pass
            done_us, ev_us = (pc() - t0) * 1e6 if self.W[D] == k else None, None
        self.wd.disarm()
        self.cont()
        rt = self.req(("times",))
        out = {"k": k, "n": n, "queue_us": q_us, "launched": r[2], "stalled": stalled, "input_write_us": in_us, "prehold_wait_us": prehold_us,
               "done_us": done_us, "ev_us": ev_us, "child_ms": rt[1], "spin_timed_out": rt[2] == k,
               "judge_ev_ms": self.judge_events_ms(jh) if jev else None}
        if check:
            o = self.req(("out",))[1]
            ref_new, ref_old = self.ref(fresh), self.ref(prev)
            out["match_fresh"] = self.close(o, ref_new)
            out["match_old"] = self.close(o, ref_old)
            del o
        return out

    # ---- references for output checks (relu family only is checked in the failure cases)
    def ref(self, xs):
        name = self.kname
        if name in ("relu", "rawrelu"):
            return torch.relu(xs[0])
        if name == "softmax":
            return torch.softmax(xs[0], dim=1)
        if name == "matmul":
            return xs[0] @ xs[1]
        return None

    @staticmethod
    def close(o, r):
        if o is None or r is None:
            return None
        return bool(torch.allclose(o.to(r.device), r, rtol=1e-3, atol=1e-3))

    # ---- setup
    def start(self):
        a = self.a
        fd, self.path = tempfile.mkstemp(prefix="kbench_hold_", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
        os.write(fd, b"\0" * PAGE)
        os.close(fd)
        self.mm, self.W = map_page(self.path)
        self.wd = Watchdog(self.W)
        meta = self.res["meta"]
        meta.update({"dry": self.dry, "torch": torch.__version__, "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
                     "argv": sys.argv, "reps": a.reps})
        self.cyc = 0.0
        if not self.dry:
            torch.cuda.set_device(0)
            meta["device"] = torch.cuda.get_device_name(0)
            meta["cuda"] = torch.version.cuda
            self.cyc = self.calibrate_sleep()
            meta["sleep_cycles_per_us"] = self.cyc
            self.jstream = torch.cuda.Stream()
        ctx = mp.get_context("spawn")
        self.conn, cconn = ctx.Pipe()
        self.proc = ctx.Process(target=child_main, args=(cconn, self.path, self.dry, self.cyc, a.dry_depth), daemon=True)
        t = pc()
        self.proc.start()
        if not self.conn.poll(120):
            raise RuntimeError("child did not start")
        r = self.conn.recv()
        if r[0] == "err":
            raise RuntimeError("child start: " + r[1])
        self.cpid = r[1]
        if self.dry:
            self.ipc = r[2]
        else:
            self.ipc = {k: torch.cuda.Event.from_ipc_handle(0, h) for k, h in r[2].items()}
        meta["child_start_s"] = pc() - t
        self.log(f"# hold probe: {meta.get('device', 'CPU dry run')} torch {torch.__version__}; child up in {meta['child_start_s']:.1f}s"
                 + (f"; _sleep {self.cyc:.0f} cycles/us" if self.cyc else ""))

    def calibrate_sleep(self):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        vals = []
        for i in range(4):
            e0.record()
            torch.cuda._sleep(1_000_000)
            e1.record()
            torch.cuda.synchronize()
            if i:
                vals.append(1_000_000 / (e0.elapsed_time(e1) * 1e3))
        return med(vals)

    def setup_kernel(self, name):
        self.kname = name
        self.xs = [torch.randn(s, device=self.dev, generator=self.gen) for s in input_shapes(name, self.dry)]
        self.sync()
        self.req(("setup", name, self.xs))

    # ---- sections
    def depth_section(self):
        """How many launches fit behind a hold before a launch blocks? Caps every held batch below."""
        self.log("\n## queue depth behind a hold (memop hold; launches until the child's launch blocks)")
        M = 3000 if self.dry else self.a.depth_max
        caps = {}
        for name in ("relu", "rawrelu"):
            self.setup_kernel(name)
            for sname in ("side", "legacy"):
                k, r, stalled, q_us = self.queue(sname, "memop", M, stall_ms=50.0, cmd="depth")
                self.stop()
                self.drain(k, self.seq, limit_s=10.0)
                self.cont()
                self.req(("times",))
                depth = stalled["at_call"] if stalled else None
                caps[(name, sname)] = depth if depth is not None else M  # never blocked: cap at what was tried
                self.res["depth"][f"{name}:{sname}"] = {"tried": M, "blocked_at": depth, "stall": stalled, "queue_us": q_us}
                self.log(f"{name:8s} {sname:6s}: " + (f"launch blocked after {depth} calls (seen {stalled['detect_ms']:.0f} ms after the request)"
                                                       if depth is not None else f"all {M} launched without blocking ({q_us / 1e3:.1f} ms)"))
        self.caps = caps

    def cap_for(self, name, sname):
        key = ("rawrelu" if name == "rawrelu" else "relu", sname)
        d = self.caps.get(key)
        return None if d is None else max(1, int(d * 0.8) - 4)

    def kernel_section(self, name):
        a = self.a
        R = a.reps
        self.setup_kernel(name)
        for sname in ("side", "legacy"):
            # pilot: the child's own events over a short burst give the per-call estimate for sizing batches
            m = 3 if name in ("matmul", "sleep2000") else 30
            t_call = self.req(("burst", sname, m))[1] * 1e3 / m
            cap = self.cap_for(name, sname)
            ns = []
            for target_us in a.targets:
                n = max(1, round(target_us / max(t_call, 0.5)))
                if self.dry:
                    n = min(n, 200)
                capped = cap is not None and n > cap
                n = min(n, cap) if capped else n
                if n not in [x[0] for x in ns]:
                    ns.append((n, target_us, capped))
            # burst fixed cost (N=0) and walls, measured per (stream, N) below
            for hold in a.holds:
                fixed = {"done": [], "ev": []}
                for n, target_us, capped in ns:
                    rows = []
                    exp_ms = n * t_call / 1e3
                    for rep in range(R + 1):  # interleave N=0 and N so drift hits both alike; rep 0 is warm-up
                        b0 = self.batch(sname, hold, 0)
                        b1 = self.batch(sname, hold, n, expect_ms=exp_ms)
                        if rep == 0:
                            continue
                        fixed["done"].append(b0["done_us"] if b0["done_us"] is not None else float("nan"))
                        fixed["ev"].append(b0["ev_us"] if b0["ev_us"] is not None else float("nan"))
                        rows.append(b1)
                    # the judge's own events waiting on the child's interprocess events (3 ms batches, memop)
                    jrows = []
                    if hold == "memop" and target_us == 3000 and not a.no_jev:
                        for rep in range(R + 1):
                            jb = self.batch(sname, hold, n, jev=True, expect_ms=exp_ms)
                            if rep:
                                jrows.append(jb)
                    # today's burst at the same N
                    bw, bc = [], []
                    if hold == a.holds[0]:
                        for rep in range(R + 1):
                            t = pc()
                            self.req(("burst", sname, 0))
                            w0 = (pc() - t) * 1e6
                            t = pc()
                            rb = self.req(("burst", sname, n))
                            w1 = (pc() - t) * 1e6
                            if rep:
                                bw.append((w1 - w0) / n)
                                bc.append(rb[1] * 1e3 / n)
                    # one checked batch: the output must match the inputs written after the release
                    chk = self.batch(sname, hold, n, check=True, expect_ms=exp_ms) if name not in ("sleep50", "sleep2000") else None
                    self.summarize(name, sname, hold, n, target_us, capped, rows, fixed, jrows, bw, bc, chk)

    def summarize(self, name, sname, hold, n, target_us, capped, rows, fixed, jrows, bw, bc, chk):
        good = [r for r in rows if r["stalled"] is None and r["done_us"] is not None and not r["spin_timed_out"]]
        fx_d, fx_e = med(fixed["done"]), med(fixed["ev"])
        per = lambda key, fx: [(r[key] - fx) / n for r in good if r[key] is not None]  # noqa: E731
        row = {
            "kernel": name, "stream": sname, "hold": hold, "n": n, "target_us": target_us, "capped_by_queue": capped,
            "batches": len(rows), "bad_batches": len(rows) - len(good),
            "batch_ms": med([r["child_ms"] for r in good]),
            "child_ev_us": med([r["child_ms"] * 1e3 / n for r in good]),
            "hold_done_us": med(per("done_us", fx_d)), "hold_done_p25": quant(per("done_us", fx_d), .25), "hold_done_p75": quant(per("done_us", fx_d), .75),
            "hold_ev_us": med(per("ev_us", fx_e)),
            "hold_raw_us": med([r["done_us"] / n for r in good]),
            "fixed_done_us": fx_d, "fixed_ev_us": fx_e,
            "fixed_done_max_us": max(fixed["done"]) if fixed["done"] else None,
            "ev_minus_done_us": med([r["ev_us"] - r["done_us"] for r in good if r["ev_us"] is not None]),
            "input_write_us": med([r["input_write_us"] for r in good]),
            "queue_host_ms": med([r["queue_us"] / 1e3 for r in good]),
            "burst_us": med(bw) if bw else None, "burst_child_ev_us": med(bc) if bc else None,
            "judge_ev_us": med([r["judge_ev_ms"] * 1e3 / n for r in jrows]) if jrows else None,
            "judge_ev_child_ev_us": med([r["child_ms"] * 1e3 / n for r in jrows]) if jrows else None,
            "judge_ev_raw_ms": [r["judge_ev_ms"] for r in jrows] if jrows else None,
            "check": None if chk is None else {"match_fresh": chk["match_fresh"], "match_old": chk["match_old"]},
            "raw_done_us": [r["done_us"] for r in rows], "raw_child_ms": [r["child_ms"] for r in rows],
            "raw_fixed_done_us": fixed["done"],
        }
        self.res["rows"].append(row)
        f = lambda v, p=2: "-" if v is None or v != v else f"{v:.{p}f}"  # noqa: E731
        self.log(f"{name:9s} {sname:6s} {hold:5s} N={n:<5d}{'*' if capped else ' '} {f(row['batch_ms'], 2):>7s}ms | child {f(row['child_ev_us'])} "
                 f"| hold done {f(row['hold_done_us'])} [{f(row['hold_done_p25'])},{f(row['hold_done_p75'])}] ev {f(row['hold_ev_us'])} raw {f(row['hold_raw_us'])} "
                 f"| burst {f(row['burst_us'])} | judge-ev {f(row['judge_ev_us'])} | fixed {f(fx_d, 1)}/{f(fx_e, 1)} us, in-write {f(row['input_write_us'], 0)} us"
                 f"{'' if not row['bad_batches'] else ' | BAD ' + str(row['bad_batches'])}"
                 f"{'' if chk is None else ' | out fresh=' + str(chk['match_fresh'])}")

    def failure_section(self):
        """Each failure case the hold design must survive, on relu (side stream unless said)."""
        L, fr = self.log, self.res["failures"]
        L("\n## failure cases")
        self.setup_kernel("relu")
        cap = self.cap_for("relu", "side") or 500
        n = min(200, cap)
        # 1. a forward that synchronizes cannot queue behind the hold: the judge sees the launch loop stop
        for variant in ("item_first", "sync_mid"):
            for sname in ("side", "legacy"):
                b = self.batch(sname, "memop", n, variant=variant, check=True)
                fr[f"{variant}:{sname}"] = b
                s = b["stalled"]
                L(f"{variant:10s} {sname:6s}: " + (f"detected stuck at call {s['at_call']} of {n}, {s['detect_ms']:.1f} ms after the request "
                                                  f"(stall rule {self.a.stall_ms:.0f} ms without launch progress); judge released; falls back to burst"
                                                  if s else "NOT detected") + f"; queued reply after {b['queue_us'] / 1e3:.1f} ms")
        # 2. precomputing before the hold: fast, but the outputs belong to the old inputs
        b = self.batch("side", "memop", n, variant="precompute", check=True)
        fr["precompute"] = b
        L(f"precompute : judge waited {b['prehold_wait_us']:.0f} us for the pre-hold event; hold wall {b['done_us']:.1f} us for {n} calls (child events around the held part: {b['child_ms'] * 1e3:.1f} us); output matches fresh inputs: {b['match_fresh']}, "
          f"matches the inputs before the write: {b['match_old']}")
        # 3. launching on a stream the hold does not cover (work + 200 us sleeps, ~20+ ms): does any of it see fresh inputs?
        nu = 100
        b = self.batch("side", "memop", nu, variant="unheld", check=True, expect_ms=30)
        fr["unheld"] = b
        L(f"unheld     : {nu} x (relu + 200us sleep) on an unheld stream; judge's input write took {b['input_write_us']:.0f} us "
          f"(vs ~{med([r['input_write_us'] for r in self.res['rows'] if r['kernel'] == 'relu'] or [float('nan')]):.0f} when honest); "
          f"hold wall {b['done_us']:.1f} us; output matches fresh: {b['match_fresh']}, old: {b['match_old']}")
        # 4. the judge does not release: the watchdog must (memop has no timeout of its own)
        t = pc()
        b = self.batch("side", "memop", n, release=False, wd_s=0.2)
        fr["watchdog"] = {**b, "fired": list(self.wd.fired)}
        L(f"watchdog   : judge withheld the release; done word seen {b['done_us'] / 1e3 if b['done_us'] else float('nan'):.1f} ms later "
          f"(watchdog at 200 ms, fired {len(self.wd.fired)}x); whole batch {(pc() - t) * 1e3:.0f} ms")
        # 5. the spin hold's own device-side timeout, with the watchdog set later than it
        if "spin" in self.a.holds:
            b = self.batch("side", "spin", n, release=False, wd_s=2.0, tmo_ms=100.0, check=True)
            fr["spin_timeout"] = b
            L(f"spin tmo   : device timeout 100 ms, no release: done after {b['done_us'] / 1e3 if b['done_us'] else float('nan'):.1f} ms, "
              f"status says timed out: {b['spin_timed_out']}; output matches fresh: {b['match_fresh']} (inputs were written before the timeout)")
            self.release(self.k)  # the flag was never set for this batch; set it so later batches are sane

    def profiler_section(self):
        """Device time per call by the profiler, in the judge process, on its own buffers, AFTER all timing."""
        from torch.autograd import DeviceType
        from torch.profiler import ProfilerActivity, profile
        self.log("\n## profiler (judge process, after timing)")
        drv = None
        if not self.dry:
            drv = Driver()
            cap = torch.cuda.get_device_capability()
            drv.build(f"{cap[0]}{cap[1]}")
        for name in self.a.kernels:
            xs = [torch.randn(s, device=self.dev, generator=self.gen) for s in input_shapes(name, self.dry)]
            y = torch.empty_like(xs[0])
            if name == "rawrelu":
                if self.dry:
                    fn = lambda: torch.clamp_min(xs[0], 0.0, out=y)  # noqa: E731
                else:
                    nn = xs[0].numel()
                    fn = lambda: drv.launch("relu_raw", (nn + 255) // 256, 256, 0, [ctypes.c_uint64(xs[0].data_ptr()), ctypes.c_uint64(y.data_ptr()), ctypes.c_int(nn)])  # noqa: E731
            elif name.startswith("sleep"):
                us = int(name[5:])
                if self.dry:
                    self.res["profiler"][name] = float(us)
                    self.log(f"{name:9s}: {us:.2f} us/call (nominal; no profiler on dry)")
                    continue
                fn = lambda: torch.cuda._sleep(int(us * self.cyc))  # noqa: E731
            else:
                box = [None]
                call = make_call(name, None, xs, box)
                fn = lambda: call(None)  # noqa: E731
            rows = [r for r in self.res["rows"] if r["kernel"] == name]
            t_est = med([r["child_ev_us"] for r in rows]) if rows else 10.0
            n = int(min(300, max(3, 3000 / max(t_est, 1.0))))
            for _ in range(3):
                fn()
            self.sync()
            acts = [ProfilerActivity.CPU] + ([] if self.dry else [ProfilerActivity.CUDA])
            vals = []
            for _ in range(3):
                with profile(activities=acts) as prof:
                    for _ in range(n):
                        fn()
                    self.sync()
                tot = 0.0
                for e in prof.events():
                    if self.dry:
                        if e.device_type == DeviceType.CPU and e.cpu_parent is None and e.name.startswith("aten::"):
                            tot += e.cpu_time_total
                    elif e.device_type == DeviceType.CUDA:
                        tot += e.time_range.elapsed_us()
                vals.append(tot / n)
            self.res["profiler"][name] = med(vals)
            self.log(f"{name:9s}: {med(vals):.2f} us/call (kernel sum, median of 3 x {n} calls)")

    def table(self):
        prof = self.res["profiler"]
        L = self.log
        L("\n## table: us per call, median over batches. hold = (release->drain) - median(N=0), over N. "
          "ok: within 5% + 1 us of the profiler. * = batch capped by the queue depth.")
        L(f"{'kernel':9s} {'stream':6s} {'hold':5s} {'N':>6s} {'batch':>8s} {'prof':>8s} {'child':>8s} {'hold':>8s} {'hold-ev':>8s} "
          f"{'burst':>8s} {'judge-ev':>8s} {'fixed':>7s} | ok: hold child burst jev")
        ok = lambda v, r: {True: "ok", False: "NO", None: "-"}[agrees(v, r) if v is not None else None]  # noqa: E731
        f = lambda v, p=2: "-" if v is None or v != v else f"{v:.{p}f}"  # noqa: E731
        summary = {}
        for r in self.res["rows"]:
            p = prof.get(r["kernel"], float("nan"))
            r["ok_hold"] = agrees(r["hold_done_us"], p)
            r["ok_burst"] = agrees(r["burst_us"], p) if r["burst_us"] is not None else None
            r["ok_judge_ev"] = agrees(r["judge_ev_us"], p) if r["judge_ev_us"] is not None else None
            summary.setdefault(f"{r['hold']}:{r['target_us'] // 1000}ms", []).append(r["ok_hold"])
            L(f"{r['kernel']:9s} {r['stream']:6s} {r['hold']:5s} {r['n']:>5d}{'*' if r['capped_by_queue'] else ' '} {f(r['batch_ms'], 3):>8s} {f(p):>8s} "
              f"{f(r['child_ev_us']):>8s} {f(r['hold_done_us']):>8s} {f(r['hold_ev_us']):>8s} {f(r['burst_us']):>8s} {f(r['judge_ev_us']):>8s} "
              f"{f(r['fixed_done_us'], 1):>7s} | {ok(r['hold_done_us'], p):4s} {ok(r['child_ev_us'], p):5s} {ok(r['burst_us'], p):5s} {ok(r['judge_ev_us'], p)}")
        self.res["agreement"] = {k: f"{sum(1 for x in v if x)}/{len(v)}" for k, v in summary.items()}
        L("hold within 5% + 1 us of the profiler, by hold kind and target batch: " + ", ".join(f"{k} {v}" for k, v in self.res["agreement"].items()))

    def run(self):
        self.start()
        try:
            self.depth_section()
            self.log("\n## per kernel (columns: child events | hold wall by done word [p25,p75], by ipc event, raw (no N=0 subtraction) "
                     "| burst | judge events on waits | N=0 fixed us done/ev, input write)")
            for name in self.a.kernels:
                if pc() - T_START > self.a.budget_s:  # keep the whole run inside its wall budget
                    self.log(f"[{name}] skipped: {self.a.budget_s:.0f} s budget spent")
                    self.res["notes"].append(f"{name} skipped: budget")
                    continue
                try:
                    self.kernel_section(name)
                except Exception:  # noqa: BLE001
                    self.log(f"[{name}] FAILED:\n{traceback.format_exc()}")
                    self.res["notes"].append(f"{name} failed: {traceback.format_exc()[-800:]}")
            try:
                self.failure_section()
            except Exception:  # noqa: BLE001
                self.log(f"failure section FAILED:\n{traceback.format_exc()}")
                self.res["notes"].append(f"failures failed: {traceback.format_exc()[-800:]}")
        finally:
            self.W[F] = (self.k + 1_000_000) & 0xFFFFFFFF  # release anything still held, whatever happened
            self.cont()
            try:
                self.req(("exit",), timeout=20)
            except Exception:  # noqa: BLE001
                pass
            self.proc.join(10)
            if self.proc.is_alive():
                self.proc.kill()
        try:
            self.profiler_section()
        except Exception:  # noqa: BLE001
            self.log(f"profiler FAILED:\n{traceback.format_exc()}")
        self.table()
        self.res["meta"]["wall_s"] = pc() - T_START
        self.save()
        try:
            os.unlink(self.path)
        except OSError:
            pass

    def save(self):
        paths = []
        if os.environ.get("OUT"):
            paths.append(os.path.join(os.environ["OUT"], "hold_probe.json"))
        if self.a.out and self.a.out not in paths:
            paths.append(self.a.out)
        for p in paths:
            with open(p, "w") as fh:
                json.dump(self.res, fh, indent=1, default=str)
            self.log(f"wrote {p}")
        self.log(f"total wall {self.res['meta']['wall_s']:.1f} s")


T_START = pc()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dry", action="store_true", help="CPU stand-ins: test the plumbing only")
    ap.add_argument("--out", default=None, help="also write the JSON here ($OUT/hold_probe.json is written when OUT is set)")
    ap.add_argument("--reps", type=int, default=None, help="batches per measure (default 20; 3 on --dry)")
    ap.add_argument("--kernels", default=",".join(KERNELS))
    ap.add_argument("--holds", default="memop,spin")
    ap.add_argument("--targets", default="1000,3000,20000", help="batch lengths in us of device time")
    ap.add_argument("--stall-ms", type=float, default=30.0, help="no launch progress this long while held = stuck")
    ap.add_argument("--depth-max", type=int, default=12000, help="launches tried in the queue-depth probe")
    ap.add_argument("--dry-depth", type=int, default=1024, help="the stand-in stream's queue length on --dry")
    ap.add_argument("--budget-s", type=float, default=170.0, help="skip kernels not started by then (failure cases and profiler still run)")
    ap.add_argument("--no-jev", action="store_true", help="skip the judge-events-on-waits measure")
    a = ap.parse_args()
    a.reps = a.reps or (3 if a.dry else 20)
    a.kernels = [k for k in a.kernels.split(",") if k]
    a.holds = [h for h in a.holds.split(",") if h]
    a.targets = [int(t) for t in a.targets.split(",")]
    if a.dry:
        a.targets = [t for t in a.targets if t <= 3000] or a.targets[:1]
    if not a.dry and not torch.cuda.is_available():
        sys.exit("no CUDA device: use --dry")
    Judge(a).run()


if __name__ == "__main__":
    main()
