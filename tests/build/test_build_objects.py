"""Objects reused across builds (harness/build/objects.py, shim.py).

What a user relies on: a build whose host file another build already compiled gets the
very object that compile made, or compiles as before; nothing a build process writes
ever enters the store; an object is published only when it cannot depend on anything
but the source text, the exact flags and headers no solution can write.

gcc compiles tiny sources here (well under a second each); torch's own host file is
measured in bench/build_cpu.py (--mode objects).
"""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT
from harness.build import objects, shim
from harness.build import stage as build
from harness.records import Task

HAS_CXX = shutil.which("c++") is not None
pytestmark = pytest.mark.skipif(not HAS_CXX, reason="needs a C++ compiler as c++")


def torch_include() -> str:
    return objects._torch_includes()[0]


def torch_args(source: Path, *extra: str) -> list[str]:
    """torch's compile rule for a load_inline host file (build.ninja's `compile`)."""
    return ["-MMD", "-MF", "main.o.d", "-DTORCH_EXTENSION_NAME=kb_ext", "-DTORCH_API_INCLUDE_EXTENSION_H",
            "-isystem", torch_include(), "-fPIC", "-std=c++17", *extra, "-c", str(source), "-o", "main.o"]


def build_folder(tmp_path: Path, name: str, text: str) -> Path:
    folder = tmp_path / "builds" / name / "ext" / "kb_ext"
    folder.mkdir(parents=True)
    (folder / "main.cpp").write_text(text)
    return folder


def compile_in(folder: Path, store: Path, args: list[str], extra_env: dict | None = None) -> subprocess.CompletedProcess:
    """`c++ ARGS` as torch's ninja runs it in a build process kbench set up."""
    env = {**os.environ, **(extra_env or {})}
    env.update(objects.build_env(store, folder.parent.parent / "tmp", env))
    assert env["PATH"].startswith(str(store / "bin" / "cxx"))
    return subprocess.run(["c++", *args], cwd=folder, env=env, capture_output=True, text=True)


def want_of(folder: Path) -> dict:
    wants = objects.read_wants(folder.parent.parent / "tmp", folder.parent.parent)
    assert len(wants) == 1
    return wants[0]


SOURCE = "#include <cstdio>\nint kb_answer(int x) { std::printf(\"%d\\n\", x); return x + 7; }\n"


def test_only_torchs_compile_form_is_looked_up():
    args = torch_args(Path("/b/main.cpp"))
    c = shim.parse(args)
    assert (c.source, c.output, c.depfile) == ("/b/main.cpp", "main.o", "main.o.d")
    assert "@SRC@/main.cpp" in c.normalized() and "/b/main.cpp" not in c.normalized()
    for other in (["main.o", "cuda.o", "-shared", "-o", "x.so"],  # the link
                  ["-v"], ["--version"],
                  args + ["extra.cpp"],  # a second input
                  [a if a != "-MMD" else "-MD" for a in args],
                  ["@flags.rsp"] + args,
                  torch_args(Path("/b/my dir/main.cpp")),  # gcc would escape it in the depfile
                  torch_args(Path("/b/kernel.cu"))):
        assert shim.parse(other) is None, other


def test_a_shared_host_file_is_compiled_once_by_kbench_and_copied_after(tmp_path):
    store = tmp_path / "objects"
    a, b = build_folder(tmp_path, "a", SOURCE), build_folder(tmp_path, "b", SOURCE)
    done = compile_in(a, store, torch_args(a / "main.cpp"))
    assert done.returncode == 0, done.stderr
    want = want_of(a)
    assert want["source"] == str(a / "main.cpp")
    assert not (store / want["key"]).exists()  # a miss leaves a note, never an entry
    assert objects.publish(store, want).startswith("published")
    manifest = json.loads((store / want["key"] / "manifest.json").read_text())
    assert manifest["headers"] and all(h.startswith("/") and d for h, d in manifest["headers"])

    done = compile_in(b, store, torch_args(b / "main.cpp"))
    assert done.returncode == 0 and "reused from" in done.stderr, done.stderr
    assert (b / "main.o").read_bytes() == (a / "main.o").read_bytes()  # the object b's own compile makes
    assert (b / "main.o.d").read_text() == (a / "main.o.d").read_text().replace(str(a), str(b))
    assert not (b.parent.parent / "tmp" / objects.WANTS).exists()  # a hit leaves no note


def test_any_difference_in_source_flags_or_gcc_environment_is_another_key(tmp_path):
    store = tmp_path / "objects"
    a = build_folder(tmp_path, "a", SOURCE)
    assert compile_in(a, store, torch_args(a / "main.cpp")).returncode == 0
    assert objects.publish(store, want_of(a)).startswith("published")
    for name, text, args, env in (("src", SOURCE + "// another sample\n", [], {}), ("flags", SOURCE, ["-O2"], {}),
                                  ("cpath", SOURCE, [], {"CPATH": str(tmp_path)})):
        b = build_folder(tmp_path, name, text)
        done = compile_in(b, store, torch_args(b / "main.cpp", *args), env)
        assert done.returncode == 0 and "reused" not in done.stderr, name
        assert want_of(b)["key"] != want_of(a)["key"]


