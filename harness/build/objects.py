"""Objects reused across builds: a store of compiled host files, keyed by content,
written only by kbench's own process.

The samples a policy draws for one prompt share their host file: load_inline writes the
same main.cpp (torch/extension.h and the bindings) for each, and compiling it is 17-27
CPU-s of a model-style build with the precompiled header (37 s without). A build
process runs solution code, so it may read the store, never write it (issue 31: a store
every build writes is one any build can poison). So:

- In a build process, torch's C++ compiler (`c++`, or CXX's) is shim.py (its folder, made
  here, is first on PATH, and CXX names it where CXX was set): a hit
  is copied into the build, a miss compiles as before and leaves a note.
- After the build, kbench's parent reads the notes (untrusted data). The first miss on a
  key is remembered; the second schedules publish() in a process of its own, which
  runs no solution code: it re-reads the source, accepts only torch's compile form with
  flags from pch.py's list and torch's own include folders, compiles the source with
  the compiler it finds itself, and publishes the object only when every header the
  compile read lies in the compiler's, torch's, CUDA's or Python's include folders (or
  kbench's PCH folder), none under a build, and the object does not name the folder it
  was compiled in (__FILE__): then it is the object the build would have made.
- A hit checks every header's sha256 and the object's before use.

Run as `python -m harness.build.objects STORE WANT.json` for one publish.
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

from . import shim
from .shim import stand_in
from ..shared import sandbox
from ..shared.whole_file import replace_whole

MAX_ENTRIES = 2000  # ~0.3-1 MB each
MAX_SOURCE = 16 << 20  # a host file kbench compiles for the store (load_inline's main.cpp: a few kB)
WANTS = "kbench-object-wants"  # the notes' folder in a build's scratch
HOST_WANTS = "kbench-nvcc-host-wants"  # notes of nvcc host compiles without a precompiled prefix
_KEY = re.compile(r"[0-9a-f]{32}")


# ---- the build process's side: its environment -----------------------------------

def shim_folder(store: Path, role: str) -> Path | None:
    """A folder holding one stand-in, `c++` or `gcc` (shim.py run by this Python), made
    by kbench beside the store where no build may write; None when it cannot be made."""
    folder = stand_in(store, role).parent
    script = (f'#!/bin/sh\n# kbench: harness/build/shim.py says what this is\nexec "{sys.executable}" -S '
              f'"{Path(shim.__file__).resolve()}" {role} "$@"\n')
    target = folder / role
    try:
        # Rewritten unless it is this script and executable: a stand-in left without its
        # mode (by an older kbench's race, or by hand) would fail every compile of the run.
        if not target.is_file() or target.read_text() != script or not os.access(target, os.X_OK):
            folder.mkdir(parents=True, exist_ok=True)
            replace_whole(target, script, 0o755)
    except OSError:
        return None
    return folder


def host_cc(env: dict) -> str | None:
    """nvcc's host compiler in a build with this environment: CC's where it names one
    (torch passes it to nvcc as -ccbin; CC=/opt/gcc/bin/gcc on the device machines), else
    `gcc` on PATH; None where CC is a command line or nothing is found."""
    return _program(env, "CC", "gcc")


def host_cxx(env: dict) -> str | None:
    """The C++ compiler torch runs in a build with this environment: CXX's where it names
    one (conda and many images set it: CXX=/opt/gcc/bin/g++ on the device machines, where
    a stand-in only for `c++` on PATH left every build without the store), else `c++`;
    found on PATH as a program. None where CXX is a command line (ccache g++: what it
    runs is not one compiler) or nothing is found."""
    return _program(env, "CXX", "c++")


def _program(env: dict, variable: str, default: str) -> str | None:
    named = (env.get(variable) or "").strip() or default
    if any(c.isspace() for c in named):
        return None
    return shutil.which(named, path=env.get("PATH"))


def build_env(store: Path, scratch: Path, env: dict) -> dict:
    """What a build process's environment gains: the stand-ins (c++ for torch's C++
    compiler, host_cxx; gcc for nvcc's host compiler, host_cc), first on PATH and named
    by CXX and CC where the environment set those; the compilers they stand for, the
    store, and where notes of misses go. Nothing for a compiler that is not found."""
    found = {}
    for role, variable in (("c++", "KBENCH_REAL_CXX"), ("gcc", "KBENCH_REAL_GCC")):
        real = host_cxx(env) if role == "c++" else host_cc(env)
        if real and _is_stand_in(real, store):
            real = None  # an outer kbench's stand-in: standing for it would run this one again
        if real:
            folder = shim_folder(store, role)
            if folder is not None:
                found[variable] = (real, folder)
    if not found:
        return {}
    path = os.pathsep.join([*(str(folder) for _, folder in found.values()), env.get("PATH", "")])
    out = {"PATH": path, **{v: real for v, (real, _) in found.items()}, "KBENCH_OBJECTS_DIR": str(store),
           "KBENCH_OBJECT_WANTS": str(scratch / WANTS), "KBENCH_NVCC_HOST_WANTS": str(scratch / HOST_WANTS)}
    # Where CXX or CC is set, torch runs CXX for C++ and passes CC to nvcc as -ccbin, not
    # `c++` and `gcc` from PATH: the stand-ins take their place.
    for variable, real_variable, role in (("CXX", "KBENCH_REAL_CXX", "c++"), ("CC", "KBENCH_REAL_GCC", "gcc")):
        if real_variable in found and (env.get(variable) or "").strip():
            out[variable] = str(stand_in(store, role))
    return out


def _is_stand_in(program: str, store: Path) -> bool:
    try:
        return Path(program).resolve().is_relative_to((store / "bin").resolve())
    except OSError:
        return False


# ---- the parent's side: which misses to compile ------------------------------------

def read_wants(scratch: Path, ext_dir: Path) -> list[dict]:
    """The notes a build's misses left, as far as they are well formed: a build process
    wrote them. A source must be a plain file in the build's own extensions folder."""
    out = []
    for path in sorted((scratch / WANTS).glob("*.json"))[:8]:
        try:
            want = json.loads(sandbox.read_written(path) or b"null")
        except ValueError:
            continue
        if not (isinstance(want, dict) and isinstance(want.get("key"), str) and _KEY.fullmatch(want["key"])
                and isinstance(want.get("args"), list) and all(isinstance(a, str) for a in want["args"])
                and isinstance(want.get("source"), str) and isinstance(want.get("cwd"), str)
                and isinstance(want.get("env"), dict) and all(isinstance(v, str) for v in want["env"].values())):
            continue
        source = Path(want["source"])
        if source.is_symlink() or not source.is_file() or not source.resolve().is_relative_to(ext_dir.resolve()):
            continue
        out.append({k: want[k] for k in ("key", "args", "source", "cwd", "env")})
    return out


