"""Import problem and solution files by path, and validate their interface.

Used in child processes only (build and worker): importing a solution runs
its code, and that code may do anything.
"""
from __future__ import annotations

import hashlib
import importlib.util
import inspect
import json
import os
import re
import shutil
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path
from types import ModuleType
from typing import Callable

from . import errors as build_errors
from ..records import Status


class NeedsCuda(Exception):
    """A solution asks for CUDA on a CPU run: the task is skipped, not failed."""


class LoadError(Exception):
    """The file imported, but not as a problem or solution: no Model, a bad constructor..."""


class BuildFailure(Exception):
    """torch's extension build failed; carries the full compiler output."""


def import_file(path: str, module_name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise LoadError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module  # dataclasses and pickling look modules up by name
    sys.path.insert(0, str(Path(path).parent))  # sibling helper files, as `python file.py` would see them
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(Path(path).parent))
    return module


class BuildHooks:
    """What the wrapped builders saw: failure texts, the names of the extension
    modules they loaded (the guard watches calls into those), and the precompiled
    headers they would have used had they been made (harness/build/pch.py)."""

    def __init__(self):
        self.failures: list[str] = []
        self.extension_names: set[str] = set()
        self.pch_wants: list[dict] = []
        self.running = 0  # builder calls under way (construct_for_builds waits for them)
        self.last_change = time.monotonic()  # when one last started or ended


def install_build_hooks(device: str, on_event: Callable[[dict], None] | None = None,
                        failed: dict[str, str] | None = None) -> BuildHooks:
    """Wrap torch's extension builders so that a failed build is told apart from
    any other exception at import, and a CUDA build on a CPU run is a skip.
    `on_event` (the build process's) hears each build start, finish or fail as it
    happens, before the solution's own code goes on: what that code does next
    (exits, hangs) cannot take back a build that finished; a failure carries its
    call's digest (call_digest). `failed` (the candidate's: those digests and
    texts, from the build's record) are calls whose build failed in the build
    process: the same call raises the same error here at once. A solution that
    catches a failed build and falls back to PyTorch (a common generated pattern)
    compiled it again inside the judged import: 20 s of a 2-core CI host per C++
    fixture, minutes of nvcc with a GPU lane waiting."""
    import torch.utils.cpp_extension as cpp_extension

    hooks = BuildHooks()
    pch_root = os.environ.get("KBENCH_PCH_DIR")  # set for build processes only; the worker finds builds made
    tell = on_event or (lambda event: None)
    failed = failed or {}

    def wrap(original):
        signature = inspect.signature(original)

        def builder(*args, **kwargs):
            if device == "cpu" and _wants_cuda(signature, args, kwargs):
                raise NeedsCuda("the solution builds CUDA code (cuda_sources / .cu); this is a --device cpu run")
            if original.__name__ == "load":
                args, kwargs = _sources_kept(signature, args, kwargs)
            digest = call_digest(original.__name__, signature, args, kwargs)
            if digest is not None and digest in failed:
                print(f"[kbench: this {original.__name__} call failed to build in the build process; its error "
                      "is raised again here without compiling]", flush=True)
                hooks.failures.append(failed[digest])
                raise RuntimeError(failed[digest])  # what torch raises for a failed build
            args, kwargs = _in_kbench_folder(*_quiet(signature, args, kwargs), signature)
            tell({"compile": "start"})
            hooks.running += 1
            hooks.last_change = time.monotonic()
            try:
                with _precompiled_header(pch_root, signature, args, kwargs, hooks):
                    module = original(*args, **kwargs)
            except Exception as e:  # noqa: BLE001 - re-raised; we only record it
                hooks.failures.append(str(e))
                tell({"compile": "failed", "text": str(e), "call": digest})
                raise
            finally:
                hooks.running -= 1
                hooks.last_change = time.monotonic()
            tell({"compile": "done"})
            hooks.extension_names.add(getattr(module, "__name__", ""))
            return module

        builder.__wrapped__ = original
        return builder

    for name in ("load_inline", "load"):
        setattr(cpp_extension, name, wrap(getattr(cpp_extension, name)))
    return hooks


