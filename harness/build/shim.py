"""kbench's stand-in for torch's C++ compiler in a build process: a compile whose object
kbench's object store holds is not compiled again.

Runs as `c++ ARGS...` under torch's ninja, inside the build's sandbox, started by
harness/build/shims/c++ (first on a build process's PATH, so torch's build.ninja, which
says `cxx = c++`, is unchanged and the candidate's loader finds the build up to date).
The standard library only, and run as a script: it starts for every compiler call torch
makes (versions, the link), so it must start fast.

- A compile in torch's form (`-MMD -MF DEP FLAGS -c SRC -o OUT`) is looked up in the store
  (KBENCH_OBJECTS_DIR) by key(): the compiler's own description, the exact flags, the
  environment variables gcc reads, the source's name and text. On a hit whose headers
  are all unchanged (each file's sha256 as the entry recorded it) the object is copied
  to OUT and DEP is written as gcc would have written it: nothing is compiled.
- Anything else runs the real compiler (KBENCH_REAL_CXX) with the same arguments. A miss
  leaves a note in the build's scratch folder (KBENCH_OBJECT_WANTS); kbench's parent reads
  it after the build and may compile that source itself and publish it (objects.py).

This code reads the store and never writes it: a build process runs solution code.
"""
from __future__ import annotations

import hashlib
import json
import os
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


def key(description: str, compile_: Compile, env: dict, source: bytes) -> str:
    h = hashlib.sha256()
    for part in (SALT, description, *compile_.normalized(), *(f"{k}={env.get(k, '')}" for k in GCC_ENV)):
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


def reuse(entry: Path, compile_: Compile) -> bool:
    """Copy the entry's object to the compile's output and write its depfile, when every
    header it read is unchanged and the object is the one recorded."""
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


def main(argv: list[str]) -> None:
    real = os.environ.get("KBENCH_REAL_CXX") or ""
    if not real:
        print("kbench c++ stand-in: KBENCH_REAL_CXX is not set", file=sys.stderr)
        sys.exit(127)
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
    main(sys.argv[1:])
