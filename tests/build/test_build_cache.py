"""A build that finished is cached whatever the solution does after it, and so is a
compiler's error: a rerun compiles nothing it compiled before.

The solutions here build a tiny C++ library with torch's `load` (no torch headers:
a compile takes well under a second) into their build folder, then exit, raise or
hang at import, or fail to compile; each is built twice on one cache, and the
second build must come from the cache without starting a build process."""
import textwrap
from pathlib import Path

import pytest

from harness.build import stage as build
from harness.records import Status, Task

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "cpu"

TEMPLATE = '''
import os
from torch.utils.cpp_extension import load

folder = os.environ["TORCH_EXTENSIONS_DIR"]  # the same path in every process: the build is found up to date
os.makedirs(folder, exist_ok=True)
path = os.path.join(folder, "kernel.cpp")
if not os.path.exists(path):  # rewritten, it would be newer than its object, and ninja would compile it again
    with open(path, "w") as f:
        f.write({source!r})
{before}load(name="kbench_test_{name}", sources=[path], is_python_module=False)
{after}
'''
GOOD = 'extern "C" int answer() { return 42; }\n'
BAD = 'extern "C" int answer() { return undeclared_name; }\n'


def _solution(tmp_path: Path, name: str, source: str, after: str, before: str = "") -> Task:
    path = tmp_path / "solutions" / f"{name}.py"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(TEMPLATE.format(source=source, name=name, before=before, after=textwrap.dedent(after)))
    return Task("level1/1_AddReLU", "unused", "s", str(path))


def _twice(task: Task, tmp_path: Path, monkeypatch) -> tuple:
    cfg = build.BuildConfig("cpu", "", tmp_path / "cache" / "builds", jobs=1, timeout=120)
    first = build.build_all([task], cfg)[task.key]

    def no_build_process(*args, **kwargs):
        raise AssertionError("the second build started a build process")

    monkeypatch.setattr(build, "Child", no_build_process)
    second = build.build_all([task], cfg)[task.key]
    return first, second


def test_the_task_of_a_solution_that_exits_after_its_build_is_judged_at_its_import(tmp_path):
    """Its build is kept; the judge's candidate imports it, finds the library built,
    and dies as the solution says: crashed, exit code 3, and the next run builds nothing."""
    from harness import Session

    problem = (FIXTURES / "problems" / "level1" / "1_AddReLU.py").read_text()
    solution = _solution(tmp_path, "exits_e2e", GOOD, "os._exit(3)")
    with Session("inline", device="cpu", cache_dir=tmp_path / "cache", log_dir=tmp_path / "logs", time=False,
                 trials=1) as session:
        first = session.evaluate(problem, Path(solution.solution_path).read_text())
        second = session.evaluate(problem, Path(solution.solution_path).read_text())
    for result in (first, second):
        assert result.status == Status.CRASHED and "exited with code 3" in result.message, result
        assert result.phase != "build", result
    assert "[kbench: build cached in" not in Path(first.log_path).read_text()
    assert "[kbench: build cached in" in Path(second.log_path).read_text()


@pytest.mark.parametrize("name, after", [
    ("exits", "os._exit(3)"),
    ("raises", "raise RuntimeError('after the build')"),
    ("sys_exits", "import sys; sys.exit(4)"),
])
def test_a_build_is_cached_whatever_the_import_does_after_it(tmp_path, monkeypatch, name, after):
    first, second = _twice(_solution(tmp_path, name, GOOD, after), tmp_path, monkeypatch)
    assert second.cached and not first.cached
    assert (second.ok, second.status, second.message) == (first.ok, first.status, first.message)
    if name == "exits":
        # The build finished: the task's import (in the candidate, under the judge) says what exiting means.
        assert first.ok, first.message


def test_an_import_that_hangs_after_its_build_ends_the_build_process_and_keeps_the_build(tmp_path, monkeypatch):
    monkeypatch.setattr(build, "AFTER_BUILD_S", 1.0)
    task = _solution(tmp_path, "hangs", GOOD, "import time; time.sleep(3600)")
    cfg = build.BuildConfig("cpu", "", tmp_path / "cache" / "builds", jobs=1, timeout=120)
    first = build.build_all([task], cfg)[task.key]
    assert first.ok and first.seconds < 60, (first, "the build process was not ended after its build")
    monkeypatch.setattr(build, "Child", lambda *a, **k: pytest.fail("the second build started a build process"))
    second = build.build_all([task], cfg)[task.key]
    assert second.ok and second.cached


