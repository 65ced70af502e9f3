"""kbench's stand-ins for the compilers a build process runs: `c++` (torch's C++
compiler) and `gcc` (nvcc's host compiler). A compile whose object kbench's store holds
is not compiled again, and nvcc's host compile reads torch's headers from a precompiled
prefix where kbench made one.

Run as `shim.py c++|gcc ARGS...` by the scripts objects.shim_folder makes, which are first
on a build process's PATH: torch's build.ninja (`cxx = c++`, nvcc by its full path) is
unchanged, so the candidate's loader finds the build up to date. Inside the build's
sandbox; the standard library only, and run as a script: it starts for every compiler
call (versions, the link, nvcc's preprocessing), so it must start fast.

c++:

- A compile in torch's form (`-MMD -MF DEP FLAGS -c SRC -o OUT`) is looked up in the store
  (KBENCH_OBJECTS_DIR) by key(): the compiler's own description, the exact flags, the
  environment variables gcc reads, the source's name and text. On a hit whose headers
  are all unchanged (each file's sha256 as the entry recorded it) the object is copied
  to OUT and DEP is written as gcc would have written it: nothing is compiled.
- Anything else runs the real compiler (KBENCH_REAL_CXX) with the same arguments. A miss
  leaves a note in the build's scratch folder (KBENCH_OBJECT_WANTS); kbench's parent reads
  it after the build and may compile that source itself and publish it (objects.py).

gcc, for nvcc's host compile of cudafe++'s output (X.cudafe1.cpp: torch's headers as
cudafe++ rewrote them, then the solution's code): where kbench made a precompiled
prefix for these flags (host_pch.py) and the file starts with exactly that prefix, once
its anonymous namespaces are given the prefix's name (cudafe++ names them after a module
id that differs with each build's folder, so no two builds agree on it anyway), the
prefix is replaced by an #include of it, found precompiled. Should that compile fail,
the file is restored and compiled as nvcc wrote it, and only that compile's output is
seen. A miss leaves a note with nvcc's command line (KBENCH_NVCC_HOST_WANTS).

This code reads the store and never writes it: a build process runs solution code.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

SALT = "kbench-object-1"
# What gcc reads from its environment that can change an object or the headers it finds.
GCC_ENV = ("CPATH", "CPLUS_INCLUDE_PATH", "C_INCLUDE_PATH", "GCC_EXEC_PREFIX", "COMPILER_PATH", "SOURCE_DATE_EPOCH",
           "GCC_COMPARE_DEBUG")
# gcc writes a second dependency file where these are set: such a compile runs as is.
_SECOND_DEPFILE = ("DEPENDENCIES_OUTPUT", "SUNPRO_DEPENDENCIES")
_WITH_VALUE = ("-MF", "-o", "-c", "-isystem")
_PLAIN_PATH = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./+=,@%")
SOURCE_SUFFIXES = (".cpp", ".cc", ".cxx")


@dataclass(frozen=True)
class Compile:
    """One compile of one source in torch's form; paths as given on the command line."""
    args: tuple[str, ...]  # everything after the compiler
    source: str
    output: str
    depfile: str

    def normalized(self) -> tuple[str, ...]:
        """The arguments with this build's own paths replaced: the depfile and object
        names, and the source's folder (its name stays: gcc names the object's static
        constructor after it). A source that names its own path (__FILE__) is not
        published (objects.py), so the folder cannot reach an object in the store."""
        out, skip = [], None
        for a in self.args:
            if skip:
                out.append({"-MF": "@DEP@", "-o": "@OUT@", "-c": "@SRC@/" + os.path.basename(a)}.get(skip, a))
                skip = None
                continue
            out.append(a)
            skip = a if a in _WITH_VALUE else None
        return tuple(out)


def stand_in(store: Path, role: str) -> Path:
    """Where kbench puts the stand-in for `role` ("c++" or "gcc") beside the object store
    (objects.shim_folder writes it; pch.py looks for it)."""
    return store / "bin" / role.replace("+", "x") / role


