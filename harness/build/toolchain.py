"""What a build's outcome depends on besides its source: Python, torch, and the
compilers torch calls (its C++ compiler and, for CUDA, nvcc), each as it describes
itself. A cached build, or a cached compiler error, is reused only under the same ones.

Asking torch which compilers it calls takes `import torch`: 1.4 s on an idle 2-core
box, 2.5-3.1 s in a Dask worker beside others, ~5 s on a busy GPU host. A Dask worker
that had not imported torch spent that long in its first task's build lookup (each
worker's first task, bench/gpu_scaling_88998dc_2xH200.md). So the description is kept
beside the build cache, under a fingerprint of all it is read from that a stat can
see: Python, torch's version.py, the environment torch's compiler lookups read, and the
identity (path, size, mtime, inode) of every compiler they can pick. A process that has
not imported torch and finds its fingerprint there takes the kept description; one that
has imported torch describes the tools again (~0.1 s) and keeps what it found. Only
kbench's own processes write there (builds write their own key's folder only).
"""
from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from ..shared.cache_dir import store_json

FOLDER = "toolchain"  # beside the builds' folder
_ENV = ("CXX", "CC", "CUDA_HOME", "CUDA_PATH", "PYTORCH_NVCC", "PATH")  # what torch's compiler lookups read


@functools.lru_cache(maxsize=None)
def toolchain_versions(device: str = "cuda", store: Path | None = None) -> str:
    """The description (module docstring); `store`: the folder it is kept in, or None."""
    print_ = fingerprint(device)
    kept = Path(store) / f"{print_}.json" if store is not None and print_ else None
    if kept is not None and "torch" not in sys.modules:
        try:
            data = json.loads(kept.read_text())
            if data.get("device") == device and isinstance(data.get("versions"), str):
                return data["versions"]
        except (OSError, ValueError):
            pass
    versions = describe(device)
    if kept is not None:
        store_json(kept, {"device": device, "versions": versions})
    return versions


def describe(device: str) -> str:
    """The tools' own words, through torch (imports it)."""
    import torch
    import torch.utils.cpp_extension as cpp_extension

    parts = [f"python {sys.version.split()[0]}", f"torch {torch.__version__}", f"cuda {torch.version.cuda}",
             f"c++ {_describe([cpp_extension.get_cxx_compiler(), '--version'])}"]
    if device == "cuda":
        nvcc = os.environ.get("PYTORCH_NVCC") or (os.path.join(cpp_extension.CUDA_HOME, "bin", "nvcc")
                                                  if cpp_extension.CUDA_HOME else "nvcc")
        parts.append(f"nvcc {_describe([nvcc, '--version'])}")
    return "; ".join(parts)


def fingerprint(device: str) -> str | None:
    """What describe() reads, as far as a stat sees it, hashed; None where torch cannot be
    found without importing it."""
    try:
        spec = importlib.util.find_spec("torch")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.origin:
        return None
    h = hashlib.sha256()
    for part in (sys.version, sys.executable, device, *(f"{k}={os.environ.get(k)}" for k in _ENV)):
        h.update(part.encode("utf-8", "surrogateescape") + b"\0")
    try:
        h.update(Path(spec.origin).with_name("version.py").read_bytes())  # torch's version and its CUDA's
    except OSError:
        return None
    for path in _compilers(device):
        h.update(_identity(path).encode("utf-8", "surrogateescape") + b"\0")
    return h.hexdigest()[:32]


def _compilers(device: str) -> list[str]:
    """Every program describe() could run, whichever rule torch applies: CXX or c++ on
    PATH, and for CUDA nvcc under CUDA_HOME, CUDA_PATH, on PATH, /usr/local/cuda, or
    PYTORCH_NVCC's."""
    found = [shutil.which(os.environ.get("CXX") or "c++") or f"missing:{os.environ.get('CXX') or 'c++'}"]
    if device == "cuda":
        homes = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"]
        found += [os.path.join(h, "bin", "nvcc") for h in homes if h]
        found += [shutil.which("nvcc") or "missing:nvcc", os.environ.get("PYTORCH_NVCC") or ""]
    return found


def _identity(path: str) -> str:
    if not path or path.startswith("missing:"):
        return path
    try:
        real = os.path.realpath(path)
        st = os.stat(real)
    except OSError:
        return f"absent:{path}"
    return f"{path}->{real}:{st.st_size}:{st.st_mtime_ns}:{st.st_ino}"


def _describe(command: list[str]) -> str:
    """A tool's own version text, or why there is none."""
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=60, env={**os.environ, "LC_ALL": "C"})
    except (OSError, subprocess.SubprocessError) as e:
        return f"not runnable ({type(e).__name__})"
    return (done.stdout + done.stderr).strip()
