"""Size and time every problem's reference on the GPU (eager PyTorch, fp32, TF32 off).

For each problems/level*/<N>_<Name>.py: build the model and inputs under the
device, time the eager forward with CUDA events (the L2 is flushed before each
timed call by writing a buffer twice its size, outside the events; 3 warm-up
calls, median of 20), record the peak memory of that, then compare the fp32
output with a float64 run of the same model on the same inputs (and on every
get_check_inputs() set), so that a problem whose fp32 reference cannot meet
the harness's tolerance shows up here.

Prints one markdown table row per problem as it goes, and writes the table to
$OUT/problem_sizes.md when $OUT is set.

    python3 bench/problem_sizes.py                      # every problem, on cuda
    python3 bench/problem_sizes.py --only level2        # names containing 'level2'
    python3 bench/problem_sizes.py --device cpu --small # dry run: CPU, tests' small sizes
"""
import argparse
import copy
import datetime
import gc
import importlib.util
import math
import os
import re
import statistics
import sys
import time
import traceback
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from harness.discover.shapes import nbytes  # noqa: E402
PROBLEM_FILES = sorted(
    (ROOT / "problems").glob("level*/*.py"),
    key=lambda p: (p.parent.name, int(re.match(r"\d+", p.stem).group()) if re.match(r"\d+", p.stem) else 0),
)
GB = 1e9
ATOL = RTOL = 1e-4  # for the allclose-style ratio column (<= 1 passes)


def key_of(path: Path) -> str:
    return f"{path.parent.name}/{path.stem}"


