"""CPU seconds of model-style load_inline builds, per compile step, with and without
kbench's precompiled torch/extension.h and its object store (harness/build/objects.py:
host files reused across builds, published only by kbench's own process; ccache's
shared store, which any build could write, stays off).

Model-style: `#include <torch/extension.h>` in the CUDA source, verbose=True,
`<<<grid, block>>>`, torch::zeros_like outputs; the candidates are bench/rl_candidates.py's
(samples of one template share their host file, main.cpp, as a policy's samples for
one prompt do) and bench/accuracy's. Each source gets torch's own build.ninja
(load_inline's, for TORCH_CUDA_ARCH_LIST, default 9.0); each step (main.o, then
cuda.cuda.o) runs as its own `ninja` and is charged the CPU seconds (user + sys) of
everything it ran. Nothing is linked or loaded, so this runs on a CPU-only host with
nvcc (a CPU build of torch gets CUDA_HOME from nvcc's folder).

    python bench/build_cpu.py --work DIR --mode plain|pch|objects [--sources relu:3,softmax:1]
        [--targets main.o,cuda.cuda.o] [--phases] --json OUT.json

plain: torch's build as is. pch: main.cpp with kbench's precompiled header (made
first if missing, not counted; each row says whether gcc used it for main.o, or gcc's reason
not to). objects: pch, with `c++` the object store's stand-in;
after each build this script does what kbench's parent does (a host file missed by a
second build is compiled and published by objects.publish, in this process, its CPU-s
given as `publish`), so the third sample of a template on is a hit.
--phases: cuda.cuda.o as nvcc's own steps (`nvcc --dryrun`), each run alone and
charged its CPU-s (gcc -E twice, cudafe++, cicc, ptxas, fatbinary, the host gcc).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shlex
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
    import torch.utils.cpp_extension as ce
    from harness.build import pch

    if ce.CUDA_HOME is None:  # as in _WRITE_NINJA, so that the PCH's flags are the builds'
        ce.CUDA_HOME = os.path.dirname(os.path.dirname(os.path.realpath(shutil.which("nvcc"))))

    env = {**os.environ, "TORCH_CUDA_ARCH_LIST": arch, "TORCH_NO_COMPILER_WRAPPER": "1", "CCACHE_DISABLE": "1"}
    if mode in ("pch", "objects"):
        request = pch.request_for([], True)
        root = work / "cache" / "pch"
        if request is not None and pch.ready(root, request) is None:
            print(f"[build_cpu] making the PCH: {pch.build(root, request)}", flush=True)
        folder = pch.ready(root, request) if request else None
        if folder is not None:
            env["CPATH"] = os.pathsep.join(p for p in (str(folder), env.get("CPATH")) if p)
    return env


def pch_verdict(build_dir: Path, env: dict) -> str:
    """Whether gcc used kbench's PCH for main.o: its command from build.ninja, run again
    by torch's compiler (not a stand-in) with -H -Winvalid-pch -fsyntax-only under the
    build's CPATH. "used", or gcc's reason for passing it over. On torch 2.11 it once
    passed it over in every build, silently (`-std=c++17` against the PCH's c++20)."""
    from harness.build import pch

    request = pch.request_for([], True)
    command = subprocess.run(["ninja", "-t", "commands", "main.o"], cwd=build_dir, capture_output=True,
                             text=True).stdout.strip().splitlines()
    if request is None or not command or not env.get("CPATH"):
        return "no PCH"
    argv, kept, skip = shlex.split(command[-1]), [], False
    for a in argv[1:]:
        if skip:
            skip = False
        elif a in ("-MF", "-o"):
            skip = True
        elif a not in ("-MMD", "-c"):
            kept.append(a)
    done = subprocess.run([request.cxx, *kept, "-fsyntax-only", "-H", "-Winvalid-pch"], cwd=build_dir, env=env,
                          capture_output=True, text=True)
    why = pch.why_unused(done)  # the same reading as kbench's own check before it publishes a PCH
    return f"not used: {why}" if why else "used"


def nvcc_phases(build_dir: Path, env: dict) -> dict:
    """cuda.cuda.o as nvcc's steps, each alone: {step: CPU-s} (and `ok`). The command is
    torch's, from build.ninja; `nvcc --dryrun` lists the steps and their environment."""
    ninja = (build_dir / "build.ninja").read_text()
    command = subprocess.run(["ninja", "-t", "commands", "cuda.cuda.o"], cwd=build_dir, capture_output=True,
                             text=True).stdout.strip().splitlines()[-1]
    keep = build_dir / "nvcc-steps"
    keep.mkdir(exist_ok=True)
    dry = subprocess.run(f"{command} --dryrun -keep --keep-dir {keep}", shell=True, cwd=build_dir, env=env,
                         capture_output=True, text=True).stderr.splitlines()
    lines = [ln[3:] for ln in dry if ln.startswith("#$ ")]
    setup = [ln for ln in lines if re.match(r"^[A-Za-z_]+=", ln)]
    prelude = "\n".join(f"export {ln}" if not ln.startswith("_") else ln for ln in setup)
    here = next((ln.split("=", 1)[1] for ln in lines if ln.startswith("_HERE_=")), "")
    # nvcc as /proc names it for the host compile's stand-in (a wrapper script execs the real one)
    nvcc = shlex.split(command)
    nvcc[0] = os.path.realpath(os.path.join(here, "nvcc")) if here else nvcc[0]
    steps: dict = {"ok": "cuda_cflags" in ninja, "nvcc": nvcc}
    for line in (ln for ln in lines if ln not in setup and not ln.startswith("rm ")):
        tool = line.split()[0].strip('"').rsplit("/", 1)[-1]
        if tool == "gcc":
            tool = "gcc -E host" if "cpp4.ii" in line else "gcc -E device" if "cpp1.ii" in line else "gcc host"
        cpu, _, rc = cpu_of(["bash", "-c", prelude + "\n" + line], env, build_dir)
        steps[tool] = round(steps.get(tool, 0.0) + cpu, 1)
        if tool == "gcc host":
            steps["host_args"] = shlex.split(line)[1:]
        steps["ok"] = steps["ok"] and rc == 0
    return steps


def make_prefix(store: Path, folder: Path, steps: dict | None, env: dict, work: Path) -> float | None:
    """What kbench's parent does when a CUDA build's host compile found no precompiled
    prefix (harness/build/host_pch.py): the CPU-s of making one, None when none was
    made. A build run by ninja leaves a note naming its nvcc; with --phases the steps
    ran alone (no nvcc above the stand-in), so the note is made here from them."""
    from harness.build import host_pch, shim

    wants = host_pch.read_wants(folder / "tmp")
    if steps is not None:
        parsed = shim.parse_host(steps["host_args"])
        wants = [{"key": shim.host_key(shim.describe(shutil.which("gcc")), parsed[1], env),
                  "host_args": steps["host_args"], "nvcc": steps["nvcc"],
                  "env": {k: env[k] for k in shim.GCC_ENV if k in env}}]
    cpu = None
    for want in wants:
        if host_pch.should_make(store, want["key"]):
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            print(f"[build_cpu] {host_pch.make(store, want, work / 'cache' / 'pch')}", flush=True)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu = round((cpu or 0.0) + after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime, 1)
    return cpu


def publish_missed(store: Path, build_dir: Path, work: Path) -> float:
    """What kbench's parent does after a build: each missed host file seen a second time
    is compiled and published by kbench's own code (objects.publish); its CPU-s."""
    from harness.build import objects

    cpu = 0.0
    for want in objects.read_wants(build_dir.parent.parent / "tmp", build_dir.parent.parent):
        if objects.worth_publishing(store, want["key"]):
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            print(f"[build_cpu] {objects.publish(store, want, work / 'cache' / 'pch')}", flush=True)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu += after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return round(cpu, 1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--mode", choices=("plain", "pch", "objects"), required=True)
    ap.add_argument("--sources", default="relu:3,accuracy:4_Softmax.py,accuracy:8_CrossEntropyLoss.py")
    ap.add_argument("--arch", default="9.0")
    ap.add_argument("--targets", default="main.o,cuda.cuda.o")
    ap.add_argument("--phases", action="store_true", help="cuda.cuda.o as nvcc's steps, each charged alone")
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
        step_env = env
        if a.mode == "objects":
            from harness.build import objects

            step_env = {**env, **objects.build_env(work / "cache" / "objects", folder / "tmp", env)}
        # torch writes CXX and CC (as -ccbin) into build.ninja: the stand-ins' where those are set,
        # as in a build process of kbench's
        gen = subprocess.run([sys.executable, "-c", _WRITE_NINJA, str(folder / "solution.py")], capture_output=True,
                             text=True, env={**step_env, "TORCH_EXTENSIONS_DIR": str(folder / "ext")})
        if gen.returncode != 0:
            raise SystemExit(f"{name}: could not write build.ninja:\n{gen.stderr[-2000:]}")
        build_dir = Path(gen.stdout.strip().splitlines()[-1])
        row = {"source": name}
        for target in a.targets.split(","):
            if target == "cuda.cuda.o" and a.phases:
                steps = nvcc_phases(build_dir, step_env)
                row[target] = {"cpu_s": round(sum(v for v in steps.values() if isinstance(v, float)), 1),
                               "ok": steps["ok"], "steps": {k: v for k, v in steps.items() if isinstance(v, float)}}
                if a.mode == "objects":
                    row["prefix"] = {"cpu_s": make_prefix(work / "cache" / "objects", folder, steps, step_env, work)}
                continue
            cpu, wall, rc = cpu_of(["ninja", "-j", "1", target], step_env, build_dir)
            row[target] = {"cpu_s": cpu, "wall_s": wall, "ok": rc == 0}
            if target == "cuda.cuda.o" and a.mode == "objects":
                row["prefix"] = {"cpu_s": make_prefix(work / "cache" / "objects", folder, None, step_env, work)}
            if target == "main.o" and a.mode in ("pch", "objects"):
                row[target]["pch"] = pch_verdict(build_dir, env)
            if target == "main.o" and a.mode == "objects":
                row[target]["reused"] = not any((folder / "tmp" / objects.WANTS).glob("*.json"))
                row["publish"] = {"cpu_s": publish_missed(work / "cache" / "objects", build_dir, work)}
        row["cpu_s"] = round(sum(row[t]["cpu_s"] for t in a.targets.split(",")), 1)
        print(f"[build_cpu] {a.mode} {name}: " + ", ".join(f"{t} {row[t]['cpu_s']} CPU-s" for t in a.targets.split(","))
              + f", {row['cpu_s']} in all" + (f" (+ publish {row['publish']['cpu_s']})" if "publish" in row else "")
              + (f" (+ prefix {row['prefix']['cpu_s']})" if row.get("prefix", {}).get("cpu_s") else "")
              + (f"; main.o's PCH: {row['main.o']['pch']}" if "pch" in row.get("main.o", {}) else "")
              + (f"; nvcc steps {row['cuda.cuda.o']['steps']}" if a.phases and "cuda.cuda.o" in row else ""),
              flush=True)
        rows.append(row)
    result = {"mode": a.mode, "arch": a.arch, "rows": rows, "command": " ".join(sys.argv),
              "load_before": os.getloadavg()[0]}
    if a.json:
        a.json.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