def test_a_changed_header_or_object_is_compiled_again(tmp_path):
    """The entry records each header's hash: a header changed since (here one in a kbench
    PCH folder on CPATH) or an object that is not the recorded one is a miss."""
    pch_root = tmp_path / "pch"
    (pch_root / "k").mkdir(parents=True)
    header = pch_root / "k" / "kb_tiny.h"
    header.write_text("inline int kb_tiny() { return 7; }\n")
    env = {"CPATH": str(pch_root / "k")}
    text = "#include <kb_tiny.h>\nint f() { return kb_tiny(); }\n"
    store = tmp_path / "objects"
    a = build_folder(tmp_path, "a", text)
    assert compile_in(a, store, torch_args(a / "main.cpp"), env).returncode == 0
    want = want_of(a)
    assert objects.publish(store, want) .startswith("unusable")  # CPATH outside kbench's PCH folders
    shutil.rmtree(store / "unusable")
    assert objects.publish(store, want, pch_root).startswith("published")
    b = build_folder(tmp_path, "b", text)
    assert "reused" in compile_in(b, store, torch_args(b / "main.cpp"), env).stderr

    header.write_text("inline int kb_tiny() { return 8; }\n")
    c = build_folder(tmp_path, "c", text)
    done = compile_in(c, store, torch_args(c / "main.cpp"), env)
    assert done.returncode == 0 and "reused" not in done.stderr
    header.write_text("inline int kb_tiny() { return 7; }\n")
    (store / want["key"] / "object.o").write_bytes(b"planted")
    d = build_folder(tmp_path, "d", text)
    done = compile_in(d, store, torch_args(d / "main.cpp"), env)
    assert done.returncode == 0 and "reused" not in done.stderr and (d / "main.o").read_bytes() != b"planted"


@pytest.mark.parametrize("text, extra, why", [
    ('#include "@BUILD@/local.h"\nint f() { return LOCAL; }\n', [], "reads "),  # a header a build can write
    ('#include "local.h"\nint f() { return LOCAL; }\n', [], "the compile failed"),  # not beside kbench's copy
    ('const char* where() { return __FILE__; }\n', [], "names the folder"),  # the build's own path
    (SOURCE, ["-fplugin=/tmp/x.so"], "flags or environment"),
    (SOURCE, ["-B/tmp/evil"], "flags or environment"),
    (SOURCE, ["-isystem", "/tmp"], "flags or environment"),
    ("int f( {\n", [], "the compile failed"),
])
def test_what_could_differ_between_builds_or_run_code_is_never_published(tmp_path, text, extra, why):
    store = tmp_path / "objects"
    a = build_folder(tmp_path, "a", text.replace("@BUILD@", str(tmp_path / "builds" / "a" / "ext" / "kb_ext")))
    (a / "local.h").write_text("#define LOCAL 3\n")
    compile_in(a, store, torch_args(a / "main.cpp", *extra))
    want = want_of(a)
    said = objects.publish(store, want)
    assert said.startswith("unusable") and why in said, said
    assert not (store / want["key"]).exists() and not objects.worth_publishing(store, want["key"])


def test_notes_are_taken_only_when_well_formed_and_about_the_builds_own_source(tmp_path):
    ext = tmp_path / "builds" / "k"
    source = ext / "ext" / "x" / "main.cpp"
    source.parent.mkdir(parents=True)
    source.write_text(SOURCE)
    (tmp_path / "secret.cpp").write_text(SOURCE)
    (ext / "ext" / "x" / "link.cpp").symlink_to(tmp_path / "secret.cpp")
    notes = ext / "tmp" / objects.WANTS
    notes.mkdir(parents=True)
    good = {"key": "a" * 32, "args": torch_args(source), "source": str(source), "cwd": str(source.parent), "env": {}}
    for i, note in enumerate([good, {**good, "key": "../../x"}, {**good, "source": str(tmp_path / "secret.cpp")},
                              {**good, "source": str(ext / "ext" / "x" / "link.cpp")}, {**good, "args": "-O3"},
                              {**good, "env": {"CPATH": 3}}]):
        (notes / f"{i}.json").write_text(json.dumps(note))
    (notes / "9.json").write_text("{not json")
    assert objects.read_wants(ext / "tmp", ext) == [good]