def call_digest(builder: str, signature: inspect.Signature, args: tuple, kwargs: dict) -> str | None:
    """What one builder call builds: its name and every argument, as given, and the
    bytes of the files `load` is given (a file rewritten between two processes is
    another build). None where that cannot be told (an argument of no plain form,
    an unreadable file): such a call is always compiled."""
    try:
        arguments = dict(signature.bind(*args, **kwargs).arguments)
        files = arguments.get("sources") if builder == "load" else None
        files = [files] if isinstance(files, str) else list(files or [])
        contents = [hashlib.sha256(Path(f).read_bytes()).hexdigest() for f in files]
        text = json.dumps([builder, arguments, contents], sort_keys=True, default=_path_text)
    except (TypeError, ValueError, OSError):
        return None
    return hashlib.sha256(text.encode()).hexdigest()


def _path_text(value):
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    raise TypeError(type(value).__name__)


def _precompiled_header(root: str | None, signature: inspect.Signature, args: tuple, kwargs: dict, hooks: BuildHooks):
    """torch/extension.h precompiled for this call's flags, found by gcc through CPATH
    (the compile command is unchanged), when kbench made one; else nothing."""
    from contextlib import nullcontext

    if not root:
        return nullcontext()
    from . import pch

    try:
        arguments = signature.bind(*args, **kwargs).arguments
    except TypeError:
        return nullcontext()  # torch raises its own error for a bad call
    return pch.on_include_path(root, arguments, hooks.pch_wants)


