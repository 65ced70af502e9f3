"""What builds share is written only by kbench's own processes (objects.py, host_pch.py), tried as
an attacker would.

A build process runs solution code. It cannot write the object store (<cache>/objects) itself
(test_doors.py), but it writes notes that kbench's own publishers read, and it may write /dev/shm,
which every sandbox may. The attacker here names a program of its own, or the real nvcc with a
shell command in a flag, in a note of a host compile; the poison that program writes would put
an object of the attacker's under the key of a victim's host file, which the victim's build then
copies and links. The victim is a tiny source compiled through the `c++` stand-in as torch's ninja
runs it, linked with a driver and run: 8 is its own answer, 667 the attacker's.
"""
import hashlib
import json
import os
import shlex
import shutil
import stat
import subprocess
import threading
from pathlib import Path

import pytest

from harness.build import host_pch, objects, shim
from harness.build import stage as build
from harness.shared import sandbox

from test_build_objects import build_folder, compile_in, torch_args, want_of

pytestmark = pytest.mark.skipif(shutil.which("c++") is None or shutil.which("gcc") is None,
                                reason="needs a C++ compiler as c++ and gcc")

VICTIM = "int kb_answer(int x) { return x + 7; }\n"
EVIL = "int kb_answer(int x) { return x + 666; }\n"
DRIVER = "#include <cstdio>\nint kb_answer(int);\nint main() { std::printf(\"%d\", kb_answer(1)); }\n"
NVCC = Path("/usr/local/cuda-13.0/bin/nvcc")


def shared_tmp(tmp_path: Path) -> Path:
    """A folder where any sandboxed build may write: /dev/shm where there is one."""
    root = Path("/dev/shm") if os.access("/dev/shm", os.W_OK) else tmp_path
    folder = root / f"kbench-test-door-{os.getpid()}-{tmp_path.name}"
    folder.mkdir()
    return folder


@pytest.fixture
def shm(tmp_path):
    folder = shared_tmp(tmp_path)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def published_victim(tmp_path: Path) -> tuple[Path, str]:
    """The store with the victim's host file published by kbench (two builds missed it)."""
    store = tmp_path / "cache" / "objects"
    a = build_folder(tmp_path, "a", VICTIM)
    assert compile_in(a, store, torch_args(a / "main.cpp")).returncode == 0
    want = want_of(a)
    assert objects.publish(store, want).startswith("published")
    return store, want["key"]