def test_a_key_is_published_at_its_second_miss_and_then_never_again(tmp_path, monkeypatch):
    """In build_all: the first miss of a host file costs nothing more; the second
    schedules kbench's compile ahead of the builds still waiting, once."""
    order = []
    want = {"key": "b" * 32, "args": [], "source": "", "cwd": "", "env": {}}
    tasks = []
    for i in range(4):
        f = tmp_path / f"s{i}.py"
        f.write_text(f"# {i}\nfrom torch.utils.cpp_extension import load_inline\n")
        tasks.append(Task("p", "p", "s", str(f)))

    def fake_build_one(task, key, cfg, max_jobs=1, nice=10):
        order.append(f"build {Path(task.solution_path).stem}")
        return build.BuildResult(True, None, "", 0.0, False, ""), "", [{"object": want}]

    def fake_publish(store, w, cfg):
        order.append("publish")
        (store / w["key"]).mkdir(parents=True)

    monkeypatch.setattr(build, "_build_one", fake_build_one)
    monkeypatch.setattr(build, "publish_object", fake_publish)
    monkeypatch.setattr(build, "compile_slots", lambda: 1)
    monkeypatch.delenv("KBENCH_OBJECTS", raising=False)
    cfg = build.BuildConfig("cpu", "", tmp_path / "cache" / "builds", 1, 60.0)
    build.build_all(tasks, cfg)
    assert order == ["build s0", "build s1", "publish", "build s2", "build s3"]
    store = build.objects_folder(cfg)
    assert not store.resolve().is_relative_to(cfg.cache_dir.resolve())  # no build or candidate may write it
    monkeypatch.setenv("KBENCH_OBJECTS", "0")
    assert build.objects_folder(cfg) is None


def test_no_stand_in_where_cxx_is_a_command_line_or_no_compiler_is_found(tmp_path):
    env = objects.build_env(tmp_path / "objects", tmp_path, {**os.environ, "CXX": "ccache g++"})
    assert "KBENCH_REAL_CXX" not in env and str(tmp_path / "objects" / "bin" / "cxx") not in env.get("PATH", "")
    assert "CXX" not in env
    assert objects.build_env(tmp_path / "objects", tmp_path, {**os.environ, "PATH": str(tmp_path)}) == {}