def parse(args: list[str]) -> Compile | None:
    """torch's compile rule (`-MMD -MF DEP FLAGS -c SRC -o OUT`), or None for any other
    call: a link, a version query, a response file, a second input, paths gcc's
    depfile would escape."""
    if "-MMD" not in args or any(args.count(f) != 1 for f in ("-c", "-o", "-MF")) or args[-1] in _WITH_VALUE:
        return None
    values = {}
    for i, a in enumerate(args):
        if a.startswith("@"):
            return None
        if a in _WITH_VALUE:
            values.setdefault(a, args[i + 1])
        elif not a.startswith("-") and (i == 0 or args[i - 1] not in _WITH_VALUE):
            return None  # an input file beside -c's: not one source, one object
    source, output, depfile = values["-c"], values["-o"], values["-MF"]
    if not source.endswith(SOURCE_SUFFIXES) or not all(set(p) <= _PLAIN_PATH for p in (source, output, depfile)):
        return None
    return Compile(tuple(args), source, output, depfile)


def describe(compiler: str) -> str:
    """The compiler as it describes itself (real path, version, configuration)."""
    done = subprocess.run([compiler, "-v"], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "LC_ALL": "C"})
    return f"{os.path.realpath(compiler)}\n{done.stderr}"


def native_cpu() -> str:
    """What -march=native (or -mtune=, -mcpu=) compiles for: this host's CPU, as the kernel
    describes its first core (vendor, family, model, flags)."""
    try:
        with open("/proc/cpuinfo") as f:
            first = f.read(1 << 16).split("\n\n", 1)[0]
    except OSError:
        return "unknown"
    wanted = ("vendor_id", "cpu family", "model", "model name", "flags", "CPU implementer", "CPU part", "Features")
    return "\n".join(ln for ln in first.splitlines() if ln.split(":", 1)[0].strip() in wanted)


def key(description: str, compile_: Compile, env: dict, source: bytes) -> str:
    """The store's key of a compile: the compiler, the exact flags, gcc's variables, the
    source's name and text, and the host's CPU where a flag says `native` (a cache may be
    shared by hosts, as a Dask cluster's home folder is)."""
    h = hashlib.sha256()
    native = [native_cpu()] if any(a.endswith("=native") for a in compile_.args) else []
    for part in (SALT, description, *compile_.normalized(), *(f"{k}={env.get(k, '')}" for k in GCC_ENV), *native):
        h.update(part.encode() + b"\0")
    h.update(source)
    return h.hexdigest()[:32]


def sha256_file(path: str) -> str | None:
    try:
        with open(path, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()
    except OSError:
        return None


def depfile_text(template: str, compile_: Compile) -> str:
    return template.replace("@OUT@", compile_.output).replace("@SRC@", compile_.source)


# What torch's loader and ninja leave beside a source (and this stand-in's temporary
# file). kbench compiles a published source alone in a folder of its own, so a source
# that includes one of these fails there and is never published.
_TORCH_FILES = re.compile(r"main\.cpp|cuda\.cu|build\.ninja|\.ninja_\w+|lock|[\w.-]+\.(o|d|so|kbench-tmp)")


def alone(source: str) -> bool:
    """Nothing beside the source but torch's own files: gcc looks for `#include "x"` there
    first, so a header of the build's own there (or one a candidate put there) would make
    its compile differ from the object kbench made without it."""
    folder = os.path.dirname(os.path.abspath(source))
    try:
        names = os.listdir(folder)
    except OSError:
        return False
    return all(n == os.path.basename(source) or _TORCH_FILES.fullmatch(n) for n in names)


def reuse(entry: Path, compile_: Compile) -> bool:
    """Copy the entry's object to the compile's output and write its depfile, when every
    header it read is unchanged, the object is the one recorded, and nothing beside the
    source could stand in for a header (alone)."""
    if not alone(compile_.source):
        return False
    try:
        manifest = json.loads((entry / "manifest.json").read_text())
        obj = (entry / "object.o").read_bytes()
    except (OSError, ValueError):
        return False
    if hashlib.sha256(obj).hexdigest() != manifest.get("object"):
        return False
    if any(sha256_file(path) != digest for path, digest in manifest.get("headers", [])):
        return False
    tmp = f"{compile_.output}.kbench-tmp"
    with open(tmp, "wb") as f:
        f.write(obj)
    os.replace(tmp, compile_.output)
    with open(compile_.depfile, "w") as f:
        f.write(depfile_text(manifest["depfile"], compile_))
    return True


def note_miss(folder: str, key_: str, compile_: Compile, compiler: str, env: dict) -> None:
    """What kbench's parent needs to compile this source itself (objects.publish)."""
    try:
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, f"{key_}.json"), "w") as f:
            json.dump({"key": key_, "args": list(compile_.args), "source": os.path.abspath(compile_.source),
                       "cwd": os.getcwd(), "compiler": compiler,
                       "env": {k: env[k] for k in GCC_ENV if k in env}}, f)
    except OSError:
        pass  # a note is an optimization for later builds


