"""A precompiled prefix for nvcc's host compile, made by kbench's own process.

nvcc compiles a .cu in steps: gcc -E and cudafe++ (the host side), gcc -E and cicc (the
device side), ptxas, then gcc on cudafe++'s output, X.cudafe1.cpp. That last file is
preprocessed text (torch/extension.h is 16 MB of it), so no precompiled header reaches
it through an include path, and its compile is 21 of the 73 CPU-s a model-style .cu
costs (bench/build_cpu.md). But for two sources built with the same flags, cudafe++'s
output is the same text up to the source's own first line, apart from the name it gives
anonymous namespaces (`_GLOBAL__N__<module id>`, from the file's path and contents, so
it already differs between any two builds). So kbench runs the build's nvcc command up
to cudafe++ on a .cu holding only load_inline's includes and torch/extension.h, cuts
cudafe++'s output before the first line of that file's own code, precompiles the cut
with the host compile's exact flags, checks that gcc uses it, and publishes it under
<store>/nvcc-host/<key>/. The gcc stand-in (shim.py) then compiles a build's file as
`#include` of that prefix plus the rest, where the file starts with exactly that text.

It runs nvcc with a build's flags, so it runs kbench's own nvcc (never the program a
build's note names), and those flags must be on a fixed list (no -ccbin, no -Xcompiler
beyond pch.py's list, no file a flag would read or write, no character the shell that
runs nvcc's listed steps would act on); and it is made only where builds wait to use
it, as the PCH is (stage.py, _pch_pays_off).

Run as `python -m harness.build.host_pch STORE WANT.json`.
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

from . import shim
from ..shared import sandbox

MAX_PREFIXES = 4  # ~0.8 GB each (torch 2.13, CUDA 13)
SOURCE = ("#include <torch/types.h>\n#include <cuda.h>\n#include <cuda_runtime.h>\n\n"  # load_inline's own lines
          "#include <torch/extension.h>\nint kbench_prefix_probe() { return 0; }\n")
_NVCC_SAFE = re.compile(
    r"--expt-relaxed-constexpr|--expt-extended-lambda|--extended-lambda|-?-use_fast_math|-lineinfo|-O[0-3]"
    r"|-std=c\+\+\d\d|-gencode=arch=compute_\d+a?,code=(sm|compute)_\d+a?|--(ftz|prec-div|prec-sqrt|fmad)=(true|false)"
    r"|-maxrregcount=\d+|--threads=?\d*|-D__CUDA_NO_\w+__")
_NVCC_VALUE = {"-Xptxas": re.compile(r"[\w=,.+-]+"), "-gencode": re.compile(r"arch=compute_\d+a?,code=(sm|compute)_\d+a?"),
               "--threads": re.compile(r"\d+"), "-std": re.compile(r"c\+\+\d\d")}  # nvcc's own argv splits -std= and -gencode=


def read_wants(scratch: Path) -> list[dict]:
    """The notes of host compiles without a prefix, as far as they are well formed (a
    build process wrote them)."""
    from .objects import HOST_WANTS

    out = []
    for path in sorted((scratch / HOST_WANTS).glob("*.json"))[:4]:
        try:
            want = json.loads(sandbox.read_written(path) or b"null")
        except ValueError:
            continue
        if (isinstance(want, dict) and isinstance(want.get("key"), str) and re.fullmatch(r"[0-9a-f]{32}", want["key"])
                and all(isinstance(want.get(k), list) and all(isinstance(a, str) for a in want[k])
                        for k in ("host_args", "nvcc"))
                and isinstance(want.get("env"), dict) and all(isinstance(v, str) for v in want["env"].values())):
            out.append({k: want[k] for k in ("key", "host_args", "nvcc", "env")})
    return out


def should_make(store: Path, key: str) -> bool:
    folder = store / "nvcc-host"
    if (folder / key).exists() or (folder / "unusable" / key).exists():
        return False
    return sum(1 for _ in folder.glob("*/*/prefix.h.gch")) < MAX_PREFIXES


# nvcc --dryrun prints each step inside double quotes, and make() runs the steps through
# bash, where $, `, " and \ still act: no flag kbench passes may hold one.
_SHELL_SAFE = re.compile(r"[^$`\"\\!\n]*")


def _checked_nvcc(argv: list[str], torch_includes: list[str], stand_in: str | None = None,
                  why: list[str] | None = None) -> list[str] | None:
    """nvcc's flags of a build's command (input and output dropped) when every one is on
    the list: torch's own (-D, -isystem of torch's folders exactly as torch names them,
    -gencode, --compiler-options with pch.py's flags) and common device flags; else None.
    A folder that only resolves to torch's (`TORCH/x/..`) may hold anything in x.
    `-ccbin` only as torch passes CC where CC is set, which in a build is kbench's gcc
    stand-in (`stand_in`): dropped, kbench's own CC runs instead (_host_compiler).
    `why`, where given, gets the first flag off the list (make() says which)."""
    from . import pch

    unsafe = [a for a in argv[1:] if not _SHELL_SAFE.fullmatch(a)]
    if unsafe:
        if why is not None:
            why.append(unsafe[0])
        return None
    flags, i = [], 1
    while i < len(argv):
        a = argv[i]
        value = argv[i + 1] if i + 1 < len(argv) else None
        if a in ("-c", "-o", "-MF") or (a == "-ccbin" and stand_in is not None and value == stand_in):
            i += 2
            continue
        if a == "-MD":  # with -MF: the depfile torch 2.11 has nvcc write for ninja; the prefix needs none
            i += 1
            continue
        if a == "-isystem" and value in torch_includes:
            flags += [a, value]
        elif a in ("--compiler-options", "-Xcompiler") and value is not None \
                and all(f == "-fPIC" or pch._safe(f) for f in value.replace(",", " ").split()):
            flags += [a, value]
        elif a in _NVCC_VALUE and value is not None and _NVCC_VALUE[a].fullmatch(value):
            flags += [a, value]
        elif _NVCC_SAFE.fullmatch(a) or (a.startswith("-D") and pch._safe(a)):
            flags.append(a)
            i += 1
            continue
        else:
            if why is not None:
                why.append(" ".join(x for x in (a, value) if x is not None))
            return None
        i += 2
    return flags


def kbench_nvcc() -> str | None:
    """The nvcc kbench's builds run, as torch's build.ninja names it: PYTORCH_NVCC, else
    CUDA_HOME/bin/nvcc (toolchain.toolchain_versions describes the same one). The nvcc a
    build's note names is never run: it is the build's word, and a build may write a
    program called nvcc, nvcc.profile beside it, where every sandbox may (/dev/shm). If
    the build ran another nvcc, the host compile kbench's lists is another key, and
    nothing is made."""
    import torch.utils.cpp_extension as cpp_extension

    nvcc = os.environ.get("PYTORCH_NVCC") or (os.path.join(cpp_extension.CUDA_HOME, "bin", "nvcc")
                                              if cpp_extension.CUDA_HOME else None)
    return shutil.which(nvcc) if nvcc else None


def make(store: Path, want: dict, pch_root: Path | None = None, timeout: float = 900.0) -> str:
    """Make, check and publish the prefix for a build's nvcc command; returns what happened."""
    from .objects import _checked_env, _torch_includes

    nvcc, why = kbench_nvcc(), []
    flags = _checked_nvcc(want["nvcc"], _torch_includes(), str(shim.stand_in(store, "gcc")), why) \
        if nvcc and want["nvcc"] else None
    env = _checked_env(want["env"], pch_root)
    if flags is None or env is None:
        # Not marked unusable: the key is the note's word until nvcc lists the same compile.
        what = ("no nvcc of kbench's" if not nvcc else "no nvcc command" if not want["nvcc"]
                else f"nvcc's flag {why[0]!r}" if flags is None else f"gcc's environment {str(want['env'])[:300]}")
        return f"skipped: {what} outside kbench's list"
    folder = store / "nvcc-host"
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / f"{want['key']}.lock", "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return "another process is making it"
        if (folder / want["key"]).exists():
            return "made already"
        tmp = folder / "tmp" / f"{want['key']}.{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        try:
            return _make(folder, want["key"], nvcc, flags, env, tmp, timeout)
        except (OSError, ValueError, subprocess.SubprocessError) as e:
            return f"not made: {e!r}"
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


