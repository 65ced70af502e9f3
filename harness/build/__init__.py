"""The build stage: every solution compiled once, in a process of its own, cached by content.

Runs in kbench's process (or a Dask worker's), which queues the builds, and in
build processes. Building a KernelBench-style solution means importing it
(load_inline compiles at import), so a build is `python -m harness.build SPEC`
(__main__.py): a sandboxed child that imports the solution with its own
extensions folder. The candidate process later imports
it from the same folder and torch finds the finished build.

The entrance, and all that other stages call:
  build_all(tasks, BuildConfig) -> {task key: BuildResult}   submit sources, get artifacts
  intact(ext_dir)                                           a cached build still whole
  loader_env(ext_dir)                                       the compiler names its loader must see
  failed_calls(ext_dir)                                     builder calls that failed there, raised again, not compiled
  toolchain_versions(device, store), toolchain_of(cfg)       what a build's key holds of the host's
      Python, torch and compilers (kept in the cache: a process that finds it there imports no torch)
  compile_slots(), build_nice(rank, at_once)                the host's compile capacity
  load                                                      importing problem and solution
      files by path, with the build hooks; used by every process that imports one
      (the build process, the candidate, the judge, discovery's facts)
Inside: stage.py (the parent's side: keys, cache, processes, and the child's
code), queue.py (order and parallelism), pch.py (a precompiled torch header,
made by `python -m harness.build.pch`), objects.py (host objects reused across
builds, published by `python -m harness.build.objects`), host_pch.py (nvcc's host
compile through a precompiled prefix of cudafe++'s output, made by `python -m
harness.build.host_pch`), shim.py (the `c++` and `gcc` a build process runs, which
read what those two made), errors.py (one line per failed build), toolchain.py
(the host's Python, torch and compilers, as a build's key holds them).

May import: records.py, shared/.
"""
from .queue import build_nice, compile_slots
from .stage import LOADER_ENV, BuildConfig, build_all, failed_calls, intact, loader_env, toolchain_of, toolchain_versions

__all__ = ["LOADER_ENV", "BuildConfig", "build_all", "build_nice", "compile_slots", "failed_calls", "intact",
           "loader_env", "toolchain_of", "toolchain_versions"]
