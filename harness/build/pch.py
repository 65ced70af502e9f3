"""A precompiled torch/extension.h for solutions' host (C++) files, kept in kbench's cache.

Every load_inline solution's .cpp starts with `#include <torch/extension.h>`, and
parsing it is most of that file's compile time (on an H100 host 21 s drop to 8-9 s
with a precompiled header). gcc looks for NAME.gch beside each header it includes,
in every folder of the include path before NAME itself, and uses it only when it was
made with compatible flags (otherwise it reads the header as usual). So kbench keeps
one folder per toolchain and exact flag set, <cache>/pch/<key>/torch/ holding
extension.h.gch and a copy of extension.h (gcc opens the header too), and puts
<cache>/pch/<key> on CPATH while a build process runs load_inline. CPATH folders are
searched after -I folders and before -isystem ones, where torch puts its headers, so
the .gch is found first, and the compile command, hence torch's build.ninja that the
worker later finds up to date, does not change.

torch's own load_inline(use_pch=True) is not used: it writes the .gch into torch's
install folder (often read-only, and shared by builds running in parallel), and every
load_inline call without use_pch deletes it again.

A PCH is made by a process of its own (python -m harness.build.pch), never by a build
process: that one runs solution code, and the time would count against the
solution's build timeout. build_all schedules one when a build asked for a missing
one and enough builds still wait to pay it back. It is checked with gcc's
-Winvalid-pch before it is published, by renaming its folder, so a build sees a
whole PCH or none; one that gcc would not use is recorded as unusable, not retried.
"""
from __future__ import annotations

import fcntl
import functools
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

HEADER = "torch/extension.h"
MAX_PER_TOOLCHAIN = 4  # ~0.8 GB each with torch 2.13 (CPU); more with a CUDA build of torch
# The flags a PCH is made for: what solutions pass in practice (-O3, -march=native,
# -ffast-math, -fopenmp, -std=c++17, -DNDEBUG, -Wno-...). Anything else (-I, -include,
# -fplugin=, a path) builds as before, without a PCH.
_SAFE_FLAG = re.compile(
    r"-O[0-3sgz]?|-Ofast|-g[0-3]?|-w|-pthread|-std=(c|gnu)\+\+\w+|-[DU][A-Za-z_]\w*(=[\w.+-]*)?|-W[a-z][\w=+-]*"
    r"|-f[a-z][a-z0-9-]*|-m(arch|tune|cpu)=[\w.+-]+|-m[a-z][a-z0-9.-]*")
_UNSAFE_F = re.compile(r"-f(no-)?(plugin|dump|profile|auto-profile|save|stack-usage|callgraph|pch|preprocessed"
                       r"|directives-only|working-directory|debug-prefix|file-prefix|macro-prefix)")


@dataclass(frozen=True)
class Request:
    """The PCH a host compile can use: torch's compiler and its exact flags for the
    .cpp, less -DTORCH_EXTENSION_NAME (which differs per extension and which torch's
    headers do not read; gcc checks that)."""
    cxx: str
    cflags: tuple[str, ...]
    toolchain: str  # hash of the compiler, torch and its header
    key: str  # the folder's name: <toolchain>-<flags hash>


def wanted(arguments: dict) -> dict | None:
    """What a load_inline/load call needs a PCH for, as JSON-able data (a build
    process reports it; the parent and the PCH process derive the Request from it),
    or None when the call's host file is not one kbench precompiles for."""
    flags = arguments.get("extra_cflags") or []
    if isinstance(flags, str) or not all(isinstance(f, str) for f in flags):
        return None  # torch would not build it as the author meant either
    if arguments.get("extra_include_paths") or arguments.get("with_sycl") or arguments.get("sycl_sources"):
        return None  # a user folder could shadow a header the PCH holds; SYCL is not gcc
    with_cuda = arguments.get("with_cuda")
    if with_cuda is None:
        sources = arguments.get("sources") or []
        sources = [sources] if isinstance(sources, str) else sources
        with_cuda = bool(arguments.get("cuda_sources")) or any(str(s).endswith((".cu", ".cuh")) for s in sources)
    return {"extra_cflags": [f.strip() for f in flags], "with_cuda": bool(with_cuda)}


def request_for(extra_cflags: list[str], with_cuda: bool) -> Request | None:
    """The Request for these flags, or None: flags outside the known set, a compiler
    that is not gcc, or no torch header to precompile."""
    if not isinstance(extra_cflags, list) or not all(isinstance(f, str) and _safe(f) for f in extra_cflags):
        return None
    import torch.utils.cpp_extension as cpp_extension

    cxx = cpp_extension.get_cxx_compiler()
    identity = _compiler_identity(cxx)
    if identity is None:
        return None
    cflags = _torch_cflags(tuple(extra_cflags), bool(with_cuda))
    if cflags is None:
        return None
    header = _torch_header()
    if header is None:
        return None
    import torch

    toolchain = hashlib.sha256("\0".join([identity, torch.__version__, str(torch.version.git_version), str(header),
                                          header.read_text(errors="replace")]).encode())
    flags = hashlib.sha256("\0".join(cflags).encode()).hexdigest()[:16]
    tc = toolchain.hexdigest()[:12]
    return Request(cxx, cflags, tc, f"{tc}-{flags}")