def _make(folder: Path, key: str, nvcc: str, flags: list[str], env: dict, tmp: Path, timeout: float) -> str:
    gcc_env = {k: v for k, v in os.environ.items() if k not in shim.GCC_ENV}
    gcc_env.update(env, LC_ALL="C", TMPDIR=str(tmp))
    source = tmp / "cuda.cu"
    source.write_text(SOURCE)
    t0 = time.monotonic()
    gcc, ccbin = _host_compiler()
    dry = subprocess.run([nvcc, "--dryrun", "-keep", "--keep-dir", str(tmp), *ccbin, *flags, "-c", str(source), "-o",
                          str(tmp / "cuda.o")], cwd=tmp, env=gcc_env, capture_output=True, text=True, timeout=timeout)
    lines = [ln[3:] for ln in dry.stderr.splitlines() if ln.startswith("#$ ")]
    setup = [ln for ln in lines if re.match(r"^[A-Za-z_]+=", ln)]
    prelude = "\n".join(f"export {ln}" if not ln.startswith("_") else ln for ln in setup)
    steps = [ln for ln in lines if ln not in setup]
    host_pp = next((ln for ln in steps if _GCC_STEP.match(ln) and " -E " in ln and "cpp4.ii" in ln), None)
    cudafe = next((ln for ln in steps if ln.startswith("cudafe++ ")), None)
    compile_ = next((ln for ln in reversed(steps) if _GCC_STEP.match(ln) and shim.HOST_SUFFIX in ln), None)
    if dry.returncode != 0 or not (host_pp and cudafe and compile_):
        return "skipped: nvcc --dryrun did not list its host steps"  # the key not yet checked: no mark
    host_args = shlex.split(compile_)[1:]
    parsed = shim.parse_host(host_args)
    if parsed is None or gcc is None or shim.host_key(shim.describe(gcc), parsed[1], gcc_env) != key:
        return "skipped: the build's host compile is not the one nvcc lists here"
    for step in (host_pp, cudafe):
        done = subprocess.run(["bash", "-c", prelude + "\n" + step], cwd=tmp, env=gcc_env, capture_output=True,
                              text=True, timeout=timeout)
        if done.returncode != 0:
            return _unusable(folder.parent, key, f"{step.split()[0]} failed: {done.stderr.strip()[-300:]}")
    lines_out = Path(parsed[0]).read_bytes().split(b"\n")
    own = f'"{source}"'.encode()
    cut = next((i for i in range(1, len(lines_out)) if lines_out[i].startswith(b"# ") and own in lines_out[i]), None)
    if cut is None:
        return _unusable(folder.parent, key, "no line of the probe's own in cudafe++'s output")
    prefix = b"\n".join(lines_out[1:cut]) + b"\n"
    found = shim._ANON.search(prefix)
    module_id = found.group(1).decode() if found else ""
    digest = hashlib.sha256(prefix).hexdigest()
    entry = tmp / "entry"
    entry.mkdir()
    (entry / "prefix.h").write_bytes(prefix)
    header_args = _without_input(host_args, parsed[0])
    made = subprocess.run([gcc, *[("c++-header" if a == "c++" and header_args[i - 1] == "-x" else a)
                                  for i, a in enumerate(header_args)], str(entry / "prefix.h"), "-o",
                           str(entry / "prefix.h.gch")], cwd=tmp, env=gcc_env, capture_output=True, text=True,
                          timeout=timeout)
    if made.returncode != 0:
        return _unusable(folder.parent, key, f"gcc could not precompile it: {made.stderr.strip()[-300:]}")
    # gcc uses it for the probe's own file, rewritten as the stand-in rewrites a build's
    # (cicc, which writes the stub file that file includes, did not run here: an empty one).
    for stub in re.findall(rb'#include "([\w.-]+\.stub\.c)"', b"\n".join(lines_out[cut:])):
        (Path(parsed[0]).parent / stub.decode()).write_text("")
    text = shim.with_prefix(Path(parsed[0]).read_bytes(), module_id.encode(), len(prefix), digest,
                            str(entry / "prefix.h"))
    Path(parsed[0]).write_bytes(text)
    used = subprocess.run([gcc, *header_args, "-fsyntax-only", "-H", parsed[0]], cwd=tmp, env=gcc_env,
                          capture_output=True, text=True, timeout=timeout)
    first = used.stderr.splitlines()[0] if used.stderr else ""
    if used.returncode != 0 or not (first.startswith("! ") and first.endswith("prefix.h.gch")):
        return _unusable(folder.parent, key, f"gcc did not use it: {first or used.stderr[-300:]}")
    seconds = time.monotonic() - t0
    (entry / "manifest.json").write_text(json.dumps({
        "module_id": module_id, "prefix_bytes": len(prefix), "sha256": digest, "nvcc": nvcc, "flags": flags,
        "env": env, "seconds": round(seconds, 1)}, indent=0))
    final = folder / key / digest[:16]
    final.parent.mkdir(exist_ok=True)
    os.rename(entry, final)  # atomic: the stand-in sees the whole entry or none
    return f"made in {seconds:.1f} s: {final} ({len(prefix) >> 20} MB of prefix)"


