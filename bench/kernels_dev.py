#!/usr/bin/env python3
"""Standalone dev bench for the four hand-written level-1 kernels.

For each problem: import solutions/kbench/level1/<name>.py, check ModelNew
against a float64 reference of problems/level1/<name>.py on 3 fresh random
input sets plus the problem's check inputs (one ModelNew instance for all),
then time eager reference, torch.compile(reference) and the solution with
CUDA events (L2 flushed outside the events before every timed call,
warm-up, median of N samples).  No dependency on the harness package.

  python3 bench/kernels_dev.py [--only NAME] [--variants] [--skip-compile]
                               [--samples N] [--build-only] [--no-prebuild]

Set TORCH_CUDA_ARCH_LIST / TORCH_EXTENSIONS_DIR / MAX_JOBS in the environment.
The extensions are built first in parallel subprocesses.
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import subprocess
import sys
import time

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NAMES = ["23_Softmax", "95_CrossEntropyLoss", "98_KLDivLoss", "100_HingeLoss"]
COPY_GBPS = 3020.0  # measured H100 device-to-device copy, read + write
ROW_CHUNKED = {"23_Softmax"}  # row-wise op: float64 reference computed per row chunk
REL_L2_TOL = 1e-5
ELEM_RTOL = 1e-4
ELEM_ATOL_RMS = 1e-4


def log(*a):
    print(*a, flush=True)


def load_file(path: str, modname: str):
    spec = importlib.util.spec_from_file_location(modname, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def sol_path(name):
    return os.path.join(ROOT, "solutions", "kbench", "level1", name + ".py")


def prob_path(name):
    return os.path.join(ROOT, "problems", "level1", name + ".py")


def prebuild(names):
    """Build the extensions in parallel (each import runs load_inline)."""
    t0 = time.time()
    procs = {n: subprocess.Popen([sys.executable, os.path.abspath(__file__), "--build-one", n]) for n in names}
    ok = {}
    for n, p in procs.items():
        ok[n] = p.wait() == 0
        log(f"[build] {n}: {'ok' if ok[n] else 'FAILED'} ({time.time() - t0:.0f}s)")
    return ok


def to64(t):
    return t.double() if torch.is_tensor(t) and t.is_floating_point() else t


def poison_like(nbytes: int):
    """Fill a freed block of the output's size with NaN bytes so an unwritten output shows."""
    p = torch.empty(max(nbytes, 1), dtype=torch.uint8, device="cuda")
    p.fill_(0xFF)
    del p


class Acc:
    def __init__(self):
        self.d2 = 0.0
        self.r2 = 0.0
        self.n = 0
        self.excess = -float("inf")  # max(|d| - rtol*|ref|)
        self.nan = False

    def add(self, out, ref):
        o = out.double()
        d = o - ref
        self.nan |= bool(torch.isnan(o).any().item())
        self.d2 += float((d * d).sum().item())
        self.r2 += float((ref * ref).sum().item())
        self.n += ref.numel()
        self.excess = max(self.excess, float((d.abs() - ELEM_RTOL * ref.abs()).max().item()))

    def result(self):
        rel = (self.d2 ** 0.5) / max(self.r2 ** 0.5, 1e-300)
        rms = (self.r2 / max(self.n, 1)) ** 0.5
        ok = (not self.nan) and rel < REL_L2_TOL and self.excess <= ELEM_ATOL_RMS * rms
        return ok, rel, self.excess / max(rms, 1e-300)


