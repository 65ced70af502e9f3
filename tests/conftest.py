import json
import os
import re
import subprocess
import sys
import threading
import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # `import cli`, `import harness` without installing
sys.path.insert(0, str(Path(__file__).resolve().parent))  # `import expect`


# Fixtures that start kbench runs (a module using one takes tens of seconds to minutes).
RUNS = {"run_cli", "adversarial_cpu", "kbench_cache"}

# ---- two pytest-xdist workers on a CPU machine --------------------------------------
# The whole suite (`python -m pytest`, no paths: the README's command and CI's) runs on two
# workers where torch sees no GPU: the CPU adversarial run (conftest.adversarial_cpu) is half
# of the suite's time and judges one task at a time, so the rest runs beside it. A run given
# paths, any GPU machine (its timing tests want the GPU and the host to themselves) and
# KBENCH_TEST_WORKERS=0 run in one process, as before. Each module is one unit of work, so a
# module's own kbench run is made once; the tests that read the adversarial run are one.
WORKERS = 2
ADVERSARIAL_GROUP = "adversarial-cpu"


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config) -> int:
    """`-n auto` (pyproject's addopts): how many workers (0: none, one process)."""
    if os.environ.get("KBENCH_TEST_WORKERS"):
        return int(os.environ["KBENCH_TEST_WORKERS"])
    if config.args_source is not pytest.Config.ArgsSource.TESTPATHS:
        return 0  # some tests, named: no worker start-up to pay, output as before
    try:
        import torch

        if torch.cuda.is_available():
            return 0
    except Exception:  # noqa: BLE001
        pass
    return min(WORKERS, len(os.sched_getaffinity(0)))


def _worker(config) -> str | None:
    """This process's xdist worker id ("gw0", ...), or None (one process, or the controller)."""
    return getattr(config, "workerinput", {}).get("workerid")


def _distributed(config) -> bool:
    return _worker(config) is not None


def pytest_configure(config):
    """One build cache for every CLI run in the session, whichever worker runs it (an
    explicit KBENCH_CACHE is used as is, so builds made by earlier runs are reused): made by
    the controller (or the only process), handed to the workers (pytest_configure_node)."""
    import tempfile

    workerinput = getattr(config, "workerinput", {})
    for name in workerinput.get("kbench_unset", ()):  # see pytest_configure_node
        os.environ.pop(name, None)
    given = workerinput.get("kbench_cache")
    if given:
        config.stash[_CACHE] = Path(given)
    elif os.environ.get("KBENCH_CACHE"):
        config.stash[_CACHE] = Path(os.environ["KBENCH_CACHE"])
    else:
        config.stash[_CACHE] = Path(tempfile.mkdtemp(prefix="kbench-test-cache-"))
        config.stash[_OWNED] = True


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node):
    node.workerinput["kbench_cache"] = str(node.config.stash[_CACHE])
    # A worker starts with COLUMNS=80 and LINES=24 in its environment where the controller has
    # none: every kbench a test starts would then draw its tables 80 columns wide and cut the
    # cells the tests read ("float32[512, 256]", "[unconfined]"). The worker drops them again.
    node.workerinput["kbench_unset"] = [name for name in ("COLUMNS", "LINES") if name not in os.environ]


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups
def pytest_collection_modifyitems(config, items):
    """Modules that start kbench runs go after the rest, so that the first minute shows
    hundreds of unit tests passing (and a unit failure shows in seconds, not after the
    end-to-end runs). Modules move whole, keeping their order, so that a module-scoped
    run is made once. On xdist workers the tests of the adversarial run and test_doors go
    first (see below), and each module is one group, less its tests of the adversarial run.
    Then gpu-marked tests skip, visibly, where torch sees no CUDA device."""
    slow = {item.module.__name__ for item in items if RUNS & set(item.fixturenames)}
    items.sort(key=lambda item: item.module.__name__ in slow)  # stable: collection order otherwise
    if _distributed(config):
        def adversarial(item) -> bool:
            return "adversarial_cpu" in item.fixturenames

        for item in items:  # no module-scoped fixture is shared by a module's two sides
            item.add_marker(pytest.mark.xdist_group(ADVERSARIAL_GROUP if adversarial(item) else item.module.__name__))
        watchers = {item.module.__name__ for item in items if "escape_watch" in item.fixturenames}
        runs = {item.module.__name__ for item in items if RUNS & set(item.fixturenames) and not adversarial(item)}
        # The tests that read the adversarial run first (its C++ builds, then its one-lane run,
        # are the suite's longest chain: build_ahead), test_doors next (its watch must end before
        # the adversarial run's begins: escape_watch), then the unit modules, whose light load
        # leaves the builds most of the cores, and the other end-to-end modules last, beside the
        # adversarial run.
        items.sort(key=lambda item: (not adversarial(item), item.module.__name__ not in watchers,
                                     item.module.__name__ in runs))
        if any(adversarial(item) for item in items):
            config.stash[_WAIT_AHEAD] = runs - watchers
    if _worker(config) in (None, "gw0"):  # one PCH for the session's cache
        _start_the_pch(config, wanted=len(slow) >= PCH_FROM_MODULES)
    try:
        import torch

        has_cuda = torch.cuda.is_available()
    except Exception:  # noqa: BLE001
        has_cuda = False
    if has_cuda:
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