# A host step of nvcc's list: `gcc ...`, or `"DIR"/gcc ...` where -ccbin named one.
_GCC_STEP = re.compile(r'^(?:"[^"]*"/|\S*/)?gcc ')


def _host_compiler() -> tuple[str | None, list[str]]:
    """The gcc kbench's nvcc runs, as torch runs a build's: CC's (passed as -ccbin) where
    kbench's environment sets CC, else gcc on PATH; and the flags that say so."""
    from .objects import host_cc

    gcc = host_cc(dict(os.environ))
    return gcc, (["-ccbin", gcc] if gcc and (os.environ.get("CC") or "").strip() else [])


def _without_input(args: list[str], source: str) -> list[str]:
    """The host compile's flags, without its input, -c and -o OUT."""
    out, skip = [], False
    for a in args:
        if skip:
            skip = False
        elif a == "-o":
            skip = True
        elif a not in ("-c", source):
            out.append(a)
    return out


def _unusable(store: Path, key: str, why: str) -> str:
    try:
        (store / "nvcc-host" / "unusable").mkdir(parents=True, exist_ok=True)
        (store / "nvcc-host" / "unusable" / key).write_text(why + "\n")
    except OSError:
        pass
    return f"unusable: {why}"


def main(store: str, want_path: str) -> int:
    root = Path(store)
    sandbox.confine([str(root)], "nvcc host prefix")  # no solution code here; nvcc and gcc may write the store only
    want = json.loads(Path(want_path).read_text())
    pch_root = Path(os.environ["KBENCH_PCH_DIR"]) if os.environ.get("KBENCH_PCH_DIR") else None
    print(f"[kbench: {make(root, want, pch_root)}]", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
