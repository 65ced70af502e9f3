"""Build solutions in parallel, each in its own process, cached by content.

Building a KernelBench-style solution means importing it: its load_inline
call compiles at import. The build process imports it with its own
TORCH_EXTENSIONS_DIR (one folder per source hash, so two solutions that pick
the same extension name never collide); the worker later imports it with the
same folder and torch finds the finished build.

Run as a child: python -m harness.build SPEC.json (__main__.py calls _child)
"""
from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

from .errors import build_error_message, transient
from .queue import BuildQueue, build_nice, compile_slots, concurrency
from .toolchain import FOLDER as TOOLCHAIN_FOLDER, toolchain_versions
from ..shared import sandbox
from ..shared.isolate import Child, child_env, kill_all, run_child
from ..shared.whole_file import replace_whole
from ..records import BuildResult, Status, Task

# Bump to invalidate every cached build (2: verbose builds kept only torch's line;
# 3: build messages gained ld's "cannot find" lines and hints, and cached failures keep their message;
# 4: the key names the compilers' own versions, and builds that finished before their import ended are cached).
BUILD_SALT = "kbench-build-4"
LOG_SUFFIX = ".log"  # the build's log, beside its record (_record_path)

@dataclass(frozen=True)
class BuildConfig:
    device: str  # "cuda" or "cpu"
    arch: str  # TORCH_CUDA_ARCH_LIST, e.g. "9.0"; "" on cpu
    cache_dir: Path
    jobs: int
    timeout: float
    use_cache: bool = True
    precompiled_headers: bool = True  # harness/build/pch.py; KBENCH_PCH=0 turns them off too
    reuse_objects: bool = True  # harness/build/objects.py; KBENCH_OBJECTS=0 turns it off too
    require_sandbox: bool = False  # a build process that cannot be confined imports nothing (--require-sandbox)


def build_key(source: bytes, cfg: BuildConfig, versions: str) -> str:
    h = hashlib.sha256()
    for part in (BUILD_SALT, versions, cfg.device, cfg.arch):
        h.update(part.encode() + b"\0")
    h.update(source)
    return h.hexdigest()[:20]


def toolchain_of(cfg: BuildConfig) -> str:
    """toolchain.toolchain_versions, kept beside cfg's builds (a process that has not
    imported torch then need not)."""
    return toolchain_versions(cfg.device, cfg.cache_dir.parent / TOOLCHAIN_FOLDER)


def build_all(
    tasks: list[Task], cfg: BuildConfig, on_done: Callable[[Task, BuildResult, str], None] | None = None,
    on_found: Callable[[], None] | None = None, timings: dict[str, float] | None = None,
) -> dict[str, BuildResult]:
    """Build every task's solution; returns BuildResult by task key. `on_done`
    gets each task with its result and its build log text as they finish.
    Cached builds and files with nothing to compile are done first, then
    `on_found` is called; real compiles start longest first (build_cost), so that
    no long build starts last. `timings` gets the seconds of finding the
    toolchain's versions and of checking the cached builds."""
    t0 = time.monotonic()
    versions = toolchain_of(cfg)
    t1 = time.monotonic()
    by_key: dict[str, list[Task]] = {}
    sources: dict[str, bytes] = {}
    for task in tasks:
        source = Path(task.solution_path).read_bytes()
        key = build_key(source, cfg, versions)
        by_key.setdefault(key, []).append(task)  # identical files build once
        sources[key] = source
    results: dict[str, BuildResult] = {}
    # Cached builds and files with nothing to compile are done at once; the queue
    # (whose length sets MAX_JOBS and whether a PCH pays off) holds real compiles.
    found = {key: _without_compiling(by_key[key][0], key, cfg, sources[key]) for key in by_key}
    compiles = sorted((key for key in by_key if found[key] is None), key=lambda k: -build_cost(sources[k]))
    at_once = concurrency(len(compiles), max(1, cfg.jobs))
    queue = BuildQueue(compiles, at_once)
    slots = compile_slots()
    pch_root = pch_folder(cfg)
    store = objects_folder(cfg)

    def deliver(key: str, result: BuildResult, log: str) -> None:
        for task in by_key[key]:
            results[task.key] = result
            if on_done:
                on_done(task, result, log)

    def one(key: str, rank: int = 0) -> None:
        with _key_lock(cfg.cache_dir, key):
            done = _without_compiling(by_key[key][0], key, cfg, sources[key]) if cfg.use_cache else None
            if done is not None:  # another kbench built it while this one waited
                deliver(key, *done)
                return
            result, log, wants = _build_one(by_key[key][0], key, cfg, queue.max_jobs(slots), build_nice(rank, at_once))
        deliver(key, result, log)
        for want in wants:
            if "object" in want:
                _schedule_object(queue, store, want["object"], cfg)
            elif "nvcc_host" in want:
                _schedule_host_pch(queue, store, want["nvcc_host"], cfg)
            else:
                _schedule_pch(queue, pch_root, want, cfg)

    def drain() -> None:
        while (popped := queue.pop()) is not None:
            item, rank = popped
            try:
                item() if callable(item) else one(item, rank)
            finally:
                queue.done()

    if timings is not None:
        timings["build_toolchain"] = round(timings.get("build_toolchain", 0.0) + t1 - t0, 3)
        timings["build_cache_check"] = round(timings.get("build_cache_check", 0.0) + time.monotonic() - t1, 3)
    for key in by_key:
        if found[key] is not None:
            deliver(key, *found[key])
    if on_found is not None:
        on_found()
    pool = ThreadPoolExecutor(max_workers=at_once)
    try:
        for future in [pool.submit(drain) for _ in range(at_once)]:
            future.result()
    except BaseException:  # Ctrl-C: stop the compilers now, not after they finish
        queue.close()
        pool.shutdown(wait=False, cancel_futures=True)
        kill_all()
        raise
    pool.shutdown()
    return results


