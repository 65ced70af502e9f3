"""Precompiled torch/extension.h (harness/build/pch.py) and how builds share the host's cores.

What a user relies on: a solution gets the same verdict, and a failed one the same first
error line, with or without the PCH; flags kbench has no PCH for build as before; a PCH
is made once, by kbench, where its cache can be written, with gcc only; MAX_JOBS grows
as the build queue empties.

The fast tests use gcc on a tiny stand-in for torch/extension.h, or fake builds. The
end-to-end tests at the bottom compile torch's real header (about 45 s for the PCH and
20-40 s per build on a 2-core box, 3-4 minutes in all), so they run only with
KBENCH_SLOW_TESTS=1.
"""
import json
import os
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from conftest import ROOT
from harness.build import stage as build, load, pch
from harness.build.queue import BuildQueue
from harness.records import Task

HAS_GCC = pch.request_for([], False) is not None
needs_gcc = pytest.mark.skipif(not HAS_GCC, reason="needs gcc as torch's C++ compiler")
slow = pytest.mark.skipif(os.environ.get("KBENCH_SLOW_TESTS") != "1",
                          reason="compiles torch's headers for minutes: set KBENCH_SLOW_TESTS=1")
FIXTURES = ROOT / "tests" / "fixtures" / "cpu"
CPP_OK = FIXTURES / "solutions" / "basic" / "level1" / "1_AddReLU" / "cpp_ok.py"


# ---- which calls get a PCH ------------------------------------------------------

@needs_gcc
def test_common_flags_get_a_pch_and_odd_ones_build_without():
    for flags in ([], ["-O3"], ["-O3", "-march=native", "-ffast-math"], ["-fopenmp", "-DNDEBUG", "-std=c++17"],
                  ["-Wno-unused-variable", "-O2"]):
        assert pch.request_for(flags, False) is not None, flags
    for flags in (["-I/tmp"], ["-include", "x.h"], ["-fplugin=/tmp/x.so"], ["--param", "max-inline-insns-auto=10"],
                  ["-O3", "-Wl,-rpath,/tmp"], ["-x", "c"]):
        assert pch.request_for(flags, False) is None, flags
    keys = {pch.request_for(f, False).key for f in ([], ["-O3"], ["-O2"], ["-O3", "-DNDEBUG"])}
    assert len(keys) == 4  # one PCH per exact flag set: gcc's own check is not enough (it accepts -O2's for -O3)
    assert pch.wanted({"extra_cflags": ["-O3"], "extra_include_paths": ["/tmp/inc"]}) is None
    assert pch.wanted({"cuda_sources": "__global__ void k() {}"}) == {"extra_cflags": [], "with_cuda": True}
    assert pch.wanted({"extra_cflags": [" -O3 "]}) == {"extra_cflags": ["-O3"], "with_cuda": False}


@needs_gcc
def test_the_pch_carries_the_flags_this_torch_gives_the_cpp(tmp_path, monkeypatch):
    """The PCH is made with the flags the installed torch writes into build.ninja, not a
    list of one version's: torch 2.11 compiles with -std=c++17 where 2.13 has c++20, and
    gcc passes over a PCH made for another language standard (on a torch 2.11 GPU host
    it did, in every build, silently)."""
    import torch.utils.cpp_extension as ce

    def torch_211_writer(path, name, sources, extra_cflags, **_):
        Path(path).write_text(f"cflags = -DTORCH_EXTENSION_NAME={name} -DTORCH_API_INCLUDE_EXTENSION_H "
                              f"-isystem /t/include -fPIC -std=c++17 {' '.join(extra_cflags)}\nldflags = -shared\n")

    pch._torch_cflags.cache_clear()
    monkeypatch.setattr(ce, "_write_ninja_file_to_build_library", torch_211_writer)
    try:
        request = pch.request_for(["-O3"], False)
        assert request.cflags == ("-DTORCH_API_INCLUDE_EXTENSION_H", "-isystem", "/t/include", "-fPIC", "-std=c++17",
                                  "-O3")
        monkeypatch.setattr(ce, "_write_ninja_file_to_build_library", lambda *a, **k: 1 / 0)
        pch._torch_cflags.cache_clear()
        assert pch.request_for(["-O3"], False) is None  # a writer that changed: no PCH, the build as before
    finally:
        pch._torch_cflags.cache_clear()


