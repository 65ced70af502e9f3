"""When does a solution's time move within one process?

For each problem (the shipped set's solution), ROUNDS times: fresh inputs with
the same values (the old ones freed), kbench's warm-up, then blocks of 5
samples alternating reference and solution, as kbench's timer takes them. One
line per round: its time since the process started, the solution's median and
each block's medians; so a slow stretch shows whether it follows new inputs or
comes at any time. With --copies N the blocks rotate over N copies of the
inputs (does averaging over allocations help?). Run it beside
`nvidia-smi --query-gpu=... -lms 100` to line it up with clocks and power.

    python bench/drift_probe.py [--rounds 8] [--blocks 12] [--copies 1] [PROBLEM ...]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
DEFAULT = ("98_KLDivLoss", "100_HingeLoss")


def _build(path: str) -> None:
    from harness.load import import_file

    import_file(path, "probe_build_" + Path(path).stem)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--blocks", type=int, default=12)
    ap.add_argument("--copies", type=int, default=1, help="input copies per round; block k times copy k mod N")
    ap.add_argument("problems", nargs="*", default=DEFAULT)
    a = ap.parse_args()
    os.environ.setdefault("TORCH_EXTENSIONS_DIR", "/tmp/kbench-probe-ext")
    paths = [str(ROOT / "solutions" / "kbench" / "level1" / f"{p}.py") for p in a.problems]
    with ProcessPoolExecutor(len(paths), mp_context=get_context("spawn")) as pool:
        list(pool.map(_build, paths))  # the builds, in parallel; below they load from the cache
    import torch

    from harness.load import import_file
    from harness.timer import CudaClock, _warm_up

    t_start = time.time()
    print(f"process start (unix) {t_start:.3f}")
    dev = torch.device("cuda")
    clock = CudaClock(dev)
    for p in a.problems:
        prob = import_file(str(ROOT / "problems" / "level1" / f"{p}.py"), "drift_p_" + p)
        _build(str(ROOT / "solutions" / "kbench" / "level1" / f"{p}.py"))
        sol_mod = sys.modules["probe_build_" + p]
        with dev:
            ref = prob.Model(*prob.get_init_inputs())
            sol = sol_mod.ModelNew(*prob.get_init_inputs())
        print(f"\n{p}: per round, block medians 'ref/sol ms' (5 samples each), t = s since start")
        medians = []
        for r in range(a.rounds):
            inputs = copies = None
            torch.cuda.empty_cache()
            torch.manual_seed(0)  # the same values every round: kbench's copies of a task see the same
            with dev:
                inputs = prob.get_inputs()
            copies = [inputs] + [[x.clone() for x in inputs] for _ in range(a.copies - 1)]
            _warm_up(lambda: ref(*inputs), clock, 0.2)
            _warm_up(lambda: sol(*inputs), clock, 0.2)
            t0 = time.time() - t_start
            cells, sols, all_s = [], [], []
            for b in range(a.blocks):
                x = copies[b % len(copies)]
                rb = statistics.median([clock.sample(lambda: ref(*x))[0] for _ in range(5)])
                s5 = [clock.sample(lambda: sol(*x))[0] for _ in range(5)]
                all_s += s5
                sb = statistics.median(s5)
                cells.append(f"{rb:.3f}/{sb:.4f}")
                sols.append(sb)
            copies = None
            medians.append(statistics.median(all_s))
            print(f"round {r} t={t0:.2f}-{time.time() - t_start:.2f}: sol median {statistics.median(all_s):.4f}, "
                  f"spread {max(sols) / min(sols) - 1:.1%}: " + " ".join(cells))
        print(f"{p}, {a.copies} input copies: round medians spread {max(medians) / min(medians) - 1:.2%}")


if __name__ == "__main__":
    main()