def test_where_cxx_names_the_compiler_the_stand_in_takes_its_place(tmp_path):
    """conda and many images set CXX (CXX=/opt/gcc/bin/g++ on the device machines), and torch
    then runs CXX, not `c++`: the stand-in must be what CXX names, or no build reaches the
    store. A C++ build there leaves its note, and after kbench publishes the object the next
    build with the same file copies it; kbench's publisher compiles with CXX's compiler too."""
    real = shutil.which("c++")
    store, extra = tmp_path / "objects", {"CXX": real}
    env = objects.build_env(store, tmp_path, {**os.environ, **extra})
    assert env["KBENCH_REAL_CXX"] == real and env["CXX"] == str(store / "bin" / "cxx" / "c++")
    a, b = build_folder(tmp_path, "a", SOURCE), build_folder(tmp_path, "b", SOURCE)
    for folder in (a, b):
        env = {**os.environ, **extra}
        env.update(objects.build_env(store, folder.parent.parent / "tmp", env))
        done = subprocess.run([env["CXX"], *torch_args(folder / "main.cpp")], cwd=folder, env=env,
                              capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        if folder == a:
            assert objects.publish(store, want_of(a)).startswith("published")
    assert "reused from" in done.stderr, done.stderr
    assert (b / "main.o").read_bytes() == (a / "main.o").read_bytes()


def test_where_cc_names_nvccs_host_compiler_the_gcc_stand_in_takes_its_place(tmp_path):
    """torch passes CC to nvcc as -ccbin (CC=/opt/gcc/bin/gcc on the device machines): the
    stand-in that finds nvcc's host compile a precompiled prefix must be what CC names."""
    real = shutil.which("gcc")
    store = tmp_path / "objects"
    env = objects.build_env(store, tmp_path, {**os.environ, "CC": real})
    assert env["KBENCH_REAL_GCC"] == real and env["CC"] == str(objects.stand_in(store, "gcc"))
    done = subprocess.run([env["CC"], "--version"], env={**os.environ, **env}, capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout == subprocess.run([real, "--version"], capture_output=True,
                                                                   text=True).stdout
    assert "CC" not in objects.build_env(store, tmp_path, {k: v for k, v in os.environ.items() if k != "CC"})


def test_an_outer_stand_in_is_never_stood_for(tmp_path):
    store = tmp_path / "objects"
    first = objects.build_env(store, tmp_path, {**os.environ, "CXX": shutil.which("c++")})
    again = objects.build_env(store, tmp_path, {**os.environ, "CXX": first["CXX"]})
    assert "KBENCH_REAL_CXX" not in again


# ---- end to end with torch's real header, in the build sandbox (slow) ----------------

slow = pytest.mark.skipif(os.environ.get("KBENCH_SLOW_TESTS") != "1",
                          reason="compiles torch's headers for minutes: set KBENCH_SLOW_TESTS=1")
CPP_OK = ROOT / "tests" / "fixtures" / "cpu" / "solutions" / "basic" / "level1" / "1_AddReLU" / "cpp_ok.py"


@slow
def test_samples_sharing_a_host_file_build_it_once_more_then_reuse_kbenchs_object(tmp_path, monkeypatch):
    """Three samples whose load_inline host file is the same (no TORCH_CHECK: its __FILE__
    would name each build's folder): the first two compile it, kbench then compiles and
    publishes it, the third copies that object, and the build loads and computes."""
    text = CPP_OK.read_text().replace('    TORCH_CHECK(x.is_contiguous() && y.is_contiguous(), "inputs must be contiguous");\n', "")
    tasks = []
    for i in range(3):
        f = tmp_path / "solutions" / f"s{i}.py"
        f.parent.mkdir(exist_ok=True)
        f.write_text(f"# sample {i}\n" + text)
        tasks.append(Task("p", "p", "s", str(f)))
    monkeypatch.delenv("KBENCH_OBJECTS", raising=False)
    cfg = build.BuildConfig("cpu", "", tmp_path / "cache" / "builds", 1, 600.0, precompiled_headers=False)
    results = build.build_all(tasks, cfg)
    assert all(r.ok for r in results.values()), [r.message for r in results.values()]
    store = build.objects_folder(cfg)
    entries = [p for p in store.iterdir() if (p / "manifest.json").is_file()]
    assert len(entries) == 1, (list(store.iterdir()), [p.read_text() for p in (store / "logs").glob("*.log")])
    objs = [next(Path(results[t.key].ext_dir).rglob("main.o")).read_bytes() for t in tasks]
    assert objs[0] == objs[1] == objs[2] == (entries[0] / "object.o").read_bytes()
    third = Path(results[tasks[2].key].ext_dir).parent
    assert not list((third / "tmp" / objects.WANTS).glob("*.json"))  # the third compiled nothing
    # As the candidate loads it: torch's loader finds the build up to date and it computes.
    probe = ("import sys, torch; sys.path.insert(0, %r); from harness.build import load;"
             "m = load.import_file(%r, 'kb'); x = torch.randn(64); y = torch.randn(64);"
             "print(bool(torch.equal(m.ModelNew()(x, y), torch.relu(x + y - 1))))") % (str(ROOT), tasks[2].solution_path)
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          env={**os.environ, "TORCH_EXTENSIONS_DIR": results[tasks[2].key].ext_dir})
    assert done.stdout.strip() == "True", done.stderr[-2000:]
    assert build.intact(results[tasks[2].key].ext_dir)  # nothing rebuilt at load


def test_build_threads_starting_together_leave_stand_ins_that_run(tmp_path):
    """A run's build threads start together and each makes the stand-ins if missing. With a
    temporary name shared by the threads of one process, one thread renamed another's file,
    unfinished and not yet executable, over `c++`: every C++ compile of the run (13 of a
    20-task set on 2 x H200) failed with "/bin/sh: 1: .../bin/cxx/c++: Permission denied"."""
    import threading

    extra = {"CXX": shutil.which("c++"), "CC": shutil.which("gcc")}
    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads interleave between statements, as on a host with a core for each
    try:
        _make_together(tmp_path, extra)
    finally:
        sys.setswitchinterval(switch)


def _make_together(tmp_path, extra):
    import threading

    for round_ in range(20):
        store = tmp_path / f"objects{round_}"
        start = threading.Barrier(24)

        def make():
            start.wait()
            objects.build_env(store, tmp_path, {**os.environ, **extra})

        threads = [threading.Thread(target=make) for _ in range(24)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for role in ("c++", "gcc"):
            path = objects.stand_in(store, role)
            done = subprocess.run([str(path), "--version"], env={**os.environ, **objects.build_env(
                store, tmp_path, {**os.environ, **extra})}, capture_output=True, text=True)
            assert done.returncode == 0, (round_, role, oct(path.stat().st_mode), done.stderr)
        assert not [p.name for p in store.rglob(".*.tmp")], "a writer's temporary file was left behind"


def test_a_stand_in_without_its_mode_is_made_again(tmp_path):
    """A stand-in with the right text but no execute bit (an older kbench's race left one) is
    written again, not trusted for its text: otherwise it fails every later compile."""
    store = tmp_path / "objects"
    extra = {"CXX": shutil.which("c++")}
    objects.build_env(store, tmp_path, {**os.environ, **extra})
    path = objects.stand_in(store, "c++")
    path.chmod(0o644)
    env = objects.build_env(store, tmp_path, {**os.environ, **extra})
    assert os.access(path, os.X_OK)
    done = subprocess.run([env["CXX"], "--version"], env={**os.environ, **env}, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
