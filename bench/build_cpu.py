"""CPU seconds of model-style load_inline builds, per compile step, with and without
kbench's precompiled torch/extension.h. (Objects are not reused across builds: a
build process runs solution code, and ccache's shared store was a way to poison the
next build; harness/build/stage.py, NO_SHARED_OBJECTS.)

Model-style: `#include <torch/extension.h>` in the CUDA source, verbose=True,
`<<<grid, block>>>`, torch::zeros_like outputs; the candidates are bench/rl_candidates.py's
(samples of one template share their host file, main.cpp, as a policy's samples for
one prompt do) and bench/accuracy's. Each source gets torch's own build.ninja
(load_inline's, for TORCH_CUDA_ARCH_LIST, default 9.0); each step (main.o, then
cuda.cuda.o) runs as its own `ninja` and is charged the CPU seconds (user + sys) of
everything it ran. Nothing is linked or loaded, so this runs on a CPU-only host with
nvcc (a CPU build of torch gets CUDA_HOME from nvcc's folder).

    python bench/build_cpu.py --work DIR --mode plain|pch [--sources relu:3,softmax:1] --json OUT.json

plain: torch's build as is. pch: main.cpp with kbench's precompiled header (made
first if missing, not counted).
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

import rl_candidates

ROOT = rl_candidates.ROOT
sys.path.insert(0, str(ROOT))
ACCURACY = ROOT / "bench" / "accuracy" / "solutions" / "models" / "level1"

# Run in a child per source: write torch's build.ninja for the solution's load_inline call, build nothing.
_WRITE_NINJA = r'''
import os, runpy, sys
import torch.utils.cpp_extension as ce
if ce.CUDA_HOME is None:  # a CPU build of torch: nvcc's own folder
    ce.CUDA_HOME = os.path.dirname(os.path.dirname(os.path.realpath(__import__("shutil").which("nvcc"))))
def stop(build_directory, verbose, error_prefix):
    print(build_directory)
    raise SystemExit(0)
ce._run_ninja_build = stop
runpy.run_path(sys.argv[1])
'''


def sources(spec: str) -> list[tuple[str, str]]:
    """(name, solution text) for "template:count,..." (rl_candidates' CUDA templates, their
    ok samples) or "accuracy:FILE" (a bench/accuracy model solution)."""
    out = []
    for part in spec.split(","):
        kind, _, arg = part.partition(":")
        if kind == "accuracy":
            out.append((Path(arg).stem, (ACCURACY / arg).read_text()))
            continue
        template = next(t for t in rl_candidates.CUDA_TEMPLATES if t.name == kind)
        import random

        rng = random.Random(0)
        for i in range(int(arg or 1)):
            out.append((f"{kind}{i}", rl_candidates.make(1000 + i, template, "ok", rng).source))
    return out


def cpu_of(command: list[str], env: dict, cwd: Path) -> tuple[float, float, int]:
    """CPU seconds (user + sys of it and all it ran), wall seconds, exit code."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    done = subprocess.run(command, env=env, cwd=cwd, capture_output=True, text=True)
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        print(done.stdout[-2000:], done.stderr[-2000:], file=sys.stderr)
    return round(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime, 1), round(wall, 1), done.returncode


def build_env(mode: str, work: Path, arch: str) -> dict:
    from harness.build import pch

    env = {**os.environ, "TORCH_CUDA_ARCH_LIST": arch, "TORCH_NO_COMPILER_WRAPPER": "1"}
    if mode == "pch":
        request = pch.request_for([], True)
        root = work / "cache" / "pch"
        if request is not None and pch.ready(root, request) is None:
            print(f"[build_cpu] making the PCH: {pch.build(root, request)}", flush=True)
        folder = pch.ready(root, request) if request else None
        if folder is not None:
            env["CPATH"] = os.pathsep.join(p for p in (str(folder), env.get("CPATH")) if p)
    return env


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--mode", choices=("plain", "pch"), required=True)
    ap.add_argument("--sources", default="relu:3,accuracy:4_Softmax.py,accuracy:8_CrossEntropyLoss.py")
    ap.add_argument("--arch", default="9.0")
    ap.add_argument("--json", type=Path)
    a = ap.parse_args()
    work = a.work.resolve()
    env = build_env(a.mode, work, a.arch)
    rows = []
    for name, text in sources(a.sources):
        folder = work / "cache" / "builds" / f"{a.mode}-{name}"
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        (folder / "solution.py").write_text(text)
        gen = subprocess.run([sys.executable, "-c", _WRITE_NINJA, str(folder / "solution.py")], capture_output=True,
                             text=True, env={**env, "TORCH_EXTENSIONS_DIR": str(folder / "ext")})
        if gen.returncode != 0:
            raise SystemExit(f"{name}: could not write build.ninja:\n{gen.stderr[-2000:]}")
        build_dir = Path(gen.stdout.strip().splitlines()[-1])
        row = {"source": name}
        for target in ("main.o", "cuda.cuda.o"):
            cpu, wall, rc = cpu_of(["ninja", "-j", "1", target], env, build_dir)
            row[target] = {"cpu_s": cpu, "wall_s": wall, "ok": rc == 0}
        row["cpu_s"] = round(row["main.o"]["cpu_s"] + row["cuda.cuda.o"]["cpu_s"], 1)
        print(f"[build_cpu] {a.mode} {name}: main.o {row['main.o']['cpu_s']} CPU-s, cuda.cuda.o "
              f"{row['cuda.cuda.o']['cpu_s']} CPU-s, {row['cpu_s']} in all", flush=True)
        rows.append(row)
    result = {"mode": a.mode, "arch": a.arch, "rows": rows, "command": " ".join(sys.argv),
              "load_before": os.getloadavg()[0]}
    if a.json:
        a.json.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