# The flags of the suite's C++ fixtures (tests/fixtures/**, demo/): one precompiled
# torch/extension.h serves all their builds. Made while the unit tests run, it halves
# each of the dozen builds (about 39 -> 20 s of CPU each on the 2-core CI box, for 62 s
# once), which is most of the end-to-end runs' build time. Nothing waits for it: a build
# that starts before it is published compiles as before. Made only where enough
# end-to-end modules were collected to pay for it (the whole suite, not one module).
PCH_FLAGS = ["-O3"]
PCH_FROM_MODULES = 4
_CACHE, _PCH, _OWNED = pytest.StashKey[Path](), pytest.StashKey[int](), pytest.StashKey[bool]()
_WAIT_AHEAD = pytest.StashKey[set]()


def _built_ahead(cache: Path) -> Path:
    """The file adversarial_cpu writes once its set's builds are done (build_ahead)."""
    return cache.parent / f"{cache.name}-built-ahead"


def pytest_runtest_setup(item):
    """On an xdist worker, a module that starts kbench runs waits until the adversarial
    set's builds are done: its judges and candidates would take the cores from those builds
    (they run niced), and the adversarial run, the suite's longest chain, would start late."""
    if item.module.__name__ in item.config.stash.get(_WAIT_AHEAD, set()):
        done, deadline = _built_ahead(item.config.stash[_CACHE]), time.monotonic() + 1800
        while not done.exists() and time.monotonic() < deadline:
            time.sleep(1)


def _start_the_pch(config, wanted: bool) -> None:
    """The session cache's PCH, made in the background."""
    cache = config.stash[_CACHE]
    if not wanted or os.environ.get("KBENCH_PCH", "1") == "0":
        return
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}
    want = json.dumps({"extra_cflags": PCH_FLAGS, "with_cuda": False})
    # Detached (its starter exits at once, so init adopts it): tests that run executors in
    # this process make it a subreaper that kills every child it did not start itself.
    starter = ("import subprocess, sys\n"
               "log = open(sys.argv[1], 'w')\n"
               "print(subprocess.Popen(sys.argv[2:], stdout=log, stderr=subprocess.STDOUT, "
               "start_new_session=True).pid)\n")
    out = subprocess.run([sys.executable, "-c", starter, str(cache.parent / f"{cache.name}-pch.log"), sys.executable,
                          "-m", "harness.build.pch", str(cache / "pch"), want], env=env, cwd=ROOT, capture_output=True,
                         text=True, timeout=60)
    if out.returncode == 0 and out.stdout.strip().isdigit():
        config.stash[_PCH] = int(out.stdout.strip())


# How long the adversarial set's builds wait for the session's PCH (_start_the_pch) at most.
PCH_WAIT_S = 240.0


def _wait_for_the_pch(cache: Path) -> None:
    """Until the session's PCH job has said how it ended (its log's second line), if one was
    started. Its builds would otherwise start beside it and the first of them compile
    without it: 4 of the set's 15 did in a standalone build, at 31-35 s of a 2-core box
    each against 16-19 s with it. Waiting costs the longest chain nothing it would not
    spend on those builds, and leaves the other worker the core the PCH does not use."""
    log = cache.parent / f"{cache.name}-pch.log"
    deadline = time.monotonic() + PCH_WAIT_S
    while log.is_file() and time.monotonic() < deadline:
        lines = log.read_text(errors="replace").splitlines()
        if len(lines) >= 2 or any("no PCH" in line for line in lines):
            return
        time.sleep(0.5)