def build_cost(source: bytes) -> int:
    """A rough rank of how long a solution takes to build, from its text alone: a
    CUDA file (nvcc parses torch's headers three times) well above a C++ one, and
    each further build call more. Only the order of builds depends on it."""
    if b"cpp_extension" not in source:
        return 0
    calls = max(1, source.count(b"load_inline(") + source.count(b"load("))
    cuda = b"cuda_sources" in source or re.search(rb"\.cuh?[\"']", source) is not None
    return calls * (4 if cuda else 1)


# ---- objects reused across builds (harness/build/objects.py) ----------------------
# Where ccache is on PATH torch runs every compile through it, and its store would be
# shared by every build. A build process runs solution code, and code that can write
# that store can put an object of its own under the key of a later build's compile,
# which then links it before kbench hashes the build. So ccache is switched off for
# builds (CCACHE_DISABLE: the compile command is unchanged, ccache runs the compiler
# directly), and the objects builds share are kbench's own: objects.py's store, which a
# build reads through its `c++` stand-in and only kbench's publisher writes.
NO_SHARED_OBJECTS = {"CCACHE_DISABLE": "1"}


def objects_folder(cfg: BuildConfig) -> Path | None:
    """The object store (beside builds/, outside what a candidate may write), or None
    when reuse is off: KBENCH_OBJECTS=0, or BuildConfig says so."""
    if not cfg.reuse_objects or os.environ.get("KBENCH_OBJECTS", "1") == "0":
        return None
    return cfg.cache_dir.parent / "objects"


def _schedule_object(queue: BuildQueue, store: Path | None, want: dict, cfg: BuildConfig) -> None:
    from . import objects

    if store is None or not objects.worth_publishing(store, want["key"]):
        return
    queue.put_first(f"object:{want['key']}", lambda: publish_object(store, want, cfg))


def publish_object(store: Path, want: dict, cfg: BuildConfig) -> None:
    """Compile a build's missed source in a process of kbench's own and publish it
    (objects.publish); its output goes to <store>/logs/<key>.log."""
    (store / "wants").mkdir(parents=True, exist_ok=True)
    (store / "logs").mkdir(parents=True, exist_ok=True)
    path = store / "wants" / f"{want['key']}.json"
    path.write_text(json.dumps(want))
    env = dict(os.environ, KBENCH_REQUIRE_SANDBOX="0")  # it runs no solution code: walls are a second line
    root = pch_folder(cfg)
    if root is not None:
        env["KBENCH_PCH_DIR"] = str(root)
    run_child(["-m", "harness.build.objects", str(store), str(path)], store / "logs" / f"{want['key']}.log",
              cfg.timeout, env=child_env(env))
    path.unlink(missing_ok=True)


