"""How fast the judge reads a candidate's outputs on the CPU path (judge/read.py).

A child process holds N MB of float32; the judge's Reader reads them back R times
through each path it has: process_vm_readv with /proc/<pid>/mem for what that cannot
read (the default), and /proc/<pid>/mem alone (the fallback, forced by turning the
first off). Prints the median ms per read of the whole span, and of the span as one
batch of C outputs read at once (read_rows' path).

    python bench/cpu_read.py [--mb 8] [--reads 20] [--calls 6]

Record in bench/cpu_read.md: command, date, host.
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

CHILD = """
import ctypes, sys, time
buf = (ctypes.c_float * (int(sys.argv[1]) * 262144))()
for i in range(0, len(buf), 1024):
    buf[i] = i
print(ctypes.addressof(buf), flush=True)
time.sleep(600)
"""


def _median_ms(fn, reads: int) -> float:
    fn()
    times = []
    for _ in range(reads):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times)


def main() -> None:
    import torch

    from harness.judge.read import Reader

    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=8)
    ap.add_argument("--reads", type=int, default=20)
    ap.add_argument("--calls", type=int, default=6)
    args = ap.parse_args()
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(args.mb)], stdout=subprocess.PIPE, text=True)
    try:
        address = int(child.stdout.readline())
        span = args.mb << 20
        part = span // args.calls
        for name, vm in (("process_vm_readv", True), ("/proc/<pid>/mem", False)):
            reader = Reader(torch.device("cpu"), child.pid, lambda i: None)
            reader._vm_read = vm
            one = _median_ms(lambda: reader._read_host(address, span), args.reads)
            rows = _median_ms(lambda: reader._read_host_many([address + i * part for i in range(args.calls)], part),
                              args.reads)
            print(f"[cpu_read] {name:18} {args.mb} MB: one read {one:.2f} ms; {args.calls} outputs at once {rows:.2f} ms")
            reader.close()
    finally:
        child.kill()
        child.wait()


if __name__ == "__main__":
    main()
