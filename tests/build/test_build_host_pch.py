"""nvcc's host compile through kbench's precompiled prefix (harness/build/host_pch.py,
shim.py's gcc).

What a user relies on: the object nvcc's host compile makes, and a failing compile's
output, are what they are without kbench (but for the name of cudafe++'s anonymous
namespaces, which differs between any two builds anyway); the prefix is used only where
the file starts with exactly its text; kbench runs nvcc only with flags on its list.

gcc compiles small stand-ins for cudafe++'s output here; the real one is measured in
bench/build_cpu.py (--mode objects --phases).
"""
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from harness.build import host_pch, objects, shim

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")

HOST_FLAGS = ["-std=c++17", "-D__CUDA_ARCH__=900", "-c", "-x", "c++", "-fPIC", "-O2", "-m64"]
PREFIX = ("#pragma GCC diagnostic push\n# 1 \"/usr/include/kb_fake.h\" 1 3\n"
          "namespace _GLOBAL__N__MODID __attribute__((visibility(\"hidden\"))) { int hidden_counter = 1; }\n"
          "using namespace _GLOBAL__N__MODID;\n"
          "template <class T> T kb_twice(T x) { return x + x; }\n"
          "struct KbBig { int a[64]; int sum() const { int s = 0; for (int v : a) s += v; return s; } };\n")
REST = ("# 3 \"/b/cuda.cu\"\n"
        "int kb_user(int x) { return kb_twice(x) + hidden_counter + _GLOBAL__N__MODID::hidden_counter; }\n"
        "#define _NV_ANON_NAMESPACE _GLOBAL__N__MODID\n"
        "int kb_stub() { return ::_NV_ANON_NAMESPACE::hidden_counter; }\n")


def cudafe_output(module_id: str, rest: str = REST) -> str:
    return f'# 1 "/b/cuda.cu"\n' + (PREFIX + rest).replace("MODID", module_id)