def test_a_compiler_that_is_not_gcc_gets_no_pch(tmp_path, monkeypatch):
    clang = tmp_path / "fake-clang++"
    clang.write_text("#!/bin/sh\necho 'clang version 18.1.0' >&2\n")
    clang.chmod(0o755)
    monkeypatch.setenv("CXX", str(clang))
    assert pch.request_for(["-O3"], False) is None
    monkeypatch.setenv("CXX", str(tmp_path / "no-such-compiler"))
    assert pch.request_for(["-O3"], False) is None


@needs_gcc
def test_a_build_process_looks_for_the_pch_the_parent_made(tmp_path, monkeypatch):
    """A build process runs `c++` through kbench's stand-in (objects.build_env puts it first
    on PATH); its PCH key is the one kbench's parent made the PCH under, not the stand-in's.
    Keyed by the stand-in's path, no build found a PCH: every host compile parsed
    torch/extension.h again (28 s instead of 13 s a build on the 2-core box)."""
    from harness.build import objects

    made = pch.request_for(["-O3"], False)
    env = objects.build_env(tmp_path / "objects", tmp_path / "scratch", dict(os.environ))
    assert env, "no stand-in for c++ was made"
    monkeypatch.setenv("PATH", env["PATH"])
    for name in ("KBENCH_REAL_CXX", "KBENCH_OBJECTS_DIR"):
        monkeypatch.setenv(name, env[name])
    pch._compiler_identity.cache_clear()
    try:
        assert shutil.which("c++") == str(tmp_path / "objects" / "bin" / "cxx" / "c++")  # the stand-in
        seen = pch.request_for(["-O3"], False)
    finally:
        pch._compiler_identity.cache_clear()
    assert seen is not None and seen.key == made.key


@needs_gcc
def test_no_pch_is_made_where_the_cache_cannot_be_written(tmp_path):
    request = pch.request_for(["-O3"], False)
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    assert not pch.should_build(blocked / "pch", request)  # cannot create the folder
    assert pch.ready(blocked / "pch", request) is None
    # A build whose PCH folder cannot be read or written goes on as without kbench.
    wants: list = []
    with pch.on_include_path(str(blocked / "pch"), {"extra_cflags": ["-O3"]}, wants) as folder:
        assert folder is None and "pch" not in os.environ.get("CPATH", "")
    assert pch.should_build(tmp_path / "pch", request)


# ---- gcc finds it through CPATH, uses it only when it fits ---------------------------

@pytest.fixture
def tiny_header(tmp_path, monkeypatch):
    """A two-line stand-in for torch/extension.h: gcc precompiles it in milliseconds."""
    header = tmp_path / "src" / pch.HEADER
    header.parent.mkdir(parents=True)
    header.write_text("#pragma once\ninline int kb_tiny() { return 7; }\n")
    monkeypatch.setattr(pch, "_torch_header", lambda: header)
    return header


