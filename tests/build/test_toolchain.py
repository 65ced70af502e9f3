"""The toolchain's description in a build's key (harness/build/toolchain.py): what a user
relies on is that a cached build is reused only under the same Python, torch and
compilers, and that a process which has not imported torch (a Dask worker's first
task) finds the description kept by kbench instead of spending seconds on `import torch`."""
import json
import os
import subprocess
import sys
from pathlib import Path

from conftest import ROOT
from harness.build import toolchain

ASK = ("import json, sys; from pathlib import Path; from harness.build.toolchain import toolchain_versions; "
       "v = toolchain_versions(sys.argv[1], Path(sys.argv[2])); print(json.dumps([v, 'torch' in sys.modules]))")


def in_fresh_process(device: str, store: Path, env: dict) -> tuple[str, bool]:
    done = subprocess.run([sys.executable, "-c", ASK, device, str(store)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    versions, imported = json.loads(done.stdout.strip().splitlines()[-1])
    return versions, imported


def fake_compiler(folder: Path, words: str) -> Path:
    cxx = folder / "c++"
    cxx.write_text(f"#!/bin/sh\necho '{words}'\n")
    cxx.chmod(0o755)
    return cxx


def test_a_process_without_torch_takes_the_kept_description(tmp_path):
    env = {**os.environ, "CXX": str(fake_compiler(tmp_path, "fake c++ 1.0"))}
    first, imported = in_fresh_process("cpu", tmp_path / "store", env)
    assert imported and "c++ fake c++ 1.0" in first and "torch " in first  # described through torch once
    again, imported = in_fresh_process("cpu", tmp_path / "store", env)
    assert (again, imported) == (first, False)


def test_a_changed_compiler_or_environment_is_described_again(tmp_path):
    cxx = fake_compiler(tmp_path, "fake c++ 1.0")
    env = {**os.environ, "CXX": str(cxx)}
    first, _ = in_fresh_process("cpu", tmp_path / "store", env)
    fake_compiler(tmp_path, "fake c++ 2.0.1")  # upgraded in place: same path, other file
    after, imported = in_fresh_process("cpu", tmp_path / "store", env)
    assert imported and "c++ fake c++ 2.0.1" in after and after != first
    (tmp_path / "other").mkdir()
    other = fake_compiler(tmp_path / "other", "fake c++ 3")  # CXX names another compiler
    moved, imported = in_fresh_process("cpu", tmp_path / "store", {**env, "CXX": str(other)})
    assert imported and "c++ fake c++ 3" in moved


def test_a_kept_description_that_cannot_be_read_is_made_again(tmp_path):
    env = {**os.environ, "CXX": str(fake_compiler(tmp_path, "fake c++ 1.0"))}
    first, _ = in_fresh_process("cpu", tmp_path / "store", env)
    for kept in (tmp_path / "store").iterdir():
        kept.write_text("{not json")
    again, imported = in_fresh_process("cpu", tmp_path / "store", env)
    assert (again, imported) == (first, True)
    assert json.loads(next((tmp_path / "store").iterdir()).read_text())["versions"] == first  # kept again


def test_the_fingerprint_holds_python_torch_and_each_compiler(tmp_path, monkeypatch):
    monkeypatch.setenv("CXX", str(fake_compiler(tmp_path, "x")))
    here = toolchain.fingerprint("cuda")
    assert here and here != toolchain.fingerprint("cpu")
    monkeypatch.setenv("CUDA_HOME", str(tmp_path))
    assert toolchain.fingerprint("cuda") != here