# ---- gcc: nvcc's host compile ---------------------------------------------------------
HOST_SUFFIX = ".cudafe1.cpp"
_HOST_VALUES = ("-o", "-x", "-isystem", "-include", "-imacros", "-idirafter", "-iquote", "-MF", "-MT", "-MQ")
_ANON = re.compile(rb"(?<![A-Za-z0-9_])_GLOBAL__N__(\w+)")


def parse_host(args: list[str]) -> tuple[str, tuple[str, ...]] | None:
    """(input, normalized arguments) for nvcc's host compile (`-c -x c++ ... X.cudafe1.cpp
    -o OUT`), else None."""
    if args.count("-c") != 1 or args.count("-o") != 1 or "-x" not in args or args[args.index("-x") + 1] != "c++":
        return None
    inputs = [a for i, a in enumerate(args) if not a.startswith("-") and (i == 0 or args[i - 1] not in _HOST_VALUES)]
    if len(inputs) != 1 or not inputs[0].endswith(HOST_SUFFIX) or any(a.startswith("@") for a in args):
        return None
    out = args.index("-o") + 1
    normalized = tuple("@OUT@" if i == out else "@SRC@" if a == inputs[0] else a for i, a in enumerate(args))
    return inputs[0], normalized


def host_key(description: str, normalized: tuple[str, ...], env: dict) -> str:
    h = hashlib.sha256()
    for part in (SALT, "nvcc-host", description, *normalized, *(f"{k}={env.get(k, '')}" for k in GCC_ENV)):
        h.update(part.encode() + b"\0")
    return h.hexdigest()[:32]


def with_prefix(text: bytes, prefix_id: bytes, prefix_len: int, prefix_sha: str, include: str) -> bytes | None:
    """The file with its prefix replaced by `#include "INCLUDE"` (line 1, cudafe++'s
    line marker for the .cu, stays first), its anonymous namespaces renamed to the
    prefix's; None unless what follows line 1 starts with exactly the prefix."""
    found = _ANON.search(text)
    if found and found.group(1) != prefix_id:
        if re.search(rb"(?<![A-Za-z0-9_])_GLOBAL__N__" + re.escape(prefix_id) + rb"(?![A-Za-z0-9_])", text):
            return None  # the prefix's name is taken: renaming would merge two namespaces
        text = re.sub(rb"(?<![A-Za-z0-9_])_GLOBAL__N__" + re.escape(found.group(1)) + rb"(?![A-Za-z0-9_])",
                      b"_GLOBAL__N__" + prefix_id, text)
    start = text.find(b"\n") + 1
    if start == 0 or hashlib.sha256(text[start:start + prefix_len]).hexdigest() != prefix_sha:
        return None
    return text[:start] + f'#include "{include}"\n'.encode() + text[start + prefix_len:]