@functools.lru_cache(maxsize=None)
def _torch_cflags(extra_cflags: tuple[str, ...], with_cuda: bool) -> tuple[str, ...] | None:
    """The flags torch gives a load_inline build's .cpp, in its order, less
    -DTORCH_EXTENSION_NAME: read from the build.ninja torch itself writes for them
    (nothing is compiled). They differ between torch versions (-std=c++17 in torch 2.11,
    -std=c++20 in 2.13), and gcc uses a PCH only where the language flags match: a list
    written here once held 2.13's -std=c++20, and on a torch 2.11 host gcc passed the
    PCH over ("`__cpp_impl_three_way_comparison' not defined") in every build. None
    where torch's private writer is not as expected: then no PCH, builds as before."""
    import torch.utils.cpp_extension as cpp_extension

    # An -arch flag of the user's makes torch skip its arch list, which otherwise asks the
    # GPUs for their capability (CUDA initialized in kbench's parent); the .cpp's flags,
    # the only ones read, do not hold it.
    try:
        with tempfile.TemporaryDirectory(prefix="kbench-pch-flags-") as tmp:
            ninja = os.path.join(tmp, "build.ninja")
            cpp_extension._write_ninja_file_to_build_library(
                path=ninja, name="kbench_pch_flags", sources=[os.path.join(tmp, "main.cpp")],
                extra_cflags=list(extra_cflags), extra_cuda_cflags=["-arch=sm_90"], extra_sycl_cflags=[],
                extra_ldflags=[], extra_include_paths=[], with_cuda=with_cuda, with_sycl=False, is_standalone=False)
            line = next(ln for ln in Path(ninja).read_text().splitlines() if ln.startswith("cflags = "))
    except Exception:  # a CUDA build without CUDA_HOME, a torch whose writer changed: no PCH
        return None
    return tuple(f for f in shlex.split(line[len("cflags = "):]) if not f.startswith("-DTORCH_EXTENSION_NAME="))


def _safe(flag: str) -> bool:
    return bool(_SAFE_FLAG.fullmatch(flag)) and not _UNSAFE_F.match(flag)


@functools.lru_cache(maxsize=None)
def _compiler_identity(cxx: str) -> str | None:
    """gcc's own description of itself (version, target, configuration), or None
    for a compiler that is not gcc (clang does not look for NAME.gch this way)."""
    path = shutil.which(cxx)
    if path is None or not sys.platform.startswith("linux"):
        return None
    path = _past_the_stand_in(path)
    try:
        out = subprocess.run([path, "-v"], capture_output=True, text=True, timeout=30,
                             env={**os.environ, "LC_ALL": "C"}).stderr
    except (OSError, subprocess.SubprocessError):
        return None
    if "gcc version" not in out or "clang" in out.lower():
        return None
    return f"{os.path.realpath(path)}\n{out}"


def _past_the_stand_in(path: str) -> str:
    """The compiler itself where `path` is kbench's `c++` stand-in (shim.py, first on a
    build process's PATH: objects.build_env), which runs it with the same arguments.
    The PCH is keyed by the compiler the parent saw when it made it: keyed by the
    stand-in's path, a build process looked for a PCH under a key no process makes, and
    every host compile parsed torch/extension.h again (28 s instead of 13 on the 2-core box)."""
    from .shim import stand_in

    real, store = os.environ.get("KBENCH_REAL_CXX"), os.environ.get("KBENCH_OBJECTS_DIR")
    if real and store and Path(path).parent == stand_in(Path(store), "c++").parent:
        return real
    return path


def _torch_header() -> Path | None:
    import torch.utils.cpp_extension as cpp_extension

    header = Path(cpp_extension.include_paths("cpu")[0]) / HEADER
    return header if header.is_file() else None


# ---- the cache folder ---------------------------------------------------------

def ready(root: Path, request: Request) -> Path | None:
    """The folder to put on CPATH, when this PCH was made and found usable."""
    folder = root / request.key
    return folder if (folder / (HEADER + ".gch")).is_file() else None


def should_build(root: Path, request: Request) -> bool:
    """Not made yet, not found unusable, room for it, and a folder kbench may write."""
    folder = root / request.key
    if folder.exists():
        return False
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError:
        return False
    if not os.access(root, os.W_OK):
        return False
    return len(list(root.glob(f"{request.toolchain}-*/{HEADER}.gch"))) < MAX_PER_TOOLCHAIN