def pytest_sessionfinish(session):
    pid = session.config.stash.get(_PCH, None)
    if pid is not None:  # still making it: stop it, with its compiler (its own session)
        try:
            if b"harness.build.pch" in Path(f"/proc/{pid}/cmdline").read_bytes():
                os.killpg(pid, 9)
        except OSError:
            pass
    cache = session.config.stash.get(_CACHE, None)
    if cache is not None and session.config.stash.get(_OWNED, False):  # the controller's, after every worker's end
        import shutil

        shutil.rmtree(cache, ignore_errors=True)
        for leftover in (f"{cache.name}-pch.log", f"{cache.name}-escapes.lock", _built_ahead(cache).name):
            Path(cache.parent / leftover).unlink(missing_ok=True)


@pytest.fixture(scope="session")
def kbench_cache(pytestconfig) -> Path:
    """The session's build cache (see _start_the_pch)."""
    return pytestconfig.stash[_CACHE]


# A CLI run in a test can take minutes. pytest shows a test's outcome only when it ends,
# so the runs say how far they are on the terminal at least this often.
PROGRESS_EVERY_S = 30.0


@pytest.fixture(scope="session")
def run_cli(kbench_cache, pytestconfig):
    """Run `python cli.py ARGS` as a user would; returns the CompletedProcess. While it
    runs, its latest task line ("12/85 eta 1m30s ok level1/...") is echoed to the
    terminal every PROGRESS_EVERY_S, so a long end-to-end test is never silent."""
    terminal = pytestconfig.pluginmanager.get_plugin("terminalreporter")
    capture = pytestconfig.pluginmanager.get_plugin("capturemanager")

    def say(text: str) -> None:
        """To the terminal now: pytest captures a test's output (fd 1 and 2) while it runs."""
        if terminal is None:
            return
        if capture is None:
            terminal.write_line(text)
            return
        with capture.global_and_fixture_disabled():
            terminal.write_line(text)

    def run(*args: str, cwd: Path = ROOT, timeout: float = 900, env: dict | None = None) -> subprocess.CompletedProcess:
        env = {**os.environ, "KBENCH_CACHE": str(kbench_cache), "PYTHONUNBUFFERED": "1", **(env or {})}
        cmd = [sys.executable, str(ROOT / "cli.py"), *args]
        with subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as proc:
            expired = threading.Event()
            watchdog = threading.Timer(timeout, lambda: (expired.set(), proc.kill()))
            watchdog.start()
            out: list[str] = []
            reader = threading.Thread(target=lambda: out.append(proc.stdout.read()), daemon=True)
            reader.start()
            err, last_said, latest = [], time.monotonic(), ""
            try:
                for line in proc.stderr:  # ends when kbench exits (or is killed)
                    err.append(line)
                    if TASK_LINE.match(line):
                        latest = line.strip()
                    if latest and time.monotonic() - last_said > PROGRESS_EVERY_S:
                        say(f"    kbench {args[0]} ... {latest[:150]}")
                        last_said, latest = time.monotonic(), ""
                proc.wait()
                reader.join()
            finally:
                watchdog.cancel()
            if expired.is_set():
                raise subprocess.TimeoutExpired(cmd, timeout, "".join(out), "".join(err))
        return subprocess.CompletedProcess(cmd, proc.returncode, "".join(out), "".join(err))

    return run


# console.RichReporter's lines as a task ends and as a compile ends
TASK_LINE = re.compile(r"\s*\d+/\d+ eta |built |build failed: ")


# Escape fixtures (tests/fixtures/adversarial/*/14_escape, ...) put this string in the
# command line of every process they leave behind, and name every file they write
# outside their scratch folder kbench-pwned-*.
ESCAPE_MARKER = b"kbench-escape-marker"


def marker_pids() -> set[int]:
    """Live processes whose command line carries ESCAPE_MARKER."""
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                if ESCAPE_MARKER in (entry / "cmdline").read_bytes():
                    found.add(int(entry.name))
            except OSError:
                continue
    return found


def kill_pids(pids) -> None:
    import signal

    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def pwned_files() -> set[Path]:
    """Files escape fixtures write outside their scratch folder: in /tmp, ~, kbench's own
    package, torch's, and the stores of the session's build caches (mkdtemp'd in /tmp)."""
    import torch

    places = [Path("/tmp"), Path.home(), ROOT / "harness", Path(torch.__file__).parent,
              *Path("/tmp").glob("kbench-test-cache-*"), *Path("/tmp").glob("kbench-test-cache-*/*")]
    return {path for place in places for path in place.glob("kbench-pwned-*")}


# ---- the CPU adversarial set, run once per session ------------------------------------