def _schedule_host_pch(queue: BuildQueue, store: Path | None, want: dict, cfg: BuildConfig) -> None:
    """A precompiled prefix for nvcc's host compile (host_pch.py), made as the PCH is:
    once per flags, when enough builds wait to pay for it (about 70 CPU-s against 11 saved
    by each CUDA build)."""
    from . import host_pch

    if store is None or not _pch_pays_off(queue.waiting(), max(1, cfg.jobs)):
        return
    if host_pch.kbench_nvcc() is None:
        return  # no nvcc of kbench's: a note naming one of the build's starts nothing
    if host_pch.should_make(store, want["key"]):
        queue.put_first(f"nvcc-host:{want['key']}", lambda: make_host_pch(store, want, cfg))


def make_host_pch(store: Path, want: dict, cfg: BuildConfig) -> None:
    """host_pch.make in a process of kbench's own; its output goes to <store>/logs/."""
    for sub in ("wants", "logs"):
        (store / sub).mkdir(parents=True, exist_ok=True)
    path = store / "wants" / f"nvcc-host-{want['key']}.json"
    path.write_text(json.dumps(want))
    env = dict(os.environ, KBENCH_REQUIRE_SANDBOX="0")
    root = pch_folder(cfg)
    if root is not None:
        env["KBENCH_PCH_DIR"] = str(root)
    run_child(["-m", "harness.build.host_pch", str(store), str(path)], store / "logs" / f"nvcc-host-{want['key']}.log",
              max(cfg.timeout, 900.0), env=child_env(env))
    path.unlink(missing_ok=True)


# ---- precompiled headers (harness/build/pch.py) ---------------------------------------
PCH_MIN_WAITING = 8


def pch_folder(cfg: BuildConfig) -> Path | None:
    """Where this run's PCHs live (beside builds/, outside what a candidate may
    write), or None when they are off: KBENCH_PCH=0, or BuildConfig says so."""
    if not cfg.precompiled_headers or os.environ.get("KBENCH_PCH", "1") == "0":
        return None
    return cfg.cache_dir.parent / "pch"


def _pch_pays_off(waiting: int, jobs: int) -> bool:
    """A PCH costs about 1.2 host compiles and saves about 0.6 of one in each later
    build with the same flags; while it is made, the other slots go on without it.
    So it is made in this run only when builds wait for well over a round of slots;
    once made, it serves every later run."""
    return waiting >= max(PCH_MIN_WAITING, 2 * jobs)


def _schedule_pch(queue: BuildQueue, root: Path | None, want: dict, cfg: BuildConfig) -> None:
    from . import pch

    if root is None or not _pch_pays_off(queue.waiting(), max(1, cfg.jobs)):
        return
    request = pch.request_for(want.get("extra_cflags"), bool(want.get("with_cuda")))
    if request is None or not pch.should_build(root, request):
        return
    queue.put_first(request.key, lambda: make_pch(root, want, request.key, cfg.timeout))


def make_pch(root: Path, want: dict, key: str, timeout: float) -> None:
    """Make one PCH in a process of its own (no solution code runs there); its
    output goes to <root>/<key>.log."""
    root.mkdir(parents=True, exist_ok=True)
    run_child(["-m", "harness.build.pch", str(root), json.dumps(want)], root / f"{key}.log", timeout,
              env=child_env(dict(os.environ)))