def test_a_compiler_error_is_cached_with_its_message(tmp_path, monkeypatch):
    first, second = _twice(_solution(tmp_path, "bad", BAD, ""), tmp_path, monkeypatch)
    assert first.status == Status.BUILD_ERROR and "undeclared_name" in first.message, first.message
    assert second.cached and (second.status, second.message) == (first.status, first.message)


def test_a_compiler_error_is_cached_when_the_solution_exits_after_it(tmp_path, monkeypatch):
    task = _solution(tmp_path, "bad_then_exit", BAD, "", before="try:\n    ")
    text = Path(task.solution_path).read_text().replace(
        'is_python_module=False)\n', 'is_python_module=False)\nexcept Exception:\n    os._exit(1)\n')
    Path(task.solution_path).write_text(text)
    first, second = _twice(task, tmp_path, monkeypatch)
    assert first.status == Status.BUILD_ERROR and "undeclared_name" in first.message, first.message
    assert second.cached and (second.status, second.message) == (first.status, first.message)


def test_a_compiler_killed_by_the_host_is_not_cached(tmp_path):
    """An out-of-memory kill or a full disk says nothing about the source: build it again next time."""
    assert build._after_build([{"compile": "start"}, {"compile": "failed", "text": "c++: fatal error: Killed signal "
                                                      "terminated program cc1plus"}], None)["cache"] is False
    assert build._after_build([{"compile": "start"}, {"compile": "failed", "text": "a.cpp:1:1: error: x"}],
                              None)["cache"] is True
    assert build._after_build([{"compile": "start"}], None) is None  # died while compiling: nothing to keep
    assert build._after_build([], None) is None


def test_the_build_key_names_the_compilers(monkeypatch):
    """A cached build or compiler error is reused only with the compilers that made it."""
    build.toolchain_versions.cache_clear()
    try:
        here = build.toolchain_versions("cpu")
        assert "c++ " in here and "torch " in here
        monkeypatch.setenv("CXX", "/nonexistent/c++")
        build.toolchain_versions.cache_clear()
        assert build.toolchain_versions("cpu") != here
    finally:
        build.toolchain_versions.cache_clear()


def test_builds_start_longest_first():
    sources = {"torch": b"import torch", "cpp": b"from torch.utils.cpp_extension import load_inline\nload_inline(cpp_sources=s)",
               "cuda": b"from torch.utils.cpp_extension import load_inline\nload_inline(cpp_sources=s, cuda_sources=c)",
               "two_cpp": b"cpp_extension\nload_inline(cpp_sources=a)\nload_inline(cpp_sources=b)"}
    order = sorted(sources, key=lambda k: -build.build_cost(sources[k]))
    assert order == ["cuda", "two_cpp", "cpp", "torch"]