@contextmanager
def on_include_path(root: str | None, arguments: dict, wants: list[dict]):
    """Around one load_inline/load call in a build process: its PCH's folder on CPATH
    when that PCH is ready (ninja and gcc inherit the environment); otherwise the call
    runs as it would without kbench, and what it wanted is appended to `wants`."""
    folder = None
    try:
        want = wanted(arguments) if root else None
        request = request_for(**want) if want else None
        folder = ready(Path(root), request) if request else None
        if request and folder is None and not (Path(root) / request.key).exists():
            wants.append(want)
    except Exception as e:  # noqa: BLE001 - a PCH is an optimization; the build goes on without it
        print(f"[kbench: no precompiled header: {e!r}]", flush=True)
    if folder is None:
        yield None
        return
    before = os.environ.get("CPATH")
    os.environ["CPATH"] = os.pathsep.join(p for p in (str(folder), before) if p)
    print(f"[kbench: torch/extension.h precompiled in {folder}]", flush=True)
    try:
        yield folder
    finally:
        if before is None:
            os.environ.pop("CPATH", None)
        else:
            os.environ["CPATH"] = before


# ---- making one (in its own process) --------------------------------------------

def build(root: Path, request: Request) -> str:
    """Make and check the PCH, then publish its folder; returns what happened.
    Two kbench runs may share a cache: one makes it, the other leaves it be."""
    root.mkdir(parents=True, exist_ok=True)
    with open(root / f"{request.key}.lock", "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return "another process is making it"
        final = root / request.key
        if final.exists():
            return "made already"
        tmp = root / f"{request.key}.tmp"  # left over when a PCH process was killed
        shutil.rmtree(tmp, ignore_errors=True)
        header = tmp / HEADER
        header.parent.mkdir(parents=True)
        shutil.copyfile(_torch_header(), header)
        t0 = time.monotonic()
        made = subprocess.run([request.cxx, "-x", "c++-header", str(header), "-o", f"{header}.gch", *request.cflags],
                              capture_output=True, text=True)
        seconds = time.monotonic() - t0
        problem = _check(tmp, request) if made.returncode == 0 else _reason(made.stderr, "gcc failed")
        if problem:
            shutil.rmtree(header.parent)
            (tmp / "unusable").write_text(problem + "\n")
        else:
            (tmp / "pch.json").write_text(json.dumps({"cxx": request.cxx, "cflags": request.cflags,
                                                      "seconds": round(seconds, 1)}, indent=1))
        os.rename(tmp, final)  # atomic: a build sees the whole folder or none
        return f"unusable: {problem}" if problem else f"made in {seconds:.1f} s: {final}"


def _check(folder: Path, request: Request) -> str:
    """'' when gcc uses the PCH for a file that includes the header under the flags
    of a real build (with its own -DTORCH_EXTENSION_NAME); else why not."""
    probe = folder / "probe.cpp"
    probe.write_text(f"#include <{HEADER}>\n")
    env = {**os.environ, "LC_ALL": "C",
           "CPATH": os.pathsep.join(p for p in (str(folder), os.environ.get("CPATH")) if p)}
    done = subprocess.run([request.cxx, "-DTORCH_EXTENSION_NAME=kbench_pch_probe", *request.cflags, "-Winvalid-pch",
                           "-H", "-fsyntax-only", str(probe)], capture_output=True, text=True, env=env)
    probe.unlink()
    return why_unused(done)


def why_unused(done: subprocess.CompletedProcess) -> str:
    """'' when a gcc run with -H -Winvalid-pch used a PCH; else gcc's reason not to."""
    # -H names each header it opens; a PCH line starts with '!' when used, 'x' when not.
    line = next((ln for ln in done.stderr.splitlines() if ln.endswith(".gch")), "")
    if done.returncode == 0 and line.startswith("! "):
        return ""
    warning = next((ln for ln in done.stderr.splitlines() if "Winvalid-pch" in ln or "not used" in ln), "")
    return warning or line or _reason(done.stderr, "the check did not compile")


def _reason(text: str, fallback: str) -> str:
    """gcc's first error line, else its last line, else `fallback`."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    first_error = next((ln for ln in lines if "error" in ln), lines[-1] if lines else fallback)
    return first_error[:300]


def main(root: str, want_json: str) -> int:
    want = json.loads(want_json)
    request = request_for(want.get("extra_cflags"), bool(want.get("with_cuda")))
    if request is None:
        print("[kbench: no PCH for these flags]")
        return 1
    print(f"[kbench: PCH {request.key}: {' '.join(request.cflags)}]", flush=True)
    print(f"[kbench: {build(Path(root), request)}]", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