def poison_kit(shm: Path, tmp_path: Path, store: Path, key: str) -> Path:
    """A script that puts the attacker's object under the victim's key, with a manifest that
    vouches for it, and leaves a mark where it ran."""
    kit = shm / "kit"
    kit.mkdir()
    (kit / "main.cpp").write_text(EVIL)
    done = subprocess.run(["c++", "-fPIC", "-std=c++17", "-c", str(kit / "main.cpp"), "-o", str(kit / "object.o")],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    manifest = json.loads((store / key / "manifest.json").read_text())
    manifest.update(object=hashlib.sha256((kit / "object.o").read_bytes()).hexdigest(), headers=[])
    (kit / "manifest.json").write_text(json.dumps(manifest))
    script = kit / "poison"
    script.write_text(f"#!/bin/sh\ntouch {shm}/ran\ncp -f {kit}/object.o {kit}/manifest.json {store / key}/\n"
                      f"touch {store}/kbench-door-opened\nexit 1\n")
    script.chmod(0o755)
    return script


def victim_answer(tmp_path: Path, store: Path, name: str) -> tuple[str, str]:
    """A later build of the victim's host file, as torch's ninja compiles it, linked and run."""
    b = build_folder(tmp_path, name, VICTIM)
    done = compile_in(b, store, torch_args(b / "main.cpp"))
    assert done.returncode == 0, done.stderr
    (b / "driver.cpp").write_text(DRIVER)
    exe = b / "victim"
    linked = subprocess.run(["c++", str(b / "driver.cpp"), str(b / "main.o"), "-o", str(exe)], capture_output=True,
                            text=True)
    assert linked.returncode == 0, linked.stderr
    return subprocess.run([str(exe)], capture_output=True, text=True).stdout, done.stderr


def cfg_for(tmp_path: Path) -> build.BuildConfig:
    return build.BuildConfig("cpu", "", tmp_path / "cache" / "builds", 1, 120.0)


def test_the_victim_reuses_kbenchs_object_and_the_poison_would_reach_it(tmp_path, shm):
    """The control: kbench's object is what the victim links, and an entry rewritten as the
    attacker's programs would rewrite it (were they run where the store is writable) is linked
    by the next build. So the tests below fail if the door opens."""
    store, key = published_victim(tmp_path)
    answer, said = victim_answer(tmp_path, store, "b")
    assert answer == "8" and "reused from" in said
    subprocess.run([str(poison_kit(shm, tmp_path, store, key))])
    answer, said = victim_answer(tmp_path, store, "c")
    assert answer == "667" and "reused from" in said


def test_a_host_note_naming_a_program_of_the_builds_runs_nothing(tmp_path, shm, monkeypatch):
    """An `nvcc` (with nvcc.profile beside it, as an install has) in /dev/shm, named by a note in
    the attacker's build folder: kbench's prefix process runs only kbench's own nvcc."""
    store, key = published_victim(tmp_path)
    fake = shm / "bin" / "nvcc"
    fake.parent.mkdir()
    shutil.copy(poison_kit(shm, tmp_path, store, key), fake)
    (fake.parent / "nvcc.profile").write_text("")
    want = {"key": "a" * 32, "host_args": [], "nvcc": [str(fake), "-O3", "-c", "x.cu", "-o", "x.o"], "env": {}}
    if NVCC.is_file():
        monkeypatch.setenv("PYTORCH_NVCC", str(NVCC))  # kbench has an nvcc of its own, and runs that one
    build.make_host_pch(store, want, cfg_for(tmp_path))
    assert not (shm / "ran").exists() and not (store / "kbench-door-opened").exists()
    assert not (store / "nvcc-host" / "unusable" / want["key"]).exists()  # a key kbench did not derive is left alone
    assert victim_answer(tmp_path, store, "b")[0] == "8"


def _key_as_kbench_would_find_it(nvcc: str, flags: list[str], work: Path) -> str:
    """The attacker repeats host_pch's dry run (the same nvcc, flags and probe) to learn the key
    its note must carry for kbench to run the listed steps."""
    (work / "cuda.cu").write_text(host_pch.SOURCE)
    env = {k: v for k, v in os.environ.items() if k not in shim.GCC_ENV}
    env.update(LC_ALL="C", TMPDIR=str(work))
    dry = subprocess.run([nvcc, "--dryrun", "-keep", "--keep-dir", str(work), *flags, "-c", str(work / "cuda.cu"),
                          "-o", str(work / "cuda.o")], cwd=work, env=env, capture_output=True, text=True)
    line = next(ln[3:] for ln in reversed(dry.stderr.splitlines())
                if ln.startswith("#$ gcc ") and shim.HOST_SUFFIX in ln)
    return shim.host_key(shim.describe(shutil.which("gcc")), shim.parse_host(shlex.split(line)[1:])[1], env)


@pytest.mark.skipif(not (NVCC.is_file() and (NVCC.parent / "nvcc.profile").is_file()), reason="needs CUDA 13.0's nvcc")
def test_a_flag_kbench_would_pass_to_nvcc_runs_no_command(tmp_path, shm, monkeypatch):
    """The real nvcc, with an -isystem folder that resolves to torch's own but holds a command in
    backquotes: nvcc --dryrun prints it unescaped inside double quotes, and host_pch runs the
    listed steps through bash."""
    store, key = published_victim(tmp_path)
    poison = poison_kit(shm, tmp_path, store, key)
    include = objects._torch_includes()[0]
    command = f"sh {poison}"
    folder = f"{include}/`{command}`/" + "/".join([".."] * (command.count("/") + 1))
    assert os.path.realpath(folder) == os.path.realpath(include)
    work = shm / "work"
    work.mkdir()
    flags = ["-isystem", folder]
    want = {"key": _key_as_kbench_would_find_it(str(NVCC), flags, work), "host_args": [],
            "nvcc": [str(NVCC), *flags, "-c", "x.cu", "-o", "x.o"], "env": {}}
    monkeypatch.setenv("PYTORCH_NVCC", str(NVCC))  # kbench's own nvcc is that one
    build.make_host_pch(store, want, cfg_for(tmp_path))
    assert not (shm / "ran").exists() and not (store / "kbench-door-opened").exists()
    assert victim_answer(tmp_path, store, "b")[0] == "8"


def test_a_note_cannot_mark_a_key_it_was_not_made_from_unusable(tmp_path):
    """A forged note with the victim's key and flags off kbench's list is refused without marking
    that key, so the victim's own second miss still publishes it."""
    store = tmp_path / "cache" / "objects"
    a = build_folder(tmp_path, "a", VICTIM)
    assert compile_in(a, store, torch_args(a / "main.cpp")).returncode == 0
    want = want_of(a)
    forged = {**want, "args": torch_args(a / "main.cpp", "-B/tmp/evil")}
    assert not objects.publish(store, forged).startswith("unusable")
    assert not (store / "unusable" / want["key"]).exists()
    assert objects.publish(store, want).startswith("published")


def test_flags_and_folders_are_kbenchs_exactly_not_what_resolves_to_them(tmp_path):
    """A folder that only resolves to torch's or to a PCH folder (a link, `x/..`) may be another
    by the time gcc reads it: a build process's files, or a candidate's, can change under it."""
    include = objects._torch_includes()[0]
    args = torch_args(Path("/b/main.cpp"))
    assert objects._checked_args(args, [include]) == [include]
    for other in (f"{include}/x/..", f"{include}/"):
        assert objects._checked_args([other if a == include else a for a in args], [include]) is None
    root = tmp_path / "pch"
    (root / "k").mkdir(parents=True)
    (tmp_path / "elsewhere").mkdir()
    (root / "link").symlink_to(tmp_path / "elsewhere")
    assert objects._checked_env({"CPATH": str(root / "k")}, root) == {"CPATH": str(root / "k")}
    for other in (str(root / "k" / ".." / "k"), str(root / "link"), str(tmp_path / "elsewhere"), f"{root}/k/x"):
        assert objects._checked_env({"CPATH": other}, root) is None, other


@pytest.mark.parametrize("kind", ["fifo", "zero", "huge"])
def test_notes_and_outcomes_that_are_no_plain_small_file_are_ignored_not_read(tmp_path, kind):
    """A build process may leave a FIFO (a read would wait for ever), a link to /dev/zero or a
    huge sparse file where kbench reads its notes and its outcome."""
    ext = tmp_path / "builds" / "k"
    paths = [ext / "tmp" / objects.WANTS / "n.json", ext / "tmp" / objects.HOST_WANTS / "n.json",
             ext / "result.partial.json"]
    for path in paths:
        path.parent.mkdir(parents=True, exist_ok=True)
        if kind == "fifo":
            os.mkfifo(path)
        elif kind == "zero":
            path.symlink_to("/dev/zero")
        else:
            with open(path, "wb") as f:
                f.truncate(8 << 30)
    found: dict = {}
    reader = threading.Thread(target=lambda: found.update(
        objects=objects.read_wants(ext / "tmp", ext), host=host_pch.read_wants(ext / "tmp"),
        said=build._said(paths[2], "cpu")), daemon=True)
    reader.start()
    reader.join(10)
    assert found == {"objects": [], "host": [], "said": None}
    assert stat.S_ISFIFO(os.lstat(paths[0]).st_mode) or kind != "fifo"


def test_reading_what_a_confined_process_wrote():
    assert sandbox.read_written(Path("/dev/null")) is None
    assert sandbox.read_written(Path(__file__), limit=10) is None
    assert sandbox.read_written(Path(__file__)) == Path(__file__).read_bytes()


def test_a_header_beside_the_source_is_not_shadowed_by_a_published_object(tmp_path):
    """gcc finds `#include "x"` beside the source first: a build with a file of that name there
    compiles its own object, not the one kbench made without it."""
    text = '#include "cstdio"\nint kb_answer(int x) { return x + 7; }\n'
    store = tmp_path / "cache" / "objects"
    a = build_folder(tmp_path, "a", text)
    assert compile_in(a, store, torch_args(a / "main.cpp")).returncode == 0
    assert objects.publish(store, want_of(a)).startswith("published")
    b = build_folder(tmp_path, "b", text)
    assert "reused from" in compile_in(b, store, torch_args(b / "main.cpp")).stderr
    c = build_folder(tmp_path, "c", text)
    (c / "cstdio").write_text("#define KB_SHADOW 1\n")
    done = compile_in(c, store, torch_args(c / "main.cpp"))
    assert done.returncode == 0 and "reused" not in done.stderr


def test_a_native_cpu_is_part_of_the_key(monkeypatch):
    """-march=native compiles for the host's own CPU: a cache shared by hosts (a Dask cluster's
    home folder) keys it by that CPU."""
    args = torch_args(Path("/b/main.cpp"), "-march=native")
    first = shim.key("gcc", shim.parse(args), {}, b"x")
    monkeypatch.setattr(shim, "native_cpu", lambda: "another CPU")
    assert shim.key("gcc", shim.parse(args), {}, b"x") != first
    plain = torch_args(Path("/b/main.cpp"), "-march=x86-64-v3")
    assert shim.key("gcc", shim.parse(plain), {}, b"x") == shim.key("gcc", shim.parse(plain), {}, b"x")


@pytest.mark.parametrize("output", ["all.d", "object.d"])
def test_a_note_cannot_name_the_file_kbench_publishes_as_the_object(tmp_path, output):
    """The output's name is no part of the key (each build names its own), so a note that calls
    it after a file kbench's compile also writes (the dependency lists) got that text published
    as the victim's object: its next build copied it and failed to link."""
    store = tmp_path / "cache" / "objects"
    a = build_folder(tmp_path, "a", VICTIM)
    assert compile_in(a, store, torch_args(a / "main.cpp")).returncode == 0
    want = want_of(a)
    forged = {**want, "args": [output if x == "main.o" else x for x in want["args"]]}
    objects.publish(store, forged)
    if (store / want["key"]).exists():
        assert (store / want["key"] / "object.o").read_bytes()[:4] == b"\x7fELF"
    answer, _ = victim_answer(tmp_path, store, "b")
    assert answer == "8"