@needs_gcc
def test_a_pch_is_checked_used_and_ignored_when_the_flags_differ(tmp_path, tiny_header):
    root = tmp_path / "pch"
    request = pch.request_for(["-O2"], False)
    assert pch.build(root, request).startswith("made in")
    folder = pch.ready(root, request)
    assert folder is not None and (folder / pch.HEADER).read_text() == tiny_header.read_text()
    assert json.loads((folder / "pch.json").read_text())["cflags"] == list(request.cflags)
    assert pch.build(root, request) == "made already" and not pch.should_build(root, request)
    # gcc's own check, as kbench runs it before publishing: other flags would not use this PCH...
    for other in (["-O0"], ["-O2", "-fno-PIC"], ["-O2", "-std=c++17"]):
        assert pch._check(folder, replace(request, cflags=request.cflags + tuple(other)))
    # ...and a compile under them still succeeds, through the header beside it (the fallback).
    source = tmp_path / "main.cpp"
    source.write_text("#include <torch/extension.h>\nint main() { return kb_tiny() - 7; }\n")
    for extra, used in (([], True), (["-O0"], False)):
        done = subprocess.run([request.cxx, *request.cflags, *extra, "-H", str(source), "-o", str(tmp_path / "a.out")],
                              env={**os.environ, "CPATH": str(folder)}, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        assert (f"! {folder}/{pch.HEADER}.gch" in done.stderr) == used
        assert subprocess.run([str(tmp_path / "a.out")]).returncode == 0


@needs_gcc
def test_a_header_gcc_cannot_precompile_is_recorded_once_and_never_used(tmp_path, tiny_header):
    tiny_header.write_text("#error not a header\n")
    root = tmp_path / "pch"
    request = pch.request_for(["-O2"], False)
    assert pch.build(root, request).startswith("unusable: ")
    assert "not a header" in (root / request.key / "unusable").read_text()
    assert pch.ready(root, request) is None and not pch.should_build(root, request)
    wants: list = []
    with pch.on_include_path(str(root), {"extra_cflags": ["-O2"]}, wants) as folder:
        assert folder is None
    assert wants == []  # not asked for again


@needs_gcc
def test_the_hook_puts_a_ready_pch_on_cpath_for_that_call_only(tmp_path, tiny_header, monkeypatch):
    import torch.utils.cpp_extension as cpp_extension

    root = tmp_path / "pch"
    ready = pch.request_for(["-O3"], False)
    (root / ready.key / "torch").mkdir(parents=True)
    (root / ready.key / f"{pch.HEADER}.gch").write_text("")
    seen = []

    def fake_load_inline(name, cpp_sources, cuda_sources=None, functions=None, extra_cflags=None,
                         extra_include_paths=None, verbose=False):
        seen.append(os.environ.get("CPATH"))
        return type(sys)(name)

    monkeypatch.setattr(cpp_extension, "load_inline", fake_load_inline)
    monkeypatch.setattr(cpp_extension, "load", cpp_extension.load)  # restored after the test
    monkeypatch.setenv("KBENCH_PCH_DIR", str(root))
    monkeypatch.setenv("CPATH", "/user/include")
    hooks = load.install_build_hooks("cpu")
    cpp_extension.load_inline("a", "", extra_cflags=["-O3"])
    cpp_extension.load_inline("b", "", extra_cflags=["-O1"])
    cpp_extension.load_inline("c", "", extra_cflags=["-O3"], extra_include_paths=["/x"])
    assert seen == [f"{root / ready.key}{os.pathsep}/user/include", "/user/include", "/user/include"]
    assert os.environ["CPATH"] == "/user/include"
    assert hooks.pch_wants == [{"extra_cflags": ["-O1"], "with_cuda": False}]
    monkeypatch.delenv("KBENCH_PCH_DIR")  # a worker: it finds builds made, never asks
    hooks = load.install_build_hooks("cpu")
    cpp_extension.load_inline("d", "", extra_cflags=["-O1"])
    assert seen[-1] == "/user/include" and hooks.pch_wants == []


# ---- who makes it, and when ---------------------------------------------------------

def _fake_builds(monkeypatch, tmp_path, n: int, wants: list[dict]):
    """n solution files; builds that take no time and want `wants`; records the order
    in which builds and PCH jobs ran, and each build's MAX_JOBS."""
    order: list[str] = []
    files = []
    for i in range(n):
        f = tmp_path / f"s{i}.py"
        f.write_text(f"# {i}\nfrom torch.utils.cpp_extension import load_inline\n")
        files.append(Task("p", "p", "s", str(f)))

    def fake_build_one(task, key, cfg, max_jobs=1, nice=10):
        order.append(f"build {Path(task.solution_path).stem} MAX_JOBS={max_jobs}")
        return build.BuildResult(True, None, "", 0.0, False, ""), "", wants

    monkeypatch.setattr(build, "_build_one", fake_build_one)
    monkeypatch.setattr(build, "make_pch", lambda root, want, key, timeout: order.append(f"pch {want['extra_cflags']}"))
    monkeypatch.setattr(build, "compile_slots", lambda: 2)
    monkeypatch.delenv("KBENCH_PCH", raising=False)
    cfg = build.BuildConfig("cpu", "", tmp_path / "cache" / "builds", 1, 60.0)
    return files, cfg, order


@needs_gcc
def test_one_pch_is_made_ahead_of_the_waiting_builds_and_only_once(tmp_path, monkeypatch):
    files, cfg, order = _fake_builds(monkeypatch, tmp_path, 12, [{"extra_cflags": ["-O3"], "with_cuda": False}])
    build.build_all(files, cfg)
    assert order[:3] == ["build s0 MAX_JOBS=2", "pch ['-O3']", "build s1 MAX_JOBS=2"]
    assert order.count("pch ['-O3']") == 1 and len(order) == 13


@needs_gcc
def test_small_runs_and_KBENCH_PCH_0_make_none(tmp_path, monkeypatch):
    files, cfg, order = _fake_builds(monkeypatch, tmp_path, 4, [{"extra_cflags": ["-O3"], "with_cuda": False}])
    build.build_all(files, cfg)
    assert not any(o.startswith("pch") for o in order)  # 3 builds waiting: it would not pay off in this run
    files, cfg, order = _fake_builds(monkeypatch, tmp_path, 12, [{"extra_cflags": ["-O3"], "with_cuda": False}])
    monkeypatch.setenv("KBENCH_PCH", "0")
    build.build_all(files, cfg)
    assert not any(o.startswith("pch") for o in order)
    assert build.pch_folder(cfg) is None and build.pch_folder(replace(cfg, precompiled_headers=False)) is None


def test_malformed_pch_wishes_from_a_build_process_are_dropped():
    assert build._valid_wants([{"extra_cflags": ["-O3"]}, {"extra_cflags": "-O3"}, {"extra_cflags": [1]}, "x"]) == [
        {"extra_cflags": ["-O3"], "with_cuda": False}]
    assert build._valid_wants({"extra_cflags": []}) == []


def test_max_jobs_is_the_slots_shared_by_the_builds_left(monkeypatch):
    import harness.build.queue as bq

    monkeypatch.setattr(bq, "memory_slots", lambda unknown=1: 20)  # memory for fewer than 2 compilers a build
    queue = BuildQueue([f"k{i}" for i in range(40)], jobs=16)
    assert queue.pop() == ("k0", 0) and queue.max_jobs(16) == 1  # a full round: one compiler each
    while queue.waiting() > 3:
        queue.pop()
        queue.done()
    queue.done()
    assert queue.max_jobs(16) == 5  # the tail: 3 builds left share 16 cores
    single = BuildQueue(["only"], jobs=16)
    single.pop()
    assert single.max_jobs(16) == 16 and single.max_jobs(1) == 1  # a .cpp and a .cu at once
    assert queue.put_first("pch-a", lambda: None) and not queue.put_first("pch-a", lambda: None)
    item, _ = queue.pop()
    assert callable(item)
    monkeypatch.setattr(bq, "memory_slots", lambda unknown=1: 42)  # 128 GB at 3 GB a compiler
    ranked = BuildQueue([f"k{i}" for i in range(18)], jobs=18)
    ranked.pop()
    assert ranked.max_jobs(16) == 2  # ranked builds: the first compile their .cpp and .cu at once


def test_builds_that_fit_twice_the_slots_start_together_ranked(monkeypatch):
    """18 builds on 14 slots ran as 14 and then 4 on an H100 host, the last round alone
    about half the build stage; all 18 at one priority ended together (the GPU then
    evaluated every task after them). Up to twice the slots now start together, the
    first started at nice 10 and each next fifth two levels lower."""
    import harness.build.queue as bq

    monkeypatch.setattr(bq, "memory_slots", lambda unknown=1: 42)
    assert bq.concurrency(18, 14) == 18
    assert bq.concurrency(28, 14) == 28 and bq.concurrency(29, 14) == 14
    assert bq.concurrency(1, 14) == 1 and bq.concurrency(0, 14) == 1
    monkeypatch.setattr(bq, "memory_slots", lambda unknown=1: 5)
    assert bq.concurrency(18, 14) == 14 and bq.concurrency(8, 4) == 5  # what the memory holds
    assert [bq.build_nice(r, 18) for r in range(18)] == [10] * 4 + [12] * 4 + [14] * 3 + [16] * 4 + [18] * 3
    assert bq.build_nice(0, 1) == 10 and bq.build_nice(40, 14) == 18  # later rounds: the lowest


def test_build_all_starts_a_small_second_round_with_the_first_and_ranks_them(tmp_path, monkeypatch):
    import threading
    import time

    import harness.build.queue as bq

    monkeypatch.setattr(bq, "memory_slots", lambda unknown=1: 42)
    files, cfg, _ = _fake_builds(monkeypatch, tmp_path, 3, [])
    cfg = replace(cfg, jobs=2)
    running, most, nices, lock = [0], [0], [], threading.Lock()

    def slow_build(task, key, cfg, max_jobs=1, nice=10):
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
            nices.append(nice)
        time.sleep(0.3)
        with lock:
            running[0] -= 1
        return build.BuildResult(True, None, "", 0.3, False, ""), "", []

    monkeypatch.setattr(build, "_build_one", slow_build)
    build.build_all(files, cfg)
    assert most[0] == 3  # not 2, then 1
    assert sorted(nices) == [10, 12, 16]


def test_a_build_process_lowers_itself_and_its_session(tmp_path):
    """The nice a build runs at holds for its compilers, and for its session's
    scheduling group where the kernel has one (autogroup)."""
    import subprocess
    import sys

    code = ("import os; from harness.build.stage import lower; lower(14); print(os.getpriority(os.PRIO_PROCESS, 0)); "
            "import pathlib; p = pathlib.Path('/proc/self/autogroup'); print(p.read_text().strip() if p.exists() else '-')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, start_new_session=True,
                         cwd=str(ROOT), timeout=60)
    lines = out.stdout.split("\n")
    assert int(lines[0]) >= 14, out.stdout + out.stderr  # 14, or where kbench already runs lower
    assert lines[1] == "-" or int(lines[1].rsplit(" ", 1)[1]) >= 14, lines[1]


# ---- end to end with torch's real header (slow) -------------------------------------

@pytest.fixture(scope="module")
def pch_cache(tmp_path_factory):
    """A kbench cache holding the PCH for extra_cflags=["-O3"] (what cpp_ok.py passes)."""
    cache = tmp_path_factory.mktemp("kbench-pch")
    root = cache / "pch"
    request = pch.request_for(["-O3"], False)
    build.make_pch(root, {"extra_cflags": ["-O3"], "with_cuda": False}, request.key, 600)
    assert pch.ready(root, request), (root / f"{request.key}.log").read_text()
    return cache


def _build(solution: Path, cache: Path, use_pch: bool = True) -> tuple[build.BuildResult, str]:
    cfg = build.BuildConfig("cpu", "", cache / "builds", 1, 600.0, use_cache=False, precompiled_headers=use_pch)
    logs = {}
    result = build.build_all([Task("p", "p", "s", str(solution))], cfg, lambda t, r, log: logs.update(log=log))
    return result[str(solution)], logs["log"]


def _main_o(result: build.BuildResult) -> Path:
    return next(Path(result.ext_dir).rglob("main.o"))


@slow
@needs_gcc
def test_cpp_solution_builds_with_the_pch_same_object_same_verdict(pch_cache, run_cli, tmp_path):
    solutions = tmp_path / "solutions" / "pch" / "level1" / "1_AddReLU"
    solutions.mkdir(parents=True)
    shutil.copy(CPP_OK, solutions / "cpp_ok.py")
    proc = run_cli("run", "--problems", str(FIXTURES / "problems"), "--solutions", str(tmp_path / "solutions"),
                   "--out", str(tmp_path / "run"), "--device", "cpu", "--timeout", "60",
                   env={"KBENCH_CACHE": str(pch_cache)})
    results = json.loads((tmp_path / "run" / "results.json").read_text())["results"]
    assert [r["status"] for r in results] == ["ok"], proc.stderr[-2000:]
    log = Path(results[0]["log_path"]).read_text()
    assert f"torch/extension.h precompiled in {pch_cache / 'pch'}" in log
    main_o = next((pch_cache / "builds").rglob("main.o"))
    # Built once: the worker found the build up to date (the compile command did not change).
    ninja_log = (main_o.parent / ".ninja_log").read_text().splitlines()
    assert sum(1 for line in ninja_log if line.endswith("main.o") or "\tmain.o\t" in line) == 1
    # gcc used the PCH for torch's own command, and made the object it makes without one (built
    # in a folder whose path has the same length: the object holds the source's path, for TORCH_CHECK).
    twin = pch_cache.parent / ("x" * len(pch_cache.name))
    without, _ = _build(solutions / "cpp_ok.py", twin, use_pch=False)
    assert without.ok
    assert _main_o(without).read_bytes().replace(bytes(twin), bytes(pch_cache)) == main_o.read_bytes()
    command = next(ln for ln in (main_o.parent / "build.ninja").read_text().splitlines() if ln.startswith("cflags"))
    folder = next((pch_cache / "pch").glob("*/torch")).parent
    # torch's compiler, which the build ran (CXX where set: on the H200 host /opt/gcc/bin/g++ used this PCH and the
    # system's c++ passed it over)
    import torch.utils.cpp_extension as ce

    used = subprocess.run(f"{ce.get_cxx_compiler()} {command.split('=', 1)[1]} -H -fsyntax-only {main_o.parent / 'main.cpp'}",
                          shell=True,
                          env={**os.environ, "CPATH": str(folder)}, capture_output=True, text=True)
    assert used.stderr.startswith(f"! {folder}/torch/extension.h.gch"), used.stderr[:500]


@slow
@needs_gcc
def test_a_compile_error_has_the_same_first_line_with_and_without_the_pch(pch_cache, tmp_path):
    broken = tmp_path / "broken.py"
    broken.write_text(CPP_OK.read_text().replace("auto out = torch::empty_like(x);",
                                                 "auto out = torch::empty_like(x); scalar_t zero = 0;"))
    with_pch, log = _build(broken, pch_cache)
    without, _ = _build(broken, tmp_path / "no-pch", use_pch=False)
    assert "precompiled in" in log
    assert (with_pch.status, with_pch.message) == (without.status, without.message)
    assert with_pch.status.value == "build_error" and "'scalar_t' was not declared" in with_pch.message.replace("‘", "'").replace("’", "'")
    assert with_pch.seconds < without.seconds  # the error comes after torch's headers: sooner from the PCH


@slow
@needs_gcc
def test_flags_without_a_pch_build_as_before_and_do_not_wait(pch_cache, tmp_path):
    odd = tmp_path / "odd_flags.py"
    odd.write_text(CPP_OK.read_text().replace('extra_cflags=["-O3"]',
                                              f'extra_cflags=["-O3", "-I{tmp_path}", "-fno-strict-aliasing"]'))
    result, log = _build(odd, pch_cache)
    assert result.ok and "precompiled" not in log
    before = sorted(p.name for p in (pch_cache / "pch").iterdir())
    other = tmp_path / "other_flags.py"
    other.write_text(CPP_OK.read_text().replace('extra_cflags=["-O3"]', 'extra_cflags=["-O1"]'))
    result, log = _build(other, pch_cache)  # a flag set with no PCH yet: a lone build does not make one
    assert result.ok and "precompiled" not in log
    assert sorted(p.name for p in (pch_cache / "pch").iterdir()) == before


@slow
@needs_gcc
def test_the_pch_is_made_once_and_reused(pch_cache, tmp_path):
    request = pch.request_for(["-O3"], False)
    gch = pch_cache / "pch" / request.key / f"{pch.HEADER}.gch"
    stamp = gch.stat().st_mtime_ns, gch.stat().st_ino
    assert pch.build(pch_cache / "pch", request) == "made already" and not pch.should_build(pch_cache / "pch", request)
    result, log = _build(CPP_OK, pch_cache)
    assert result.ok and "precompiled in" in log
    assert (gch.stat().st_mtime_ns, gch.stat().st_ino) == stamp