def _quiet(signature: inspect.Signature, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """The same call with verbose=False. With verbose=True torch prints the compiler's
    output and raises only "Error building extension '<name>'" (KernelBench's prompt
    example passes it, so most generated solutions do); with verbose=False the output
    is in the exception, which the build process keeps as the message and prints into
    the task's log."""
    try:
        bound = signature.bind(*args, **kwargs)
    except TypeError:
        return args, kwargs  # torch raises its own error for a bad call
    if not bound.arguments.get("verbose"):
        return args, kwargs
    bound.arguments["verbose"] = False
    print("[kbench: verbose=True passed to the extension builder; built with verbose=False so that the "
          "compiler's errors reach the message]", flush=True)
    return bound.args, bound.kwargs


def _in_kbench_folder(args: tuple, kwargs: dict, signature: inspect.Signature) -> tuple[tuple, dict]:
    """The same call without build_directory: a build process may write only its own
    folder (TORCH_EXTENSIONS_DIR, where the candidate's process finds the build again),
    and a folder the solution names elsewhere (/tmp/build, its own) would fail there."""
    try:
        bound = signature.bind(*args, **kwargs)
    except TypeError:
        return args, kwargs
    if not bound.arguments.get("build_directory"):
        return args, kwargs
    print(f"[kbench: build_directory={bound.arguments['build_directory']!r} ignored; built in kbench's own "
          "folder for this solution]", flush=True)
    bound.arguments["build_directory"] = None
    return bound.args, bound.kwargs


# Bounds on a scratch folder kept for a `load` call (_sources_kept): generated sources and
# their headers, not a dataset. A folder past them is built where it is, as before.
KEPT_MAX_FILES = 64
KEPT_MAX_BYTES = 16 * 2**20


def _sources_kept(signature: inspect.Signature, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """The same `load` call with its sources and include folders that lie in this
    process's scratch (tempfile's folder, its working folder) moved to a folder of the
    build's named by their contents. A solution that writes its source to
    tempfile.mkdtemp() or "./kernel.cu" and loads it from there names another path in
    the build process and in the candidate's: torch then writes another build.ninja,
    and ninja compiles the whole extension again inside the judged import (23 s for
    one C++ file on the 2-core CI host; minutes of nvcc on a GPU lane). The source and
    header files of each scratch folder a source lies in (its headers come along) are
    copied to <TORCH_EXTENSIONS_DIR>/kbench-sources/<hash of their names and bytes>,
    once; the candidate finds the same path and the build up to date. Of the scratch
    folder itself only its top level is taken (kbench's caches lie beneath it); a
    folder made in it (mkdtemp) is taken whole. One with a link, or past
    KEPT_MAX_FILES or KEPT_MAX_BYTES, is left where it is."""
    root = os.environ.get("TORCH_EXTENSIONS_DIR")
    if not root:
        return args, kwargs
    try:
        bound = signature.bind(*args, **kwargs)
    except TypeError:
        return args, kwargs
    scratch = [os.path.realpath(tempfile.gettempdir()), os.path.realpath(os.getcwd())]
    moved: dict[str, str | None] = {}  # scratch folder -> its kept copy (None: left where it is)

    def kept(path: str, is_dir: bool) -> str:
        real = os.path.realpath(path)
        folder = real if is_dir else os.path.dirname(real)
        top = next((s for s in scratch if folder == s or folder.startswith(s + os.sep)), None)
        if top is None:
            return path
        if folder not in moved:
            moved[folder] = _keep_folder(folder, os.path.join(root, "kbench-sources"), whole=folder != top)
        copy = moved[folder]
        if copy is None:
            return path
        if is_dir:
            return copy
        kept_file = os.path.join(copy, os.path.basename(real))
        return kept_file if os.path.isfile(kept_file) else path  # a source of no known suffix stays

    sources = bound.arguments.get("sources")
    if isinstance(sources, (str, os.PathLike)):
        sources = [sources]
    if not isinstance(sources, (list, tuple)) or not all(isinstance(s, (str, os.PathLike)) for s in sources):
        return args, kwargs  # torch raises its own error for a bad call
    try:
        new_sources = [kept(os.fspath(s), False) for s in sources]
        includes = bound.arguments.get("extra_include_paths")
        if isinstance(includes, (list, tuple)) and all(isinstance(i, (str, os.PathLike)) for i in includes):
            bound.arguments["extra_include_paths"] = [kept(os.fspath(i), True) for i in includes]
    except OSError:
        return args, kwargs
    if not any(moved.values()):  # nothing in scratch, or only folders left where they are
        return args, kwargs
    bound.arguments["sources"] = new_sources
    print(f"[kbench: the sources this load() names in its scratch folder are built from "
          f"{sorted(set(v for v in moved.values() if v))}, a copy named by their contents, so that the "
          "candidate's process finds the same build]", flush=True)
    return bound.args, bound.kwargs


SOURCE_SUFFIXES = (".cu", ".cuh", ".cpp", ".cc", ".cxx", ".c", ".h", ".hpp", ".hh", ".hxx", ".inl", ".inc")


def _keep_folder(folder: str, parent: str, whole: bool) -> str | None:
    """The source and header files of `folder` (its top level, or `whole` its tree) copied
    to parent/<hash of their relative names and bytes> (made once, by rename, so that a
    reader sees it whole), or None where one of them is a link or not a plain file, or
    they pass the bounds."""
    files: list[tuple[str, bytes]] = []
    total = 0
    for here, dirs, names in os.walk(folder):
        if not whole:
            dirs[:] = []
        for name in names:
            if not name.endswith(SOURCE_SUFFIXES):
                continue
            full = os.path.join(here, name)
            if os.path.islink(full) or not os.path.isfile(full):
                return None
            data = Path(full).read_bytes()
            total += len(data)
            files.append((os.path.relpath(full, folder), data))
            if len(files) > KEPT_MAX_FILES or total > KEPT_MAX_BYTES:
                return None
    h = hashlib.sha256()
    for rel, data in sorted(files):
        h.update(rel.encode() + b"\0" + hashlib.sha256(data).digest())
    final = os.path.join(parent, h.hexdigest()[:20])
    if os.path.isdir(final):
        return final
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=".kept-", dir=parent)
    for rel, data in files:
        os.makedirs(os.path.dirname(os.path.join(tmp, rel)), exist_ok=True)
        Path(tmp, rel).write_bytes(data)
    try:
        os.rename(tmp, final)
    except OSError:  # another process kept the same folder first
        shutil.rmtree(tmp, ignore_errors=True)
    return final


def _wants_cuda(signature: inspect.Signature, args: tuple, kwargs: dict) -> bool:
    try:
        bound = signature.bind(*args, **kwargs).arguments
    except TypeError:
        return False
    if bound.get("cuda_sources") or bound.get("with_cuda"):
        return True
    sources = bound.get("sources") or []
    if isinstance(sources, str):
        sources = [sources]
    return any(str(s).endswith((".cu", ".cuh")) for s in sources)


def load_solution(path: str, device: str) -> ModuleType:
    module = import_file(path, "kbench_solution")
    candidate_class(module, Path(path).name)
    return module


# How long the build process waits on a constructor that builds nothing (no builder call
# runs, and none started or ended for this long): what it does is the task's to judge.
CONSTRUCT_IDLE_S = float(os.environ.get("KBENCH_CONSTRUCT_IDLE_S") or 10.0)


def construct_for_builds(module: ModuleType, problem_path: str | None, hooks: BuildHooks, device: str) -> str:
    """The solution's class constructed once in the build process, with get_init_inputs()'s
    arguments, its tensors on the meta device (no memory, no compute) and no GPU visible,
    so that an extension its constructor builds (load_inline in __init__, a common
    generated pattern) is compiled here, beside the other builds, and the candidate's
    constructor finds it up to date. Before, it compiled inside the judged import (27.6 s
    for one C++ file on the 2-core CI host; minutes of nvcc with a GPU lane waiting). What
    else the constructor does (a tensor on a named GPU, .item(), an error, a loop) ends the
    attempt and is judged in the candidate as before; a build that failed here is raised
    there again without compiling (its call's digest, as for a build at import). Returns
    what happened, for the log."""
    try:
        problem = load_problem(problem_path) if problem_path else None
        if problem is None:
            return "not tried: no problem file"
        init = list(problem.get_init_inputs())
        cls, _ = candidate_class(module)
    except BaseException as e:  # noqa: BLE001 - the candidate meets the same and is judged for it
        return f"not tried: {last_line(e)}"
    import torch

    # A GPU context here would share the device being timed. Hidden only where torch's builder
    # does not ask the GPU for its arch (kbench sets TORCH_CUDA_ARCH_LIST for a CUDA run's
    # builds): without one visible it would compile for every arch.
    if not torch.cuda.is_initialized() and (device == "cpu" or os.environ.get("TORCH_CUDA_ARCH_LIST")):
        os.environ["CUDA_VISIBLE_DEVICES"] = ""
    outcome: list[str] = []
    done = threading.Event()

    def construct() -> None:
        try:
            with torch.device("meta"):
                cls(*init)
            outcome.append("constructed")
        except BaseException as e:  # noqa: BLE001
            outcome.append(f"stopped: {last_line(e)}")
        finally:
            done.set()

    hooks.last_change = time.monotonic()
    threading.Thread(target=construct, name="kbench-construct", daemon=True).start()
    while not done.wait(0.2):
        if hooks.running == 0 and time.monotonic() - hooks.last_change > CONSTRUCT_IDLE_S:
            return f"left running: no extension build for {CONSTRUCT_IDLE_S:g} s"
    return outcome[0]


def candidate_class(module: ModuleType, file_name: str = "the solution") -> tuple[type, str]:
    """The class to evaluate and its name: ModelNew, else Model. METR's published
    KernelBench solutions name the candidate Model (the reference's name), and the
    reference never lives in the candidate's file, so a file without ModelNew has
    its Model judged (the task's message says so)."""
    for name in ("ModelNew", "Model"):
        cls = getattr(module, name, None)
        if cls is not None:
            return cls, name
    raise LoadError(f"{file_name} defines no ModelNew class (nor Model, the name METR's solutions use)")


def load_problem(path: str) -> ModuleType:
    module = import_file(path, "kbench_problem")
    for name in ("Model", "get_inputs", "get_init_inputs"):
        if not hasattr(module, name):
            raise LoadError(f"problem {Path(path).name} defines no {name}")
    return module


def last_line(exc: BaseException) -> str:
    """The exception's own last line, which is what a user needs first."""
    triton = triton_error_line(exc)
    if triton:
        return triton
    if isinstance(exc, SyntaxError) and exc.lineno:
        # Its last printed line is "SyntaxError: invalid syntax", without the file and line
        # (they are on the lines above it); str() holds both.
        where = f" `{exc.text.strip()}`" if exc.text and exc.text.strip() else ""
        return f"{type(exc).__name__}: {exc}{where}"
    text = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    lines = [ln for ln in text.splitlines() if ln.strip()]
    # torch's CUDA errors end in advice (CUDA_LAUNCH_BLOCKING, TORCH_USE_CUDA_DSA);
    # the line that names the error comes first.
    for ln in lines:
        if "CUDA error" in ln or "device-side assert" in ln:
            return ln.strip()
    return lines[-1] if lines else type(exc).__name__


def is_missing_cuda(exc: BaseException) -> bool:
    """An import that fails only because this run has no CUDA (triton, .cuda())."""
    text = str(exc)
    if isinstance(exc, ModuleNotFoundError) and exc.name in ("triton", "cupy", "pycuda"):
        return True
    return "Torch not compiled with CUDA" in text or "no NVIDIA driver" in text or "No CUDA GPUs" in text


def triton_error_line(exc: BaseException) -> str | None:
    """Triton's own message for a kernel that does not compile, or None for any other
    exception. Triton compiles at the kernel's first call (in forward, not at import)
    and raises triton.compiler.errors.CompilationError, whose text is "at L:C:", the
    kernel's source up to the bad line, a caret under it, then the message; its last
    line alone is often just the caret."""
    if not any(c.__name__ == "CompilationError" and c.__module__.startswith("triton") for c in type(exc).__mro__):
        return None
    lines = str(exc).splitlines()
    where = next((ln.strip().rstrip(":") for ln in lines if re.match(r"\s*at \d+:\d+:\s*$", ln)), "")
    caret = next((i for i, ln in enumerate(lines) if ln.strip() == "^"), None)
    source = lines[caret - 1].strip() if caret else ""
    after = lines[caret + 1:] if caret is not None else lines[1:] if where else lines
    message = " ".join(ln.strip() for ln in after if ln.strip())
    if not message and exc.__cause__ is not None:
        message = last_line(exc.__cause__)
    parts = ["Triton compile error" + (f" {where}" if where else "")]
    if source:
        parts.append(f"`{source}`")
    if message:
        parts.append(message)
    return ": ".join(parts)[:500]


def import_failure(exc: BaseException, hooks, device: str) -> tuple[Status, str]:
    """Status and message for an exception raised while importing a solution.
    The build process and the worker both import it and must judge alike."""
    if isinstance(exc, NeedsCuda):
        return Status.SKIPPED, str(exc)
    if hooks.failures:
        # A build failed first: whatever the solution did next (caught it and called
        # sys.exit, raised its own "compilation failed", left ModelNew undefined) follows from it.
        return Status.BUILD_ERROR, build_errors.build_error_message(hooks.failures[-1], fallback=last_line(exc))
    if isinstance(exc, LoadError):
        return Status.LOAD_ERROR, str(exc)
    if isinstance(exc, SystemExit):
        return Status.LOAD_ERROR, f"the solution called sys.exit({exc.code!r}) at import"
    if device == "cpu" and is_missing_cuda(exc):
        return Status.SKIPPED, f"needs CUDA: {last_line(exc)}"
    traceback.print_exception(exc)  # into the task's log
    if isinstance(exc, PermissionError) and os.environ.get("TORCH_EXTENSIONS_DIR"):
        # Models write generated sources beside the solution file; kbench's sandbox lets a
        # solution write only where each of its processes has a folder of its own.
        return Status.LOAD_ERROR, (f"at import: {last_line(exc)} (a solution may write only in its working folder, "
                                   "tempfile's folder and its build folder; write generated files there)")
    return Status.LOAD_ERROR, f"at import: {last_line(exc)}"