def worth_publishing(store: Path, key: str) -> bool:
    """A second miss on a key (in this run or an earlier one), not published, not found
    unpublishable, and room in the store. The first miss is remembered: a host file no
    other build shares costs nothing more than it did."""
    if (store / key).exists() or (store / "unusable" / key).exists():
        return False
    seen = store / "seen" / key
    try:
        if not seen.exists():
            seen.parent.mkdir(parents=True, exist_ok=True)
            seen.touch()
            return False
        return sum(1 for _ in store.glob("*/manifest.json")) < MAX_ENTRIES
    except OSError:
        return False


# ---- publishing (a process of its own; no solution code runs there) ------------------

def trusted_folders(compiler: str, includes: list[str]) -> list[str]:
    """Where a published object's headers may lie: the -isystem folders of its compile
    (torch's, CUDA's, Python's, checked by _checked_args) and the compiler's own."""
    return [os.path.realpath(p) for p in includes + _compiler_includes(compiler)]


def _compiler_includes(compiler: str) -> list[str]:
    done = subprocess.run([compiler, "-x", "c++", "-E", "-v", "/dev/null", "-o", "/dev/null"], capture_output=True,
                          text=True, env={**os.environ, "LC_ALL": "C"})
    lines = done.stderr.splitlines()
    try:
        start = lines.index("#include <...> search starts here:") + 1
        end = lines.index("End of search list.")
    except ValueError:
        return []
    return [ln.strip() for ln in lines[start:end]]