ADVERSARIAL = ROOT / "tests" / "fixtures" / "adversarial"
# The hang limits the run uses, lowered from 30 s (tests/judge/test_hang.py checks they are obeyed).
HANG_LIMITS = {"KBENCH_HANG_FIRST_MIN_S": "10", "KBENCH_HANG_IMPORT_S": "10"}
# The set's runs (adversarial_cpu's, and its hang fixtures' of their own), less --out and -s.
# 2 s: the budget is a hard cap (judge/stopping.py), and the twins' and max_speedup's
# comparisons want a median of several pairs, not one or two. It also sizes the batches: at
# 1 s the run took 392 s, not 483 (idle 2-core box), but in a suite run inflated_fixed_cost.py
# was timed 3 calls a batch, not 13, and read 1.38x its twin, a miss measure_again does not retry.
ADVERSARIAL_RUN = ("--problems", str(ADVERSARIAL / "problems"), "--solutions", str(ADVERSARIAL / "cpu"),
                   "--device", "cpu", "--time-budget", "2", "--timeout", "120")


@pytest.fixture(scope="session")
def escape_watch(kbench_cache):
    """A context manager that holds the session's escape watch: the runs that look for
    processes and files left behind by escape fixtures (ESCAPE_MARKER, kbench-pwned-*), and
    kill what they find, take turns, whichever worker runs them, so that none sees (or
    kills) what another one's fixtures do while it watches."""
    import contextlib
    import fcntl

    path = kbench_cache.parent / f"{kbench_cache.name}-escapes.lock"

    @contextlib.contextmanager
    def watching():
        with open(path, "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    return watching


def build_ahead(problems: Path, solutions: Path, cache: Path) -> subprocess.CompletedProcess:
    """Build every solution of a set into `cache` as `kbench run --device cpu` would at its
    start (tests/build_ahead.py), so that the run finds its builds cached and its tasks
    start at once (a CPU run judges none while a build runs)."""
    env = {**os.environ, "KBENCH_CACHE": str(cache),
           "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}
    return subprocess.run([sys.executable, str(ROOT / "tests" / "build_ahead.py"), str(problems), str(solutions)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800)


@pytest.fixture(scope="session")
def adversarial_cpu(run_cli, kbench_cache, escape_watch, tmp_path_factory, request) -> dict:
    """Every CPU adversarial fixture (tests/fixtures/adversarial/cpu) judged, and what
    happened after kbench exited: the hang fixtures in a run of their own (_hang_run),
    started first and made beside the rest, the others in one run. test_adversarial,
    test_hang and test_escapes read it: each used to run its own subset again. `data` holds
    both runs' results; its `run` is the main run's.

    The session's build cache (and its PCH): the cache-poisoning fixture attacks the
    victim's build in it, and test_escapes checks that build still works in a second
    run. The set's C++ is built into it first (build_ahead: its compiles take two cores
    for minutes, while another worker's tests, test_doors' watch among them, go on); the
    run then judges every task as before. The escape checks, over the run and under
    escape_watch:
    (a) 3 s after kbench exits, no process carrying the fixtures' marker is alive (any
    found are killed); (b) 5 s after, results.json has the bytes it had at exit; (c) no
    kbench-pwned-* file appeared in /tmp or ~ (any found are removed)."""
    tmp = tmp_path_factory.mktemp("adversarial-cpu")
    cache, out = kbench_cache, tmp / "run"
    seen: dict = {"cache": cache, "tmp": tmp, "out": out}
    # The hang fixtures in a run of their own, beside the wait for the PCH and the builds
    # (they build nothing): 71 s of wall and 47 CPU-s alone on the 2-core box, most of it
    # waiting out their limits, which inside the main run lay on the suite's longest chain.
    pool = ThreadPoolExecutor(max_workers=1)
    hangs = pool.submit(_hang_run, cache, tmp / "hangs")
    pool.shutdown(wait=False)
    try:
        _wait_for_the_pch(cache)
        ahead = build_ahead(ADVERSARIAL / "problems", ADVERSARIAL / "cpu", cache)
    finally:
        _built_ahead(cache).touch()  # the other worker's end-to-end modules go on (pytest_runtest_setup)
    if ahead.returncode != 0:  # the run builds what is missing itself, as it would have anyway
        warnings.warn(f"building the adversarial set ahead failed: {(ahead.stdout + ahead.stderr)[-2000:]}")
    with escape_watch():
        markers_before, pwned_before = marker_pids(), pwned_files()
        started = time.monotonic()
        try:
            sets = [arg for d in sorted((ADVERSARIAL / "cpu").iterdir()) if d.is_dir() and d.name != HANG_SET
                    for arg in ("-s", d.name)]
            proc = run_cli("run", *ADVERSARIAL_RUN, *sets, "--out", str(out),
                           env=HANG_LIMITS, timeout=2400)  # 106 tasks: 5-6 min warm on a 2-core box at load 3
            exited = time.monotonic()
            seen.update(proc=proc, seconds=exited - started)
            results = out / "results.json"
            seen["bytes_at_exit"] = results.read_bytes() if results.is_file() else None
            # The second run of the build 22_cache_poisoning attacked goes beside the waits
            # below (both are on the suite's longest chain), where a test reads it.
            if any(VICTIM_RERUN_READER in item.nodeid for item in request.session.items):
                pool = ThreadPoolExecutor(max_workers=1)
                seen["victim_rerun"] = pool.submit(_victim_rerun, cache, tmp)
                pool.shutdown(wait=False)
            time.sleep(max(0.0, exited + 3 - time.monotonic()))
            seen["alive_after_3s"] = {pid: _cmdline(pid) for pid in marker_pids() - markers_before}
            time.sleep(max(0.0, exited + 5 - time.monotonic()))
            seen["bytes_after_5s"] = results.read_bytes() if results.is_file() else None
            seen["pwned"] = sorted(str(p) for p in pwned_files() - pwned_before)
        finally:
            kill_pids(marker_pids() - markers_before)
            for path in pwned_files() - pwned_before:
                path.unlink(missing_ok=True)
    seen["hang_proc"], hang_data = hangs.result(timeout=2400)
    seen["data"] = json.loads(seen["bytes_at_exit"]) if seen["bytes_at_exit"] else None
    if seen["data"] is not None:  # every fixture's result in one list, as one run of the whole set gave
        seen["data"]["results"] += hang_data["results"] if hang_data else []
    seen["hangs_finished"] = bool(hang_data and hang_data["run"]["finished"])
    return seen


HANG_SET = "24_hang"


def _cli_from_a_thread(cache: Path, *args: str, env: dict | None = None,
                       timeout: float = 900) -> subprocess.CompletedProcess:
    """`python cli.py ARGS` on `cache`, for runs made from a thread beside a session
    fixture's own work: not through run_cli, whose progress lines switch pytest's capture
    off and on."""
    return subprocess.run([sys.executable, str(ROOT / "cli.py"), *args], cwd=ROOT,
                          env={**os.environ, "KBENCH_CACHE": str(cache), "PYTHONUNBUFFERED": "1", **(env or {})},
                          capture_output=True, text=True, timeout=timeout)


def _hang_run(cache: Path, out: Path) -> tuple[subprocess.CompletedProcess, dict | None]:
    """The adversarial set's hang fixtures judged alone, with the set's options and limits;
    (the process, its results.json or None)."""
    proc = _cli_from_a_thread(cache, "run", *ADVERSARIAL_RUN, "-s", HANG_SET, "--out", str(out),
                              env=HANG_LIMITS, timeout=1200)
    results = out / "results.json"
    return proc, (json.loads(results.read_text()) if results.is_file() else None)


# The build the cache-poisoning fixture (22_cache_poisoning) attacks; a second run on the
# same cache must find it working (test_escapes).
POISON_VICTIM = "00_legit/level1/2_Affine/verbose_zeros_like.py"
VICTIM_RERUN_READER = "test_poisoned_cache_leaves_the_victim_working"


def _victim_rerun(cache: Path, tmp: Path) -> tuple[subprocess.CompletedProcess, Path]:
    """The poisoning's victim alone, judged again on the adversarial run's cache: the
    run and its folder. Run from a thread beside the session fixture's waits."""
    solutions = tmp / "victim_only"
    dest = solutions / "escapes" / "level1" / "2_Affine" / Path(POISON_VICTIM).name
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_bytes((ADVERSARIAL / "cpu" / POISON_VICTIM).read_bytes())
    out = tmp / "second"
    proc = _cli_from_a_thread(cache, "run", "--problems", str(ADVERSARIAL / "problems"), "--solutions", str(solutions),
                              "--out", str(out), "--device", "cpu", "--no-timing", "--timeout", "120", "-p", "2_Affine")
    return proc, out


def _cmdline(pid: int) -> str:
    try:
        return open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\0", b" ").decode(errors="replace")[:200]
    except OSError:
        return "(gone)"