@contextlib.contextmanager
def _key_lock(cache_dir: Path, key: str):
    """One build of a key at a time across kbench processes that share a cache (two runs,
    or a run and a Session): a second build of the same key starts by removing the
    folder the first one's build process was confined to, and that process then failed
    with "Permission denied" on torch's lock in its own folder. The second waits, and
    finds the build cached."""
    cache_dir.mkdir(parents=True, exist_ok=True)
    with open(cache_dir / f"{key}.lock", "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        yield


def _without_compiling(task: Task, key: str, cfg: BuildConfig, source: bytes) -> tuple[BuildResult, str] | None:
    """The result and log of a build that needs no compiler: nothing to compile, or
    cached and intact; None when it must be built."""
    ext_dir = cfg.cache_dir / key
    if b"cpp_extension" not in source:
        # Nothing to compile (pure PyTorch, Triton, ...): a build process would only
        # import torch. The worker imports the file itself and reports what happens.
        return BuildResult(True, None, "", 0.0, False, str(ext_dir / "ext")), "[kbench: no extension to build]\n"
    record = _load_record(ext_dir) if cfg.use_cache else None
    if record is None or not intact(str(ext_dir / "ext")):
        return None
    log_path = _record_path(ext_dir, LOG_SUFFIX)
    log = log_path.read_text(errors="replace") if log_path.is_file() else ""
    return _result(record["result"], seconds=0.0, cached=True, ext_dir=ext_dir), f"[kbench: build cached in {ext_dir}]\n{log}"


# After its last extension build ended, a solution's import may go on this long
# before kbench ends the build process: the judge gives an import as long
# (harness/judge/limits.py, HANG_IMPORT_S) and judges what the import does then.
AFTER_BUILD_S = float(os.environ.get("KBENCH_HANG_IMPORT_S") or 30.0)


def _build_one(task: Task, key: str, cfg: BuildConfig, max_jobs: int = 1,
               nice: int = 10) -> tuple[BuildResult, str, list[dict]]:
    """One solution's build, its log, and the PCHs it would have used had they been made."""
    # Absolute, as the paths in its spec: the build process works in its scratch folder, not
    # in kbench's (--solutions rel, --cache-dir rel).
    cfg = replace(cfg, cache_dir=Path(os.path.abspath(cfg.cache_dir)))
    ext_dir = cfg.cache_dir / key
    if ext_dir.exists():
        shutil.rmtree(ext_dir, ignore_errors=True)
    (ext_dir / "tmp").mkdir(parents=True)
    spec = ext_dir / "spec.json"
    out = ext_dir / "result.partial.json"
    spec.write_text(json.dumps({"solution_path": os.path.abspath(task.solution_path),
                                "problem_path": os.path.abspath(task.problem_path), "device": cfg.device,
                                "out": str(out)}))
    env = dict(os.environ)
    # The build process may write its own folder and nothing else (_child confines it):
    # its temporary files and caches go there too.
    env.update({**sandbox.scratch_env(str(ext_dir / "tmp")), **NO_SHARED_OBJECTS}, KBENCH_BUILD_DIR=str(ext_dir),
               TORCH_EXTENSIONS_DIR=str(ext_dir / "ext"), MAX_JOBS=str(max_jobs), PYTHONUNBUFFERED="1",
               KBENCH_PARENT_PID=str(os.getpid()), KBENCH_BUILD_NICE=str(nice),
               KBENCH_REQUIRE_SANDBOX="1" if cfg.require_sandbox else "0")
    root = pch_folder(cfg)
    if root is not None:
        env["KBENCH_PCH_DIR"] = str(root)
    store = objects_folder(cfg)
    compilers: dict[str, str] = {}
    if store is not None:
        from . import objects

        added = objects.build_env(store, ext_dir / "tmp", env)
        env.update(added)
        compilers = {k: v for k, v in added.items() if k in LOADER_ENV}
    if cfg.arch:
        env["TORCH_CUDA_ARCH_LIST"] = cfg.arch
    # Its working folder is its scratch, as a candidate's is: a solution that writes its
    # generated source to "./kernel.cu" works in both (where kbench's cwd is not writable).
    child = Child(["-m", "harness.build", str(spec)], env=child_env(env), cwd=str(ext_dir / "tmp"),
                  result_pipe=True)
    log_path = _record_path(ext_dir, LOG_SUFFIX)
    for stale in (log_path, _record_path(ext_dir, ".json")):  # an earlier build's: this one replaces it or none
        stale.unlink(missing_ok=True)
    outcome = child.finish(log_path, cfg.timeout, stop=lambda: _import_goes_on(child))
    events = [m for m in outcome.messages if isinstance(m.get("compile"), str)]
    wants: list[dict] = []
    data = _said(out, cfg.device)
    if data is not None:
        wants = _valid_wants(data.pop("pch_wants", None))
    else:
        data = _after_build(events, outcome)
        if data is not None:
            with open(log_path, "a") as f:
                f.write(f"[kbench: the build process {outcome.death} after its last extension build "
                        f"{'failed' if data['status'] != 'ok' else 'finished'}; the build's outcome is kept]\n")
        elif outcome.returncode == sandbox.REFUSED_EXIT:
            data = {"status": Status.BUILD_ERROR.value, "cache": False,
                    "message": "not built: this host cannot confine a build process (no Landlock), and "
                               "--require-sandbox is on; run where Landlock is enabled, or pass --no-require-sandbox"}
        elif outcome.timed_out:
            data = {"status": Status.TIMEOUT.value, "message": f"build timed out after {cfg.timeout:.0f} s (--build-timeout)"}
        else:
            data = {"status": Status.CRASHED.value, "message": f"build process {outcome.death} while importing the solution"}
    if store is not None:
        from . import host_pch, objects

        wants += [{"object": want} for want in objects.read_wants(ext_dir / "tmp", ext_dir)]
        wants += [{"nvcc_host": want} for want in host_pch.read_wants(ext_dir / "tmp")]
    log = log_path.read_text(errors="replace") if log_path.is_file() else ""
    # A finished build is cached whatever the import did after it, and so is a compiler's
    # error; a timeout, a death before any build ended, or a compiler the host killed is not.
    if data.pop("cache", True) and data["status"] not in (Status.TIMEOUT.value, Status.CRASHED.value):
        _store_record(ext_dir, data, compilers, _failed_calls(events))
    return _result(data, outcome.seconds, cached=False, ext_dir=ext_dir), log, wants


# What a build process may say of its own outcome: the statuses an import can end in.
_SAID_STATUSES = {"ok", Status.BUILD_ERROR.value, Status.LOAD_ERROR.value, Status.SKIPPED.value}


def _said(out: Path, device: str) -> dict | None:
    """The outcome the build process wrote, if it is one: it ran solution code, which
    may have written anything there. `skipped` (a CUDA build on a CPU run) only on a CPU
    run: on a GPU a build is never skipped, and a gate passes a skipped task."""
    try:
        data = json.loads(sandbox.read_written(out) or b"null")
    except ValueError:
        return None
    if not (isinstance(data, dict) and data.get("status") in _SAID_STATUSES and isinstance(data.get("message", ""), str)):
        return None
    if data["status"] == Status.SKIPPED.value and device != "cpu":
        return None
    return {k: data[k] for k in ("status", "message", "cache", "pch_wants") if k in data}


def _import_goes_on(child: Child) -> bool:
    """The build process has built what it set out to (its last build call ended and
    none runs) and its import has gone on for AFTER_BUILD_S since: a hang or a
    sleep that is the task's to judge, not the build's."""
    pipe = child.results
    events = [m["compile"] for m in list(pipe.messages) if isinstance(m.get("compile"), str)]
    return bool(events) and events[-1] != "start" and time.monotonic() - pipe.last_at > AFTER_BUILD_S


def _after_build(events: list[dict], outcome) -> dict | None:
    """The outcome of a build process that ended without its result (it exited, was
    killed, hung) once its build calls had ended: their outcome, which a rerun would
    only repeat. None if a build call was still running or none ran."""
    if not events or events[-1]["compile"] == "start":
        return None
    failed = [e for e in events if e["compile"] == "failed"]
    if failed:
        text = str(failed[-1].get("text", ""))
        return {"status": Status.BUILD_ERROR.value, "message": build_error_message(text, fallback=text[:300]),
                "cache": not transient(text)}
    return {"status": "ok", "message": ""}


# At most this many failed builder calls are kept for the candidate to raise again, each
# with at most this much of its text (a compiler's first errors come first).
MAX_FAILED_CALLS, MAX_FAILED_TEXT = 8, 64 << 10


def _failed_calls(events: list[dict]) -> dict[str, str]:
    """The builder calls whose compile failed in the build process, by digest
    (load.call_digest), with torch's error text: the candidate raises that error
    for the same call instead of compiling it again (load.install_build_hooks).
    Told by the build process, which ran solution code: whatever it says here
    only makes that solution's own build fail in its candidate. A failure that was
    the host's (transient: a killed compiler) is compiled again there."""
    found: dict[str, str] = {}
    for e in events:
        call, text = e.get("call"), e.get("text")
        if (e["compile"] == "failed" and isinstance(call, str) and re.fullmatch(r"[0-9a-f]{64}", call)
                and isinstance(text, str) and not transient(text) and len(found) < MAX_FAILED_CALLS):
            found[call] = text[:MAX_FAILED_TEXT]
    return found


def _valid_wants(wants) -> list[dict]:
    """The build process ran solution code: take only well-formed PCH wishes from it
    (flags are checked again against pch's list before any is made)."""
    if not isinstance(wants, list):
        return []
    return [{"extra_cflags": list(w["extra_cflags"]), "with_cuda": bool(w.get("with_cuda"))} for w in wants[:4]
            if isinstance(w, dict) and isinstance(w.get("extra_cflags"), list)
            and all(isinstance(f, str) for f in w["extra_cflags"])]


# ---- the build's record, kept where no solution code may write ---------------
# A build process may write only its own folder, and a candidate the build cache
# (torch's loader takes a lock file beside a built extension): either could write
# another solution's build. So what kbench knows of a build (its outcome, its log,
# and the hash of every file its extensions folder holds) is kept in <cache>/records,
# beside builds/, which no solution code may write, and checked before every use: a
# build that changed is rebuilt, never loaded. Every file, not only the libraries:
# torch's loader runs ninja at each load, which would link a planted object that is
# newer than the library into a fresh one after the check.

def _record_path(key_dir: Path, suffix: str) -> Path:
    return key_dir.parent.parent / "records" / f"{key_dir.name}{suffix}"


def _files(ext_dir: Path) -> dict[str, str]:
    """Each file of an extensions folder by its hash, each link by its target; not
    `lock`, which torch's loader takes and drops beside the build at every load."""
    found: dict[str, str] = {}
    for folder, dirs, names in os.walk(ext_dir):
        for name in sorted(names + [d for d in dirs if os.path.islink(os.path.join(folder, d))]):
            path = Path(folder) / name
            rel = str(path.relative_to(ext_dir))
            if path.is_symlink():
                found[rel] = "-> " + os.readlink(path)
            elif name != "lock" and path.is_file():
                found[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


def _store_record(key_dir: Path, data: dict, compilers: dict[str, str] | None = None,
                  failed_calls: dict[str, str] | None = None) -> None:
    path = _record_path(key_dir, ".json")
    path.parent.mkdir(parents=True, exist_ok=True)
    replace_whole(path, json.dumps({"result": data, "files": _files(key_dir / "ext"), "compilers": compilers or {},
                                    "failed_calls": failed_calls or {}}))


# The compiler names a build process ran under where kbench's stand-ins took CXX's and CC's
# places (objects.build_env), and the compilers those stand for. torch writes CXX and CC
# into build.ninja, and its loader in the candidate writes build.ninja again from the
# candidate's environment and runs ninja: under other names ninja compiled the whole
# extension again inside the task's import, the build no longer matched its record, and
# every later run built it again. The candidate loads under the build's names
# (loader_env; candidate/serve.py); a stand-in outside a build runs its real compiler.
LOADER_ENV = ("CXX", "CC", "KBENCH_REAL_CXX", "KBENCH_REAL_GCC")


def loader_env(ext_dir: str) -> dict[str, str]:
    """What the candidate's environment must name for torch's loader to find this build up
    to date: the compilers its build process ran under, where they differ from kbench's
    own; {} for none."""
    return {k: v for k, v in _record_strings(ext_dir, "compilers").items() if k in LOADER_ENV}


def failed_calls(ext_dir: str) -> dict[str, str]:
    """The builder calls that failed in this build's process, for its candidate to
    raise again without compiling (_failed_calls); {} for none."""
    return _record_strings(ext_dir, "failed_calls")


def _record_strings(ext_dir: str, field: str) -> dict[str, str]:
    """A {str: str} field of a build's record; {} where there is none."""
    record = _load_record(Path(ext_dir).parent) if ext_dir else None
    found = record.get(field) if record else None
    if not isinstance(found, dict):
        return {}
    return {k: v for k, v in found.items() if isinstance(k, str) and isinstance(v, str)}


def _load_record(key_dir: Path) -> dict | None:
    try:
        record = json.loads(_record_path(key_dir, ".json").read_text())
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) and isinstance(record.get("result"), dict) else None


def intact(ext_dir: str) -> bool:
    """The build's files are still those kbench recorded when it built them (a folder
    with no record and nothing in it has nothing to check)."""
    d = Path(ext_dir)
    record = _load_record(d.parent)
    if record is None:
        return not (d.is_dir() and any(d.iterdir()))
    try:
        return record.get("files") == _files(d)
    except OSError:
        return False


def _result(data: dict, seconds: float, cached: bool, ext_dir: Path) -> BuildResult:
    status = None if data["status"] == "ok" else Status(data["status"])
    return BuildResult(status is None, status, data.get("message", ""), seconds, cached, str(ext_dir / "ext"))


# ---- child side -------------------------------------------------------------

def lower(nice: int) -> None:
    """Run this process, and what it starts, at `nice`. Where the kernel groups
    processes by session for scheduling (autogroup, on by default on many Linux
    hosts), nice ranks a process only within its session, and every build is a
    session of its own (isolate.Child): the session's own nice is set as well."""
    try:
        os.nice(max(0, nice - os.getpriority(os.PRIO_PROCESS, 0)))
    except OSError:
        pass
    try:
        with open("/proc/self/autogroup", "w") as f:
            f.write(str(nice))
    except OSError:
        pass  # no autogroup: the process's own nice is what counts


def _teller(fd: int) -> Callable[[dict], None]:
    """One JSON line per build event on the pipe kbench reads while this process runs."""
    pipe = os.fdopen(fd, "w", buffering=1)

    def tell(event: dict) -> None:
        if "text" in event:
            event = {**event, "text": event["text"][:256 << 10]}  # the compiler's first error lines come early
        pipe.write(json.dumps(event) + "\n")
        pipe.flush()

    return tell


def _child(spec_path: str, result_fd: str | None = None) -> None:
    # The solution's module-level code runs here, at import: it must not outlive a
    # kbench killed outright (its --build-timeout is kbench's to enforce). The thread
    # that started us waits for us, so the signal follows kbench's death only.
    if os.environ.get("KBENCH_PARENT_PID"):
        from ..shared.sandbox import set_parent_death_signal

        set_parent_death_signal(int(os.environ["KBENCH_PARENT_PID"]))
    # Below the evaluation lane's processes, which time tasks while builds run, and
    # ranked among the builds (queue.build_nice); its compilers (ninja, nvcc,
    # cc1plus) inherit it.
    lower(int(os.environ.get("KBENCH_BUILD_NICE", "10")))
    spec = json.loads(Path(spec_path).read_text())
    # Confined before torch is imported (Landlock needs a single thread) and before any
    # solution code runs: this process and all it starts (the compilers, whatever the
    # solution spawns) may write its own build folder and nothing else.
    from ..shared import sandbox

    sandbox.confine([os.environ["KBENCH_BUILD_DIR"]], "build process")
    from . import load

    hooks = load.install_build_hooks(spec["device"], _teller(int(result_fd)) if result_fd else None)
    try:
        module = load.load_solution(spec["solution_path"], spec["device"])
        data: dict = {"status": "ok", "message": ""}
        failures = len(hooks.failures)
        said = load.construct_for_builds(module, spec.get("problem_path"), hooks, spec["device"])
        print(f"[kbench: the solution's class constructed here once, on the meta device, for the extensions its "
              f"constructor builds: {said}]", flush=True)
        for text in hooks.failures[failures:]:
            print(text)  # the compiler's output, into the log; the candidate raises it again
    except BaseException as e:  # noqa: BLE001 - a solution may raise anything, SystemExit included
        if hooks.failures:
            print(hooks.failures[-1])  # the full compiler output, into the log
        status, message = load.import_failure(e, hooks, spec["device"])
        data = {"status": status.value, "message": message}
        if hooks.failures and transient(hooks.failures[-1]):
            data["cache"] = False
    if hooks.pch_wants:
        data["pch_wants"] = hooks.pch_wants[:4]
    replace_whole(Path(spec["out"]), json.dumps(data))
    sys.stdout.flush()
    os._exit(0)  # skip interpreter teardown: a solution's atexit hooks are not our problem