def _torch_includes() -> list[str]:
    import torch.utils.cpp_extension as cpp_extension

    folders = list(cpp_extension.include_paths("cpu"))
    try:
        folders += cpp_extension.include_paths("cuda")
    except (OSError, EnvironmentError):
        pass  # no CUDA here: CPU builds only
    return folders + [sysconfig.get_path("include", scheme="posix_prefix")]


def _checked_args(args: list[str], torch_includes: list[str]) -> list[str] | None:
    """The includes of an argument list that is torch's compile rule with flags kbench
    would precompile for (pch.py's list), else None: any other flag may run code in
    kbench's process (-fplugin=, -B, -wrapper, a specs file) or write elsewhere. An
    -isystem folder is one of torch's exactly as torch names it: one that only resolves
    to it (`TORCH/../x/..`, a link in /dev/shm) may be another by the time gcc reads it."""
    from . import pch

    includes, i = [], 0
    while i < len(args):
        a = args[i]
        if a in ("-MF", "-o", "-c"):
            i += 2
            continue
        if a == "-isystem":
            if args[i + 1] not in torch_includes:
                return None
            includes.append(args[i + 1])
            i += 2
            continue
        if a not in ("-MMD", "-fPIC") and not pch._safe(a):
            return None
        i += 1
    return includes


def _checked_env(env: dict, pch_root: Path | None) -> dict | None:
    """gcc's variables of the build's compile: only CPATH, and only kbench's PCH folders,
    named as pch.on_include_path names them (<root>/<key>, no link)."""
    if set(env) - {"CPATH"}:
        return None
    for folder in filter(None, env.get("CPATH", "").split(os.pathsep)):
        if pch_root is None or os.path.dirname(folder) != str(pch_root) \
                or not re.fullmatch(r"[\w.-]+", os.path.basename(folder)) or os.path.islink(folder):
            return None
    return env


def _deps(text: str) -> list[str]:
    """The files of a gcc depfile (no escaped spaces: shim.parse refuses such paths)."""
    body = text.replace("\\\n", " ").split(":", 1)[1]
    return [p for p in body.split() if p != "\\"]