def test_two_runs_on_one_cache_build_a_key_once(tmp_path, monkeypatch):
    """Two kbench processes (here two threads, each its own open of the key's lock) that
    build the same solution into one cache: the second waits for the first and finds the
    build cached, rather than removing the folder the first's build process is confined
    to (which then failed with "Permission denied" on torch's lock in its own folder)."""
    import threading
    import time

    from harness.records import BuildResult

    cfg = build.BuildConfig("cpu", "", tmp_path / "builds", jobs=1, timeout=120)
    solution = tmp_path / "s.py"
    solution.write_text("from torch.utils.cpp_extension import load_inline\n")
    task = Task("level1/x", "s", "p.py", str(solution))
    built, inside = set(), []

    def fake_build(task, key, cfg, max_jobs=1, nice=10):
        inside.append(1)
        assert len(inside) == 1, "two builds of one key at once"
        time.sleep(0.3)
        built.add(key)
        inside.pop()
        return BuildResult(True, None, "", 0.3, False, str(cfg.cache_dir / key / "ext")), "built\n", []

    def fake_cached(task, key, cfg, source):
        return (BuildResult(True, None, "", 0.0, True, str(cfg.cache_dir / key / "ext")), "cached\n") if key in built else None

    monkeypatch.setattr(build, "_build_one", fake_build)
    monkeypatch.setattr(build, "_without_compiling", fake_cached)
    monkeypatch.setattr(build, "toolchain_versions", lambda device="cuda", store=None: "v")
    results = []
    threads = [threading.Thread(target=lambda: results.append(build.build_all([task], cfg))) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert len(results) == 2 and len(built) == 1
    assert sorted(r[task.key].cached for r in results) == [False, True]


def test_where_cxx_and_cc_are_set_the_candidates_load_finds_its_build_up_to_date(tmp_path, monkeypatch):
    """conda and many images set CXX and CC (CXX=/opt/gcc/bin/g++ on the device machines). A
    build then runs kbench's stand-ins under those names, and torch writes them into the
    build's build.ninja; torch's loader in the candidate writes build.ninja again from its
    own environment and runs ninja. Had the candidate other compiler names, ninja compiled
    the whole extension again inside the task's import, the build's files no longer matched
    their record, and every later run built it again (a warm rerun on an H200 rebuilt every
    solution a task had loaded). The candidate loads with the names its build had."""
    import shutil

    from harness import Session

    cxx, cc = shutil.which("c++"), shutil.which("gcc")
    if not (cxx and cc):
        pytest.skip("needs c++ and gcc")
    monkeypatch.setenv("CXX", cxx)
    monkeypatch.setenv("CC", cc)
    monkeypatch.delenv("KBENCH_OBJECTS", raising=False)
    after = '''
    import torch

    class ModelNew(torch.nn.Module):
        def forward(self, x, y):
            return torch.relu(x + y - 1.0)
    '''
    solution = Path(_solution(tmp_path, "cxx_set", GOOD, after).solution_path).read_text()
    problem = (FIXTURES / "problems" / "level1" / "1_AddReLU.py").read_text()
    with Session("inline", device="cpu", cache_dir=tmp_path / "cache", log_dir=tmp_path / "logs", time=False,
                 trials=1) as session:
        first = session.evaluate(problem, solution)
        second = session.evaluate(problem, solution)
    assert first.status == second.status == Status.OK, (first, second)
    first_log, second_log = Path(first.log_path).read_text(), Path(second.log_path).read_text()
    assert "[kbench: build cached in" not in first_log
    assert "[kbench: build cached in" in second_log, second_log[-3000:]
    builds = [p for p in (tmp_path / "cache" / "builds").iterdir() if (p / "ext").is_dir()]
    assert builds and all(build.intact(str(p / "ext")) for p in builds)


FALLBACK = '''
import os
import torch
from torch.utils.cpp_extension import load

folder = os.environ["TORCH_EXTENSIONS_DIR"]
os.makedirs(folder, exist_ok=True)
path = os.path.join(folder, "kernel.cpp")
with open(path, "w") as f:  # {per_process}
    f.write({source!r} + {suffix})
try:
    load(name="kbench_test_{name}", sources=[path], is_python_module=False)
    built = True
except RuntimeError as e:
    built = False
    print("the build raised:", str(e).splitlines()[0][:60])


class ModelNew(torch.nn.Module):
    def forward(self, x, y):
        return torch.relu(x + y - 1.0)
'''
REPLAYED = "failed to build in the build process; its error is raised again here without compiling"


@pytest.mark.parametrize("per_process", [False, True])
def test_a_build_that_failed_and_was_caught_fails_again_in_the_candidate_without_compiling(tmp_path, per_process):
    """A solution that catches its failed build and falls back to PyTorch: the build
    process compiled and failed; the candidate's same call raises torch's error again
    at once (its import compiled it a second time, minutes of nvcc on a GPU). A call
    that differs between the two processes (here its source file's bytes) is
    compiled again, as before."""
    from harness import Session

    problem = (FIXTURES / "problems" / "level1" / "1_AddReLU.py").read_text()
    name = "fallback_pid" if per_process else "fallback"
    suffix = '"// " + str(os.getpid()) + "\\n"' if per_process else '""'
    solution = FALLBACK.format(source=BAD, name=name, suffix=suffix, per_process=per_process)
    with Session("inline", device="cpu", cache_dir=tmp_path / "cache", log_dir=tmp_path / "logs", time=False,
                 trials=1) as session:
        result = session.evaluate(problem, solution)
    log = Path(result.log_path).read_text()
    assert result.status == Status.OK, (result, log[-2000:])
    assert "the build raised: Error building extension 'kbench_test_" in log, log[-2000:]
    assert (REPLAYED in log) is not per_process, log[-2000:]


def test_only_well_formed_failures_of_the_host_kind_are_kept_for_the_candidate():
    """What the build process tells is kept only as digests with texts, and not a
    compiler the host killed (built again in the candidate)."""
    good, other = "a" * 64, "b" * 64
    killed = "c++: fatal error: Killed signal terminated program cc1plus"
    events = [{"compile": "start"}, {"compile": "failed", "text": "a.cpp:1:1: error: x", "call": good},
              {"compile": "failed", "text": killed, "call": other},
              {"compile": "failed", "text": "x", "call": "../../etc"},
              {"compile": "failed", "text": 3, "call": good[1:] + "c"}, {"compile": "done"}]
    assert build._failed_calls(events) == {good: "a.cpp:1:1: error: x"}


def test_a_call_digest_names_every_argument_and_the_bytes_of_loaded_files(tmp_path):
    import inspect

    from harness.build import load as loader

    def load(name, sources, extra_cflags=None, verbose=False):  # the shape of torch's
        pass

    sig = inspect.signature(load)
    src = tmp_path / "k.cpp"
    src.write_text("int a;\n")
    first = loader.call_digest("load", sig, ("n", [str(src)]), {})
    assert first == loader.call_digest("load", sig, ("n",), {"sources": [src]})  # a Path is its text
    assert first != loader.call_digest("load", sig, ("n", [str(src)]), {"extra_cflags": ["-O3"]})
    src.write_text("int b;\n")
    assert first != loader.call_digest("load", sig, ("n", [str(src)]), {})
    assert loader.call_digest("load", sig, ("n", [str(tmp_path / "missing.cpp")]), {}) is None
    assert loader.call_digest("load", sig, ("n", [object()]), {}) is None


def _evaluate(tmp_path: Path, solution: str, executor: str = "inline"):
    """One CPU evaluation of `solution` against 1_AddReLU, untimed, on tmp_path's cache."""
    from harness import Session

    problem = (FIXTURES / "problems" / "level1" / "1_AddReLU.py").read_text()
    with Session(executor, device="cpu", cache_dir=tmp_path / "cache", log_dir=tmp_path / "logs", time=False,
                 trials=1) as session:
        return session.evaluate(problem, solution)


def _ninja_compiles(cache: Path) -> list[list[str]]:
    """The object compiles in the one build's .ninja_log (ninja appends a line for each)."""
    logs = list((cache / "builds").glob("*/ext/*/.ninja_log"))
    assert len(logs) == 1, logs
    entries = [line.split("\t") for line in logs[0].read_text().splitlines() if not line.startswith("#")]
    return [e for e in entries if len(e) == 5 and e[3].endswith(".o")]


SCRATCH_SOURCE = '''
import os
import tempfile

import torch
from torch.utils.cpp_extension import load

folder = {folder}
path = os.path.join(folder, "kernel.cpp")
with open(path, "w") as f:  # written again by every process that imports the solution, as models do
    f.write({source!r})
with open(os.path.join(folder, "kernel.h"), "w") as f:
    f.write("#define KBENCH_ANSWER 42\\n")
load(name="kbench_test_scratch", sources=[path], extra_include_paths=[folder], is_python_module=False)


class ModelNew(torch.nn.Module):
    def forward(self, x, y):
        return torch.relu(x + y - 1.0)
'''
SCRATCH_GOOD = '#include "kernel.h"\nextern "C" int answer() { return KBENCH_ANSWER; }\n'


@pytest.mark.parametrize("folder", ["tempfile.mkdtemp()", "'.'"], ids=["mkdtemp", "cwd"])
def test_a_source_written_to_scratch_at_import_is_built_once(tmp_path, monkeypatch, folder):
    """Models write a generated source to tempfile.mkdtemp() or "./kernel.cu" and load()
    it. Each process that imports the solution names another path (its own scratch), so
    torch wrote another build.ninja in the candidate and ninja compiled the extension again
    inside the judged import (23 s of a 2-core host for one C++ file); "./" was not writable
    in the build process at all (load_error). The sources, their headers and the include
    folder are built from a copy named by their contents: the candidate finds the build
    up to date, and the build's files are still those recorded (build.intact)."""
    monkeypatch.delenv("KBENCH_OBJECTS", raising=False)
    result = _evaluate(tmp_path, SCRATCH_SOURCE.format(folder=folder, source=SCRATCH_GOOD))
    assert result.status == Status.OK, result
    log = Path(result.log_path).read_text()
    assert log.count("a copy named by their contents") == 2, log[-3000:]  # the build process's and the candidate's
    builds = [p for p in (tmp_path / "cache" / "builds").iterdir() if (p / "ext").is_dir()]
    assert builds and all(build.intact(str(p / "ext")) for p in builds), log[-3000:]
    assert len(_ninja_compiles(tmp_path / "cache")) == 1, log[-3000:]  # compiled once: in the build process


def test_a_solution_that_writes_beside_itself_is_told_where_it_may_write(tmp_path):
    """The sandbox keeps a solution's folder (and every other solution's) from its code; the
    message says where a generated file may go."""
    from harness.shared import sandbox

    if sandbox.landlock_abi() < 1:
        pytest.skip("no Landlock here: the solution's folder is writable")
    solution = SCRATCH_SOURCE.format(folder="os.path.dirname(os.path.abspath(__file__))", source=SCRATCH_GOOD)
    result = _evaluate(tmp_path, solution, executor="local")
    assert result.status == Status.LOAD_ERROR, result
    assert "PermissionError" in result.message and "write generated files there" in result.message, result.message


INIT_BUILD = '''
import os

import torch
from torch.utils.cpp_extension import load

SOURCE = {source!r}


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = torch.nn.Parameter(torch.ones(1024))  # on the meta device in the build process
        path = os.path.join(os.environ["TORCH_EXTENSIONS_DIR"], "kernel.cpp")
        if not os.path.exists(path):
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as f:
                f.write(SOURCE)
        load(name="kbench_test_init", sources=[path], is_python_module=False)
{rest}

    def forward(self, x, y):
        return torch.relu(x + y - 1.0)
'''


@pytest.mark.parametrize("rest", ["", "        self.bias = torch.zeros(1024, device='cuda')"], ids=["plain", "named_gpu"])
def test_an_extension_built_in_the_constructor_is_built_in_the_build_process(tmp_path, monkeypatch, rest):
    """load_inline/load in ModelNew.__init__ (a common generated pattern) compiled inside the
    candidate's judged import (27.6 s for one C++ file on the 2-core CI host). The build
    process constructs the class once, its tensors on the meta device and no GPU visible:
    the extension is built there, and the candidate finds it up to date. A constructor that
    goes on to put a tensor on a named GPU after its build still has its build made there."""
    monkeypatch.delenv("KBENCH_OBJECTS", raising=False)
    result = _evaluate(tmp_path, INIT_BUILD.format(source=GOOD, rest=rest))
    log = Path(result.log_path).read_text()
    said = "for the extensions its constructor builds: " + ("constructed" if not rest else "stopped")
    assert said in log, log[-3000:]
    assert len(_ninja_compiles(tmp_path / "cache")) == 1, log[-3000:]  # in the build process only
    if not rest:
        assert result.status == Status.OK, result


def test_a_constructor_that_builds_nothing_does_not_hold_the_build(tmp_path, monkeypatch):
    """The build process waits on a constructor only while it builds: one that loops is
    left after KBENCH_CONSTRUCT_IDLE_S without a build, and judged in the candidate."""
    import time

    monkeypatch.setenv("KBENCH_CONSTRUCT_IDLE_S", "1")
    path = tmp_path / "solutions" / "loops.py"
    path.parent.mkdir(parents=True)
    path.write_text("import time\nimport torch\nfrom torch.utils.cpp_extension import load\n\n"
                    "class ModelNew(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n"
                    "        while True:  # a table computed before the build, forever\n            time.sleep(0.05)\n"
                    "        load(name='never', sources=['never.cpp'])\n")
    task = Task("level1/1_AddReLU", str(FIXTURES / "problems" / "level1" / "1_AddReLU.py"), "s", str(path))
    cfg = build.BuildConfig("cpu", "", tmp_path / "cache" / "builds", jobs=1, timeout=120)
    t0 = time.monotonic()
    result = build.build_all([task], cfg)[task.key]
    assert result.ok and time.monotonic() - t0 < 30, result
    log = next((tmp_path / "cache" / "records").glob("*.log")).read_text()
    assert "left running: no extension build for 1 s" in log, log