def check_one(name, prob, ref_model, inst, inputs):
    """Returns (ok, msg)."""
    with torch.no_grad():
        exp32 = ref_model(*inputs)
        shape, dtype = exp32.shape, exp32.dtype
        nbytes = exp32.numel() * exp32.element_size()
        del exp32
        poison_like(nbytes)
        out = inst(*inputs)
        torch.cuda.synchronize()
        if not torch.is_tensor(out) or out.shape != shape or out.dtype != dtype:
            return False, f"shape/dtype {tuple(getattr(out, 'shape', ()))}/{getattr(out, 'dtype', None)} != {tuple(shape)}/{dtype}"
        acc = Acc()
        if name in ROW_CHUNKED:
            rows = inputs[0].shape[0]
            step = 256
            for r in range(0, rows, step):
                ref = ref_model(*[to64(t[r:r + step]) for t in inputs])
                acc.add(out[r:r + step], ref)
                del ref
        else:
            ref = ref_model(*[to64(t) for t in inputs])
            acc.add(out, ref)
            extra = f" sol={out.item():.9g} ref={ref.item():.9g}" if out.numel() == 1 else ""
            del ref
        ok, rel, ex = acc.result()
        msg = f"relL2={rel:.2e} max(|d|-1e-4|ref|)/rms={ex:.2e}" + ("" if name in ROW_CHUNKED else extra)
        del out
        return ok, msg