def load(path: Path, small: bool):
    spec = importlib.util.spec_from_file_location("problem_" + re.sub(r"\W", "_", key_of(path)), path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if small:  # the CPU test suite's small sizes, for a dry run of this script
        sys.path.insert(0, str(ROOT / "tests"))
        from test_problems import SPECS
        for name, value in SPECS[key_of(path)].small.items():
            setattr(module, name, copy.deepcopy(value))
    return module


def as_tuple(out):
    return out if isinstance(out, tuple) else (out,)


def to_double(values):
    return [v.double() if isinstance(v, torch.Tensor) and v.is_floating_point() else v for v in values]


def compare(out: torch.Tensor, ref: torch.Tensor, chunk: int = 1 << 25):
    """(relative L2 error, max |out-ref| / (ATOL + RTOL |ref|), non-finite count), in chunks."""
    if not out.is_floating_point():
        mismatches = int((out != ref).sum())
        return (0.0 if mismatches == 0 else math.inf), float(mismatches), 0
    o, r = out.reshape(-1), ref.reshape(-1)
    err2 = ref2 = 0.0
    ratio = 0.0
    nonfinite = 0
    for s in range(0, o.numel(), chunk):
        oc, rc = o[s:s + chunk].double(), r[s:s + chunk]
        nonfinite += int((~torch.isfinite(oc)).sum())
        d = (oc - rc).abs()
        err2 += float((d * d).sum())
        ref2 += float((rc * rc).sum())
        ratio = max(ratio, float((d / (ATOL + RTOL * rc.abs())).max()))
    rel = math.sqrt(err2) / (math.sqrt(ref2) if ref2 > 0 else 1.0)
    return rel, ratio, nonfinite


class Timer:
    def __init__(self, device: torch.device):
        self.cuda = device.type == "cuda"
        if self.cuda:
            l2 = getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 0) or 50 * 2**20
            self.flush_buf = torch.empty(2 * l2 // 4, dtype=torch.float32, device=device)

    def time_ms(self, fn, warmup: int, reps: int):
        for _ in range(warmup):
            fn()
        times = []
        for _ in range(reps):
            if self.cuda:
                self.flush_buf.fill_(1.0)  # evict the inputs from L2, outside the events
                start = torch.cuda.Event(enable_timing=True)
                end = torch.cuda.Event(enable_timing=True)
                start.record()
                fn()
                end.record()
                end.synchronize()
                times.append(start.elapsed_time(end))
            else:
                t = time.perf_counter()
                fn()
                times.append((time.perf_counter() - t) * 1e3)
        return statistics.median(times), min(times), max(times)


def measure(path: Path, device: torch.device, timer: Timer, args):
    module = load(path, args.small)
    cuda = device.type == "cuda"
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        base = torch.cuda.memory_allocated(device)
        torch.cuda.reset_peak_memory_stats(device)
    torch.manual_seed(0)
    with torch.device(device):
        model = module.Model(*module.get_init_inputs())
        inputs = module.get_inputs()
    row = {"in_gb": nbytes(inputs) / GB}
    with torch.no_grad():
        out = model(*inputs)
        row["out_gb"] = nbytes(out) / GB
        del out
        row["ms"], row["ms_min"], row["ms_max"] = timer.time_ms(lambda: model(*inputs), args.warmup, args.reps)
        if cuda:
            torch.cuda.synchronize()
            row["peak_gb"] = (torch.cuda.max_memory_allocated(device) - base) / GB
        else:
            row["peak_gb"] = float("nan")

        # fp32 vs float64 on the default inputs, then on each check set (one
        # set alive at a time: some are over a gigabyte).
        model64 = copy.deepcopy(model).double()
        row["default_err"] = _fp64_errors(model, model64, inputs)
        del inputs
        _free(cuda)
        row["check_err"], row["n_checks"] = None, 0
        if hasattr(module, "get_check_inputs"):
            torch.manual_seed(1)
            with torch.device(device):
                check_sets = module.get_check_inputs()
            errs = []
            while check_sets:
                inp = check_sets.pop(0)
                errs.append(_fp64_errors(model, model64, inp))
                del inp
                _free(cuda)
            row["check_err"] = max(errs, key=lambda e: (e[2], e[0], e[1]))
            row["n_checks"] = len(errs)
    return row


def _fp64_errors(model, model64, inputs):
    out = as_tuple(model(*inputs))
    ref = as_tuple(model64(*to_double(inputs)))
    results = [compare(o, r) for o, r in zip(out, ref)]
    del out, ref
    return max(results, key=lambda e: (e[2], e[0], e[1]))


def _free(cuda: bool):
    gc.collect()
    if cuda:
        torch.cuda.empty_cache()


def fmt_err(e):
    if e is None:
        return "-"
    rel, ratio, nonfinite = e
    s = f"{rel:.1e} / {ratio:.2g}"
    if nonfinite:
        s += f" ({nonfinite} non-finite)"
    return s


HEADER = ("| problem | input GB | output GB | eager ms (median of 20) | min-max ms | peak GB "
          "| fp32 vs fp64: rel L2 / allclose ratio | same, worst check set |\n"
          "| --- | ---: | ---: | ---: | ---: | ---: | --- | --- |")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--only", default="", help="substring of level/name")
    parser.add_argument("--small", action="store_true", help="use tests/discover/test_problems.py's small sizes")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--reps", type=int, default=20)
    args = parser.parse_args()

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    device = torch.device(args.device)
    lines = []

    def emit(line=""):
        print(line, flush=True)
        lines.append(line)

    emit(f"date: {datetime.date.today().isoformat()}; torch {torch.__version__}; device: "
         + (torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu")
         + ("; small sizes (dry run)" if args.small else ""))
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        emit(f"{props.multi_processor_count} SMs, {props.total_memory / 2**30:.0f} GiB, "
             f"L2 {getattr(props, 'L2_cache_size', 0) / 2**20:.0f} MiB; TF32 off; "
             f"allclose ratio = max |out - ref| / ({ATOL:g} + {RTOL:g} |ref|), <= 1 passes")
    timer = Timer(device)
    emit()
    emit(HEADER)
    t_all = time.time()
    for path in PROBLEM_FILES:
        key = key_of(path)
        if args.only not in key:
            continue
        try:
            r = measure(path, device, timer, args)
            emit(f"| {key} | {r['in_gb']:.3f} | {r['out_gb']:.3f} | {r['ms']:.3f} | "
                 f"{r['ms_min']:.3f}-{r['ms_max']:.3f} | {r['peak_gb']:.2f} | {fmt_err(r['default_err'])} | "
                 f"{fmt_err(r['check_err'])} |")
        except Exception as exc:  # one broken problem must not stop the table
            emit(f"| {key} | ERROR {type(exc).__name__}: {str(exc).splitlines()[0][:150]} | | | | | | |")
            traceback.print_exc(file=sys.stderr)
        _free(device.type == "cuda")
    emit()
    emit(f"total wall time {time.time() - t_all:.0f} s")
    out_dir = os.environ.get("OUT")
    if out_dir:
        Path(out_dir, "problem_sizes.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