def make_entry(store: Path, key: str, module_id: str = "_9e67_7_cuda_cu_8447") -> Path:
    """A prefix entry as host_pch.make publishes it (made here from the stand-in text)."""
    entry = store / "nvcc-host" / key / "e1"
    entry.mkdir(parents=True)
    prefix = PREFIX.replace("MODID", module_id).encode()
    (entry / "prefix.h").write_bytes(prefix)
    flags = [("c++-header" if a == "c++" else a) for a in HOST_FLAGS if a != "-c"]
    done = subprocess.run(["gcc", *flags, str(entry / "prefix.h"), "-o", str(entry / "prefix.h.gch")],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    import hashlib

    (entry / "manifest.json").write_text(json.dumps({"module_id": module_id, "prefix_bytes": len(prefix),
                                                     "sha256": hashlib.sha256(prefix).hexdigest()}))
    return entry


def host_compile(folder: Path, store: Path, text: str) -> tuple[subprocess.CompletedProcess, Path]:
    """nvcc's host compile (`gcc ... X.cudafe1.cpp -o OUT`) of `text` through the gcc stand-in."""
    source = folder / "tmpxft_0001-6_cuda.cudafe1.cpp"
    source.write_text(text)
    env = {**os.environ}
    env.update(objects.build_env(store, folder / "scratch", env))
    args = [*HOST_FLAGS, str(source), "-o", str(folder / "cuda.cuda.o")]
    return subprocess.run(["gcc", *args], cwd=folder, env=env, capture_output=True, text=True), source


def key_of(folder: Path) -> str:
    args = [*HOST_FLAGS, str(folder / "tmpxft_0001-6_cuda.cudafe1.cpp"), "-o", str(folder / "cuda.cuda.o")]
    return shim.host_key(shim.describe(shutil.which("gcc")), shim.parse_host(args)[1], {})


def test_the_host_compile_is_recognised_and_normalized():
    src, normalized = shim.parse_host([*HOST_FLAGS, "/tmp/tmpxft_00a1-6_cuda.cudafe1.cpp", "-o", "cuda.cuda.o"])
    assert src == "/tmp/tmpxft_00a1-6_cuda.cudafe1.cpp" and "@SRC@" in normalized and "@OUT@" in normalized
    assert "/tmp" not in " ".join(normalized)
    for other in (["-E", "-x", "c++", "cuda.cu", "-o", "cuda.cpp4.ii"],  # nvcc's preprocessing
                  [*HOST_FLAGS, "main.cpp", "-o", "main.o"], ["--version"], ["-dumpversion"],
                  [*HOST_FLAGS, "a.cudafe1.cpp", "b.cudafe1.cpp", "-o", "x.o"]):
        assert shim.parse_host(other) is None, other


def test_a_file_is_rewritten_only_when_it_starts_with_exactly_the_prefix():
    prefix = PREFIX.replace("MODID", "_aa_7_cuda_cu_11").encode()
    digest = __import__("hashlib").sha256(prefix).hexdigest()
    text = cudafe_output("_bb_7_cuda_cu_22").encode()
    out = shim.with_prefix(text, b"_aa_7_cuda_cu_11", len(prefix), digest, "/s/prefix.h")
    assert out == (b'# 1 "/b/cuda.cu"\n#include "/s/prefix.h"\n' + REST.replace("MODID", "_aa_7_cuda_cu_11").encode())
    assert b"_bb_7" not in out  # every anonymous namespace of the file renamed alike
    other = text.replace(b"KbBig", b"KbHuge")
    assert shim.with_prefix(other, b"_aa_7_cuda_cu_11", len(prefix), digest, "/s/prefix.h") is None
    taken = text + b"int _GLOBAL__N___aa_7_cuda_cu_11;\n"  # the prefix's name is in use: no merge
    assert shim.with_prefix(taken, b"_aa_7_cuda_cu_11", len(prefix), digest, "/s/prefix.h") is None


def test_a_prefixed_compile_makes_the_object_of_the_renamed_file(tmp_path):
    store = tmp_path / "objects"
    plain_dir, pch_dir = tmp_path / "plain", tmp_path / "pch"
    plain_dir.mkdir(), pch_dir.mkdir()
    make_entry(store, key_of(pch_dir))
    # Without an entry for its flags (another folder: the key holds nothing of it, so
    # make the plain one by hand): the file as cudafe++ wrote it, renamed as the prefix is.
    source = plain_dir / "tmpxft_0001-6_cuda.cudafe1.cpp"
    source.write_text(cudafe_output("_9e67_7_cuda_cu_8447"))
    plain = subprocess.run(["gcc", *HOST_FLAGS, str(source), "-o", str(plain_dir / "cuda.cuda.o")], capture_output=True)
    assert plain.returncode == 0
    done, used = host_compile(pch_dir, store, cudafe_output("_0c0c_7_cuda_cu_1234"))
    assert done.returncode == 0, done.stderr
    assert "#include" in used.read_text()  # the stand-in compiled through the prefix
    assert (pch_dir / "cuda.cuda.o").read_bytes() == (plain_dir / "cuda.cuda.o").read_bytes()
    assert not (pch_dir / "scratch" / objects.HOST_WANTS).exists()


def test_a_failing_prefixed_compile_is_compiled_as_nvcc_wrote_it_and_says_only_that(tmp_path):
    store = tmp_path / "objects"
    folder = tmp_path / "b"
    folder.mkdir()
    make_entry(store, key_of(folder))
    text = cudafe_output("_0c0c_7_cuda_cu_1234", REST + "int kb_broken() { return undeclared_name; }\n")
    done, source = host_compile(folder, store, text)
    assert done.returncode != 0
    assert source.read_text() == text  # restored
    assert done.stderr.count("undeclared_name") == 1  # one compile's error, not two
    bare = subprocess.run(["gcc", *HOST_FLAGS, str(source), "-o", str(folder / "x.o")], capture_output=True, text=True)
    assert done.stderr == bare.stderr


def test_without_a_prefix_the_compile_runs_as_is_and_a_note_names_nvcc(tmp_path):
    store = tmp_path / "objects"
    folder = tmp_path / "b"
    folder.mkdir()
    text = cudafe_output("_0c0c_7_cuda_cu_1234")
    done, source = host_compile(folder, store, text)
    assert done.returncode == 0 and source.read_text() == text
    # No nvcc among its ancestors here: no note (kbench could not repeat the build's command).
    assert host_pch.read_wants(folder / "scratch") == []


def test_notes_are_taken_only_when_well_formed(tmp_path):
    notes = tmp_path / objects.HOST_WANTS
    notes.mkdir()
    good = {"key": "c" * 32, "host_args": HOST_FLAGS, "nvcc": ["/usr/local/cuda/bin/nvcc", "-c", "x.cu"], "env": {}}
    for i, note in enumerate([good, {**good, "key": "x"}, {**good, "nvcc": "nvcc -c"}, {**good, "env": {"CPATH": 1}}]):
        (notes / f"{i}.json").write_text(json.dumps(note))
    assert host_pch.read_wants(tmp_path) == [good]


TORCH_NVCC = ["-DTORCH_EXTENSION_NAME=relu_ext", "-DTORCH_API_INCLUDE_EXTENSION_H", "-D__CUDA_NO_HALF_OPERATORS__",
              "--expt-relaxed-constexpr", "-gencode=arch=compute_90,code=sm_90", "--compiler-options", "-fPIC",
              "-O3", "-std=c++20"]


@pytest.mark.parametrize("extra, ok", [
    ([], True), (["--use_fast_math", "-Xptxas", "-v", "-lineinfo"], True), (["-std", "c++17", "-gencode", "arch=compute_80,code=sm_80"], True), (["-MD", "-MF", "/b/cuda.cuda.o.d"], True),
    (["-ccbin", "/tmp/evil"], False),
    (["-Xcompiler", "-fplugin=/tmp/x.so"], False), (["--dependency-output", "/tmp/x.d"], False),
    (["-include", "/tmp/x.h"], False), (["-Xptxas", "--output-file=/tmp/x"], False), (["-I/tmp"], False),
])
def test_kbench_runs_nvcc_only_with_flags_on_its_list(extra, ok):
    inc = objects._torch_includes()[0]
    argv = ["/usr/local/cuda/bin/nvcc", *TORCH_NVCC[:2], "-isystem", inc, *TORCH_NVCC[2:], *extra, "-c", "/b/cuda.cu",
            "-o", "cuda.cuda.o"]
    flags = host_pch._checked_nvcc(argv, [inc])
    assert (flags is not None) == ok
    if ok:
        assert "-c" not in flags and "/b/cuda.cu" not in flags and "-isystem" in flags
        assert "-MF" not in flags and "/b/cuda.cuda.o.d" not in flags  # a file kbench's own nvcc never writes
    why: list = []
    assert host_pch._checked_nvcc([*argv[:3], "-isystem", "/tmp", *argv[3:]], [inc], why=why) is None
    assert why == ["-isystem /tmp"]  # make() says which flag kept it from making the prefix
    # A folder that only resolves to torch's, and a character the shell running nvcc's steps acts on.
    assert host_pch._checked_nvcc([*argv[:3], "-isystem", f"{inc}/x/..", *argv[3:]], [inc]) is None
    assert host_pch._checked_nvcc([*argv[:3], "-isystem", f"{inc}/`id`/..", *argv[3:]], [inc]) is None
    assert host_pch._checked_nvcc([*argv, "-DX=$(id)"], [inc]) is None
    assert host_pch._checked_nvcc([*argv, "--compiler-options", "-O3\n-fPIC"], [inc]) is None


def test_ccbin_is_taken_only_as_kbenchs_own_stand_in(tmp_path):
    """Where CC is set torch passes `-ccbin $CC` to nvcc, and in a build CC is kbench's gcc
    stand-in: that flag is dropped (kbench runs its own CC); any other -ccbin is refused."""
    inc = objects._torch_includes()[0]
    ours = str(objects.stand_in(tmp_path / "objects", "gcc"))
    argv = ["/usr/local/cuda/bin/nvcc", "-ccbin", ours, *TORCH_NVCC[:2], "-isystem", inc, *TORCH_NVCC[2:],
            "-c", "/b/cuda.cu", "-o", "cuda.cuda.o"]
    flags = host_pch._checked_nvcc(argv, [inc], ours)
    assert flags is not None and "-ccbin" not in flags and ours not in flags
    assert host_pch._checked_nvcc(argv, [inc]) is None
    assert host_pch._checked_nvcc([argv[0], "-ccbin", str(tmp_path / "gcc"), *argv[3:]], [inc], ours) is None


def test_kbenchs_nvcc_runs_kbenchs_cc_as_torch_would(monkeypatch):
    monkeypatch.delenv("CC", raising=False)
    gcc, flags = host_pch._host_compiler()
    assert flags == [] and gcc == shutil.which("gcc")
    monkeypatch.setenv("CC", shutil.which("gcc"))
    assert host_pch._host_compiler() == (shutil.which("gcc"), ["-ccbin", shutil.which("gcc")])
    monkeypatch.setenv("CC", "ccache gcc")
    assert host_pch._host_compiler() == (None, [])


def test_only_kbenchs_own_nvcc_is_run(tmp_path, monkeypatch):
    """The nvcc a note names is a build process's word: an install's layout (nvcc.profile beside
    it) anywhere a build may write (its folder, /dev/shm) is never run; kbench runs its own
    (PYTORCH_NVCC, else CUDA_HOME/bin/nvcc), and none where it has none."""
    def program(path: Path, mark: str) -> Path:
        path.parent.mkdir(parents=True)
        path.write_text(f"#!/bin/sh\ntouch {tmp_path / mark}\nexit 1\n")
        path.chmod(0o755)
        (path.parent / "nvcc.profile").write_text("")
        return path

    theirs = program(tmp_path / "shm" / "nvcc", "theirs-ran")
    ours = program(tmp_path / "cuda" / "bin" / "nvcc", "ours-ran")
    want = {"key": "c" * 32, "host_args": [], "nvcc": [str(theirs), "-O3", "-c", "x.cu", "-o", "x.o"], "env": {}}
    monkeypatch.setenv("PYTORCH_NVCC", str(ours))
    assert host_pch.kbench_nvcc() == str(ours)
    assert host_pch.make(tmp_path / "objects", want).startswith("skipped")
    assert (tmp_path / "ours-ran").exists() and not (tmp_path / "theirs-ran").exists()
    monkeypatch.delenv("PYTORCH_NVCC")
    import torch.utils.cpp_extension as cpp_extension

    monkeypatch.setattr(cpp_extension, "CUDA_HOME", None)
    assert host_pch.kbench_nvcc() is None
    (tmp_path / "ours-ran").unlink()
    assert host_pch.make(tmp_path / "objects", want).startswith("skipped")
    assert not (tmp_path / "ours-ran").exists() and not (tmp_path / "theirs-ran").exists()