def flush_buffer():
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    return torch.empty(2 * l2 // 4, dtype=torch.int32, device="cuda")


FLUSH_MODE = "write"  # "read": evict L2 by reading the buffer (diagnostic; leaves no dirty lines)


def do_flush(flush):
    if FLUSH_MODE == "read":
        flush.max()
    else:
        flush.zero_()


def bench(fn, args, flush, samples, warmup=3):
    with torch.no_grad():
        for _ in range(warmup):
            fn(*args)
        torch.cuda.synchronize()
        st = [torch.cuda.Event(enable_timing=True) for _ in range(samples)]
        en = [torch.cuda.Event(enable_timing=True) for _ in range(samples)]
        for i in range(samples):
            do_flush(flush)
            st[i].record()
            fn(*args)
            en[i].record()
        torch.cuda.synchronize()
        ts = sorted(s.elapsed_time(e) for s, e in zip(st, en))
    return statistics.median(ts), ts[0], ts[-1]


def run_problem(name, args, flush):
    prob = load_file(prob_path(name), f"kbprob_{name}")
    sol = load_file(sol_path(name), f"kbsol_{name}")
    with torch.device("cuda"):
        ref_model = prob.Model(*prob.get_init_inputs())
        inst = sol.ModelNew(*prob.get_init_inputs())
    variants = getattr(sol, "DEV_VARIANTS", None) if args.variants else None
    vlist = list(variants.items()) if variants else [("default", None)]
    default_v = getattr(inst, "variant", None)

    def set_v(v):
        if v is not None:
            inst.variant = v

    # ---- correctness ----
    all_ok = {vn: True for vn, _ in vlist}
    sets = [("rand", s) for s in range(3)] + [("check", 0)]
    for kind, seed in sets:
        torch.manual_seed(1000 + seed if kind == "rand" else 7)
        with torch.device("cuda"):
            inputs = prob.get_inputs() if kind == "rand" else prob.get_check_inputs()[0]
        for vn, v in vlist:
            set_v(v)
            try:
                ok, msg = check_one(name, prob, ref_model, inst, inputs)
            except Exception as e:  # noqa: BLE001
                ok, msg = False, f"EXC {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
            all_ok[vn] &= ok
            log(f"[check] {name} {vn:>10} {kind}{seed}: {'PASS' if ok else 'FAIL'} {msg}")
        del inputs
        torch.cuda.empty_cache()
    set_v(default_v)

    # ---- timing ----
    torch.manual_seed(1)
    with torch.device("cuda"):
        inputs = prob.get_inputs()
    nbytes = sum(t.numel() * t.element_size() for t in inputs if torch.is_tensor(t))
    with torch.no_grad():
        o = ref_model(*inputs)
        nbytes += o.numel() * o.element_size()
        del o
    floor_ms = nbytes / (COPY_GBPS * 1e9) * 1e3
    res = {"floor": floor_ms, "bytes": nbytes}
    res["eager"] = bench(ref_model, inputs, flush, args.samples)[0]
    log(f"[time] {name} eager {res['eager']:.4f} ms")
    if not args.skip_compile:
        try:
            t0 = time.time()
            cm = torch.compile(ref_model)
            with torch.no_grad():
                cm(*inputs)
            torch.cuda.synchronize()
            log(f"[time] {name} torch.compile built in {time.time() - t0:.0f}s")
            res["compile"] = bench(cm, inputs, flush, args.samples)[0]
            log(f"[time] {name} compile {res['compile']:.4f} ms")
            del cm
        except Exception as e:  # noqa: BLE001
            log(f"[time] {name} compile failed: {type(e).__name__}: {e}")
    res["variants"] = {}
    for vn, v in vlist:
        set_v(v)
        try:
            med, lo, hi = bench(inst, inputs, flush, args.samples)
            med2 = bench(inst, inputs, flush, args.samples)[0]  # repeat: the spread is the noise
        except Exception as e:  # noqa: BLE001
            log(f"[time] {name} {vn} failed: {type(e).__name__}: {e}")
            continue
        res["variants"][vn] = (med, lo, hi, med2, all_ok[vn])
        log(f"[time] {name} {vn:>10} {med:.4f} ms (min {lo:.4f} max {hi:.4f}; repeat {med2:.4f}) "
            f"{floor_ms / med * 100:.1f}% of floor-speed, {nbytes / med / 1e6:.0f} GB/s, checks {'PASS' if all_ok[vn] else 'FAIL'}")
    set_v(default_v)
    res["default"] = vlist[0][0] if not variants else next((vn for vn, v in vlist if v == default_v), vlist[0][0])
    del inputs
    torch.cuda.empty_cache()
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", default=None, help="one problem name, e.g. 23_Softmax")
    ap.add_argument("--variants", action="store_true", help="check and time every DEV_VARIANTS entry")
    ap.add_argument("--skip-compile", action="store_true", help="do not time torch.compile")
    ap.add_argument("--samples", type=int, default=30)
    ap.add_argument("--no-prebuild", action="store_true")
    ap.add_argument("--build-only", action="store_true", help="build the extensions (in parallel) and stop")
    ap.add_argument("--flush-mode", choices=["write", "read"], default="write",
                    help="write (default): zero a 2xL2 buffer; read: read it instead (diagnostic)")
    ap.add_argument("--build-one", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()

    if args.build_one:
        t0 = time.time()
        load_file(sol_path(args.build_one), f"kbsol_{args.build_one}")
        log(f"[build] {args.build_one} built/loaded in {time.time() - t0:.0f}s")
        return

    global FLUSH_MODE
    FLUSH_MODE = args.flush_mode
    names = [n for n in NAMES if args.only is None or n == args.only or n.split("_", 1)[-1] == args.only]
    if not names:
        sys.exit(f"unknown problem {args.only}; choose from {NAMES}")
    log(f"torch {torch.__version__}, {torch.cuda.get_device_name(0)}, "
        f"TORCH_CUDA_ARCH_LIST={os.environ.get('TORCH_CUDA_ARCH_LIST')}, TORCH_EXTENSIONS_DIR={os.environ.get('TORCH_EXTENSIONS_DIR')}")
    built = prebuild(names) if not args.no_prebuild else {n: True for n in names}
    if args.build_only:
        sys.exit(0 if all(built.values()) else 1)
    flush = flush_buffer()
    results = {}
    for n in names:
        if not built[n]:
            continue
        try:
            results[n] = run_problem(n, args, flush)
        except Exception as e:  # noqa: BLE001
            log(f"[error] {n}: {type(e).__name__}: {e}")
        torch.cuda.empty_cache()

    log("")
    log(f"{'problem':<22} {'variant':>10} {'floor ms':>9} {'eager ms':>9} {'compile ms':>10} {'ours ms':>9} {'ours/floor':>10} {'GB/s':>6} check")
    for n, r in results.items():
        for vn, (med, lo, hi, med2, ok) in r["variants"].items():
            star = "*" if vn == r["default"] else " "
            comp = f"{r['compile']:.4f}" if "compile" in r else "-"
            log(f"{n:<22} {vn + star:>10} {r['floor']:>9.4f} {r['eager']:>9.4f} {comp:>10} {med:>9.4f} "
                f"{med / r['floor'] * 100:>9.1f}% {r['bytes'] / med / 1e6:>6.0f} {'PASS' if ok else 'FAIL'}")
    log("(* = the variant ModelNew uses by default; ours/floor = time over floor time)")


if __name__ == "__main__":
    main()