def publish(store: Path, want: dict, pch_root: Path | None = None, timeout: float = 600.0) -> str:
    """Compile a build's missed source here and publish the entry; returns what happened.
    An entry that cannot be published is marked, so that it is not tried again."""
    # A note is a build process's word: its key is taken only where kbench derives the same
    # one from the note's source, flags and environment; before that nothing is marked, or
    # a forged note could mark a victim's key unusable.
    compile_ = shim.parse(want["args"])
    compiler = host_cxx(dict(os.environ))  # kbench's own environment's compiler, never the note's
    source = sandbox.read_written(want["source"], limit=MAX_SOURCE)
    if compile_ is None or compiler is None or source is None or set(want["env"]) - set(shim.GCC_ENV):
        return "skipped: not torch's compile form of a source kbench can read"
    gcc_env = {k: v for k, v in os.environ.items() if k not in shim.GCC_ENV and k not in shim._SECOND_DEPFILE}
    gcc_env.update(want["env"], LC_ALL="C")
    key = shim.key(shim.describe(compiler), compile_, gcc_env, source)
    if key != want["key"]:
        return "skipped: the build's compiler or environment is not kbench's"
    includes = _checked_args(want["args"], _torch_includes())
    if includes is None or _checked_env(want["env"], pch_root) is None:
        return _unusable(store, key, "flags or environment outside kbench's list")
    store.mkdir(parents=True, exist_ok=True)
    with open(store / f"{key}.lock", "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return "another process is publishing it"
        if (store / key).exists():
            return "published already"
        return _compile_and_publish(store, key, compile_, source, compiler, includes, gcc_env, timeout)


def _compile_and_publish(store: Path, key: str, compile_: shim.Compile, source: bytes, compiler: str,
                         includes: list[str], env: dict, timeout: float) -> str:
    tmp = store / "tmp" / f"{key}.{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        name = os.path.basename(compile_.source)
        (tmp / name).write_bytes(source)
        # The output's name is no part of the key (each build names its own), so it is
        # kbench's: a note's could name a file this compile also writes (object.d, all.d).
        here = shim.Compile(compile_.args, str(tmp / name), "object.o", str(tmp / "object.d"))
        args = [{"@DEP@": here.depfile, "@OUT@": here.output}.get(a, a) for a in here.normalized()]
        args = [here.source if a.startswith("@SRC@/") else a for a in args]
        env = {**env, "TMPDIR": str(tmp)}
        t0 = time.monotonic()
        made = subprocess.run([compiler, *args], cwd=tmp, env=env, capture_output=True, text=True, timeout=timeout)
        if made.returncode != 0:
            return _unusable(store, key, f"the compile failed: {made.stderr.strip().splitlines()[-1:]}")
        # Every header it read (-MMD names only those outside system folders): gcc -M.
        listed = subprocess.run([compiler, *_flags_only(args), "-M", "-MF", str(tmp / "all.d"), "-E", here.source,
                                 "-o", os.devnull], cwd=tmp, env=env, capture_output=True, text=True, timeout=timeout)
        seconds = time.monotonic() - t0
        if listed.returncode != 0:
            return _unusable(store, key, "gcc -M failed")
        headers = [os.path.realpath(p) for p in _deps((tmp / "all.d").read_text()) if os.path.realpath(p) !=
                   os.path.realpath(here.source)]
        trusted = trusted_folders(compiler, includes) + [os.path.realpath(p) for p in env.get("CPATH", "").split(os.pathsep) if p]
        outside = [h for h in headers if not any(Path(h).is_relative_to(t) for t in trusted)]
        if outside:
            return _unusable(store, key, f"reads {outside[0]}, outside the toolchain's, torch's and kbench's folders")
        obj = (tmp / here.output).read_bytes()
        if str(tmp).encode() in obj:
            return _unusable(store, key, "the object names the folder it was compiled in (__FILE__)")
        depfile = (tmp / "object.d").read_text().replace(here.source, "@SRC@")
        depfile = "@OUT@" + depfile[depfile.index(":"):]
        entry = tmp / "entry"
        entry.mkdir()
        (entry / "object.o").write_bytes(obj)
        (entry / "manifest.json").write_text(json.dumps({
            "object": hashlib.sha256(obj).hexdigest(), "depfile": depfile, "compiler": compiler,
            "args": list(compile_.normalized()), "env": {k: env[k] for k in shim.GCC_ENV if k in env},
            "seconds": round(seconds, 1), "headers": [[h, shim.sha256_file(h)] for h in headers]}, indent=0))
        os.rename(entry, store / key)  # atomic: a build sees the whole entry or none
        return f"published {key} ({len(headers)} headers, {seconds:.1f} s)"
    except (OSError, ValueError, subprocess.SubprocessError) as e:
        return f"not published: {e!r}"
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _flags_only(args: list[str]) -> list[str]:
    """A compile's flags without its input, output and dependency file."""
    out, skip = [], False
    for a in args:
        if skip or a == "-MMD":
            skip = False
            continue
        skip = a in ("-MF", "-o", "-c")
        if not skip:
            out.append(a)
    return out


def _unusable(store: Path, key: str, why: str) -> str:
    try:
        (store / "unusable").mkdir(parents=True, exist_ok=True)
        (store / "unusable" / key).write_text(why + "\n")
    except OSError:
        pass
    return f"unusable: {why}"


def main(store: str, want_path: str) -> int:
    root = Path(store)
    # No solution code runs here; the walls are for the compiler, which reads a
    # solution's text: it may write the store and nothing else.
    sandbox.confine([str(root)], "object publisher")
    want = json.loads(Path(want_path).read_text())
    pch_root = Path(os.environ["KBENCH_PCH_DIR"]) if os.environ.get("KBENCH_PCH_DIR") else None
    print(f"[kbench: {publish(root, want, pch_root)}]", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