def nvcc_command() -> list[str] | None:
    """The command line of the nvcc that runs this gcc (an ancestor process)."""
    pid = os.getppid()
    for _ in range(4):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[:-1]
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return None
        if argv and os.path.basename(argv[0].decode(errors="replace")) == "nvcc":
            return [a.decode(errors="replace") for a in argv]
        pid = int(stat.rsplit(")", 1)[1].split()[1])
    return None


def host_compile(real: str, argv: list[str]) -> None:
    """nvcc's host compile through a precompiled prefix, when one fits; returns when it
    did not run (the caller runs the compile as nvcc wrote it)."""
    parsed = parse_host(argv)
    store = os.environ.get("KBENCH_OBJECTS_DIR")
    if parsed is None or not store or any(k in os.environ for k in _SECOND_DEPFILE):
        return
    source, normalized = parsed
    try:
        key_ = host_key(describe(real), normalized, dict(os.environ))
        folder = Path(store) / "nvcc-host" / key_
        entries = sorted(folder.glob("*/manifest.json"))
        if not entries:
            if os.environ.get("KBENCH_NVCC_HOST_WANTS"):
                note_host_miss(os.environ["KBENCH_NVCC_HOST_WANTS"], key_, argv)
            return
        with open(source, "rb") as f:
            original = f.read()
        for manifest_path in entries:
            manifest = json.loads(manifest_path.read_text())
            include = manifest_path.parent / "prefix.h"
            text = with_prefix(original, manifest["module_id"].encode(), manifest["prefix_bytes"], manifest["sha256"],
                               str(include))
            if text is None:
                continue
            with open(source, "wb") as f:
                f.write(text)
            done = subprocess.run([real, *argv], capture_output=True)
            if done.returncode == 0:
                sys.stdout.buffer.write(done.stdout)
                sys.stderr.buffer.write(done.stderr)
                sys.exit(0)
            with open(source, "wb") as f:  # as nvcc wrote it: the compile below is today's
                f.write(original)
            return
    except (OSError, ValueError, KeyError, TypeError, subprocess.SubprocessError):
        return


def note_host_miss(folder: str, key_: str, argv: list[str]) -> None:
    nvcc = nvcc_command()
    if nvcc is None:
        return
    try:
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, f"{key_}.json"), "w") as f:
            json.dump({"key": key_, "host_args": argv, "nvcc": nvcc,
                       "env": {k: os.environ[k] for k in GCC_ENV if k in os.environ}}, f)
    except OSError:
        pass


def main(role: str, argv: list[str]) -> None:
    real = os.environ.get({"c++": "KBENCH_REAL_CXX", "gcc": "KBENCH_REAL_GCC"}.get(role, ""), "")
    if not real:
        print(f"kbench {role} stand-in: the real compiler is not set", file=sys.stderr)
        sys.exit(127)
    if role == "gcc":
        host_compile(real, argv)
        os.execv(real, [real, *argv])
    compile_ = parse(argv)
    store = os.environ.get("KBENCH_OBJECTS_DIR")
    if compile_ is not None and store and not any(k in os.environ for k in _SECOND_DEPFILE):
        try:
            with open(compile_.source, "rb") as f:
                source = f.read()
            key_ = key(describe(real), compile_, dict(os.environ), source)
        except (OSError, subprocess.SubprocessError):
            key_ = None
        if key_ is not None:
            if reuse(Path(store) / key_, compile_):
                print(f"[kbench: {os.path.basename(compile_.output)} reused from {store}/{key_}]", file=sys.stderr)
                sys.exit(0)
            if os.environ.get("KBENCH_OBJECT_WANTS"):
                note_miss(os.environ["KBENCH_OBJECT_WANTS"], key_, compile_, real, dict(os.environ))
    os.execv(real, [real, *argv])


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
