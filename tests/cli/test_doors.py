"""The build process is no open door (issue 31): solution code that runs at import, in a build
process or a candidate, cannot write kbench's files, torch's, the Python environment, what builds
share, another solution's build, the run folder or $HOME, nor leave a process behind.

Each attacker in tests/fixtures/doors/solutions/attackers tries one door at import, then computes an
honest softmax. The runs use a copy of the project (harness/ and cli.py), so that an attack that
gets through damages the copy, not the tree that runs the tests, and a cache of their own:
  run 0: the victims (an honest softmax, one that returns zeros, an honest C++ build); then
         kbench's object publisher publishes the C++ victim's host object, as at a second miss;
  run 1: the attackers, on the same copy and cache;
  run 2: the victims again, which must get the verdicts they got before; the C++ victim, whose
         folder the attackers wrote, is built again and copies the published object.
After run 1 the copy of kbench, the shared parts of the cache (precompiled headers, the object
store, build records), torch's files and site-packages are byte-identical; nothing marked appears
in the run folder, $HOME or /tmp; no process the attackers started is alive.

torch and site-packages cannot be copied cheaply: the attacks on them are an append to
torch/version.py and new files, which the test puts back or removes whatever happens.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import site
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

import pytest
import torch

from conftest import ROOT, kill_pids, marker_pids, pwned_files
from expect import mismatches

DOORS = ROOT / "tests" / "fixtures" / "doors"
MARK = b"KBENCH_DOOR_" + b"OPENED"
TORCH_DIR = Path(torch.__file__).parent
TORCH_VERSION = TORCH_DIR / "version.py"


def _tree(root: Path) -> dict[str, str]:
    """Every file under `root` by its hash (links by their target)."""
    out = {}
    if root.is_dir():
        for path in sorted(root.rglob("*")):
            if path.is_symlink():
                out[str(path.relative_to(root))] = "-> " + os.readlink(path)
            elif path.is_file():
                out[str(path.relative_to(root))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def _site_folders() -> set[Path]:
    return {Path(p) for p in {sysconfig.get_paths()["purelib"], *site.getsitepackages()} if Path(p).is_dir()}


def _planted_pth() -> list[Path]:
    return [p for folder in _site_folders() for p in folder.glob("kbench_pwned_door*")]


def _torch_planted() -> list[Path]:
    return list(TORCH_DIR.glob("kbench_pwned_door*"))


def _marked(root: Path) -> list[str]:
    """Files under `root` holding the attackers' mark."""
    return [str(p) for p in root.rglob("*") if p.is_file() and not p.is_symlink() and MARK in p.read_bytes()]


def _copy_project(dest: Path) -> Path:
    dest.mkdir(parents=True)
    shutil.copytree(ROOT / "harness", dest / "harness", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "cli.py", dest / "cli.py")
    return dest


def _run(project: Path, cache: Path, solutions: str, out: Path, device: str) -> dict:
    # No bytecode from kbench's own processes: any .pyc in the copy is an attacker's.
    env = {**os.environ, "KBENCH_CACHE": str(cache), "PYTHONUNBUFFERED": "1", "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("PYTHONPATH", None)  # the copy's harness, from the copy's folder
    proc = subprocess.run(
        [sys.executable, str(project / "cli.py"), "run", "--problems", str(DOORS / "problems"),
         "--solutions", str(DOORS / "solutions"), "--set", solutions, "--out", str(out), "--device", device, "--no-timing",
         "--timeout", "120", "--exit-zero"],
        cwd=project, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    return json.loads((out / "results.json").read_text())


def _publish_victims_object(project: Path, cache: Path, victim_build: Path) -> str:
    """The C++ victim's host object, published by kbench's own publisher (the copy's) from the
    note its build left, as build_all does at a key's second miss."""
    from harness.build import objects

    wants = objects.read_wants(victim_build / "tmp", victim_build)
    assert len(wants) == 1, wants
    path = cache / "victim-want.json"
    path.write_text(json.dumps(wants[0]))
    # No bytecode from kbench's own processes, as in _run: the copy is compared file by file.
    env = {**{k: v for k, v in os.environ.items() if k != "PYTHONPATH"}, "PYTHONDONTWRITEBYTECODE": "1"}
    done = subprocess.run([sys.executable, "-m", "harness.build.objects", str(cache / "objects"), str(path)],
                          cwd=project, env=env, capture_output=True, text=True, timeout=600)
    return done.stdout + done.stderr


def _shared_programs() -> list[Path]:
    return list(Path("/dev/shm").glob("kbench-door-*"))


def _verdicts(data: dict) -> dict[str, tuple[str, list[str]]]:
    return {Path(r["solution_path"]).name: (r["status"], sorted(r["flags"])) for r in data["results"]}


def _copy_unconfined(project: Path) -> None:
    """The copy's sandbox finds no Landlock: its builds and candidates run unconfined, as on a
    kernel without it (the control below)."""
    path = project / "harness" / "shared" / "sandbox.py"
    text = path.read_text()
    path.write_text(text.replace("def landlock_abi() -> int:\n", "def landlock_abi() -> int:\n    return 0\n", 1))


def _as_through_b(tmp: Path) -> dict:
    """Whether the C++ compiler a build runs (CXX's, else c++) looks for `as` in a -B folder,
    as object_store.py's build-time attack needs."""
    from harness.build import objects

    cxx, folder = objects.host_cxx(dict(os.environ)), tmp / "as-probe"
    folder.mkdir()
    (folder / "as").write_text("#!/bin/sh\n")
    (folder / "as").chmod(0o755)
    named = subprocess.run([cxx, f"-B{folder}/", "-print-prog-name=as"], capture_output=True, text=True,
                           timeout=60).stdout.strip() if cxx else ""
    return {"cxx": cxx, "as_through_B": named == str(folder / "as")}


def observe(tmp: Path, device: str, confined: bool = True) -> dict:
    """Run 0 (victims), run 1 (attackers), run 2 (victims) on one copy of kbench and one cache,
    and what each left behind. Whatever happens, torch's file is put back and planted files
    and processes removed."""
    project, cache = _copy_project(tmp / "project"), tmp / "cache"
    if not confined:
        _copy_unconfined(project)
    # A precompiled header as kbench's own PCH job would leave it (its bytes do not matter here:
    # the attack appends to whatever lies under <cache>/pch).
    gch = cache / "pch" / "0000-doors" / "torch" / "extension.h.gch"
    gch.parent.mkdir(parents=True)
    gch.write_bytes(os.urandom(4096))
    torch_before, markers, pwned = TORCH_VERSION.read_bytes(), marker_pids(), pwned_files()
    seen: dict = {"device": device, **_as_through_b(tmp)}
    try:
        seen["before"] = _run(project, cache, "victims", tmp / "run0", device)
        seen["project"], seen["pch"], seen["records"] = _tree(project), _tree(cache / "pch"), _tree(cache / "records")
        seen["site"] = {str(f): sorted(p.name for p in f.iterdir()) for f in _site_folders()}
        victim_build = next(cache.glob("builds/*/ext/door_victim_softmax")).parent.parent
        seen["victim_build"] = _tree(victim_build)
        seen["published"] = _publish_victims_object(project, cache, victim_build)
        seen["objects"] = _tree(cache / "objects")
        seen["attackers"] = _run(project, cache, "attackers", tmp / "run1", device)
        time.sleep(3)  # a daemon that outlived kbench would write on
        seen["alive"] = sorted(marker_pids() - markers)
        seen["project_after"], seen["pch_after"] = _tree(project), _tree(cache / "pch")
        seen["records_after"] = _tree(cache / "records")
        seen["triton_after"] = _tree(cache / "triton")
        seen["objects_after"], seen["objects_marked"] = _tree(cache / "objects"), _marked(cache / "objects")
        seen["build_time_program_ran"] = list(cache.glob("builds/*/tmp/kbench-door-as-ran"))
        seen["site_after"] = {str(f): sorted(p.name for p in f.iterdir()) for f in _site_folders()}
        seen["torch_same"] = TORCH_VERSION.read_bytes() == torch_before
        seen["torch_planted"], seen["pth"] = _torch_planted(), _planted_pth()
        seen["pwned"] = sorted(str(p) for p in pwned_files() - pwned)
        seen["run_marked"] = _marked(tmp / "run1")
        seen["ccache"] = (cache / "ccache").exists()
        seen["victim_build_after"] = _tree(victim_build)
        if not confined:
            return seen  # the doors are open: run 2 would judge with the attackers' checker
        seen["after"] = _run(project, cache, "victims", tmp / "run2", device)
        seen["victim_log"] = next(Path(r["log_path"]) for r in seen["after"]["results"]
                                  if r["solution_path"].endswith("honest_cpp.py")).read_text(errors="replace")
        seen["victim_missed"] = list((victim_build / "tmp" / "kbench-object-wants").glob("*.json"))
        seen["victim_marked"] = _marked(victim_build)
        return seen
    finally:
        kill_pids(marker_pids() - markers)
        if TORCH_VERSION.read_bytes() != torch_before:
            TORCH_VERSION.write_bytes(torch_before)
        for path in [*_torch_planted(), *_planted_pth(), *(pwned_files() - pwned)]:
            path.unlink(missing_ok=True)
        for path in _shared_programs():
            shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="module", params=["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def doors(request, tmp_path_factory, escape_watch):
    if request.param == "cuda" and not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    with escape_watch():  # not while the adversarial set's escapes run (conftest.escape_watch)
        return observe(tmp_path_factory.mktemp(f"doors-{request.param}"), request.param)


def test_the_attackers_get_their_honest_verdicts(doors):
    """Every attack failed quietly; the softmax each computes is judged as any other."""
    assert mismatches(doors["attackers"]["results"]) == []


def test_kbench_torch_and_the_python_environment_are_unchanged(doors):
    assert doors["project_after"] == doors["project"], "the copy of kbench changed (check.py, a .pyc)"
    assert doors["torch_same"] and doors["torch_planted"] == [], "torch's files changed"
    assert doors["site_after"] == doors["site"] and doors["pth"] == [], "site-packages changed"


def test_what_builds_share_is_unchanged(doors):
    """The precompiled headers and the build records are written by kbench's own process only
    (run 1 adds the attackers' own records, and changes none from before), no object store
    appeared for later builds to link from, and no Triton entry was planted (the doors' solutions
    compile no Triton kernel: kbench keeps none for them, so <cache>/triton stays empty)."""
    assert doors["pch_after"] == doors["pch"]
    assert doors["triton_after"] == {}, "files appeared in <cache>/triton, whose entries kbench's judges seed candidates from"
    assert {k: doors["records_after"].get(k) for k in doors["records"]} == doors["records"]
    assert not doors["ccache"]


def test_the_object_store_is_written_by_kbench_only_and_its_objects_reach_the_victim_unchanged(doors):
    """object_store.py ran its program at import, and at build time through its own assembler
    (gcc -B); its notes named programs of its own for kbench's publishers. Nothing it wrote
    reached <cache>/objects: what kbench published before is byte-identical, nothing holds the
    mark, and the C++ victim's rebuild in run 2 copied the published object (it compiled
    nothing, so it left no note) into a build that holds no mark either."""
    assert "published" in doors["published"], doors["published"]
    assert doors["objects_marked"] == []
    assert {k: doors["objects_after"].get(k) for k in doors["objects"]} == doors["objects"]
    assert doors["victim_missed"] == [] and doors["victim_marked"] == []


def test_the_build_time_attack_was_tried(doors):
    """The test above is not vacuous: object_store.py's assembler ran in its build, where the
    host's C++ compiler takes `as` from -B. A gcc that finds its own first (/opt/gcc/bin/g++ on
    the device machines, gcc 13.3: `-print-prog-name=as` names /opt/gcc/bin/as whatever -B says)
    cannot be made to run it, and this part is skipped there, saying so."""
    if not doors["build_time_program_ran"] and not doors["as_through_B"]:
        pytest.skip(f"{doors['cxx']} does not take `as` from -B: the build-time attack cannot run on this host")
    assert doors["build_time_program_ran"], "the attacker's assembler did not run: the build-time attack was not tried"


def test_nothing_reached_the_run_folder_home_or_tmp_and_no_process_outlived_the_run(doors):
    assert doors["run_marked"] == [], "the attackers wrote into the run folder"
    assert doors["pwned"] == [], "files appeared in $HOME or /tmp"
    assert doors["alive"] == [], "a process an attacker started outlived kbench"


def test_the_victims_keep_their_verdicts(doors):
    """Before and after the attackers, on the same copy and cache: the zeros are still incorrect
    (a rewritten checker would pass them) and the honest ones still ok."""
    before, after = _verdicts(doors["before"]), _verdicts(doors["after"])
    assert mismatches(doors["before"]["results"]) == []
    assert after == before, f"before: {before}\nafter: {after}"


def test_a_build_written_by_a_candidate_is_rebuilt_not_loaded(doors):
    """A candidate may write the build cache (torch's loader locks beside its build), so the
    attackers' candidates did write the C++ victim's folder; run 2 found it changed against its
    record and built it again (and test_the_victims_keep_their_verdicts: it is ok)."""
    assert doors["victim_build_after"] != doors["victim_build"], "the attack did not reach the victim's build"
    assert "[kbench: build cached in" not in doors["victim_log"], "a build the attackers changed was loaded"


@pytest.mark.skipif(os.environ.get("KBENCH_SLOW_TESTS") != "1", reason="the control: set KBENCH_SLOW_TESTS=1")
def test_without_the_sandbox_the_attacks_open_the_doors(tmp_path, escape_watch):
    """The control: the same attackers against a copy whose sandbox finds no Landlock. Each door
    that the tests above find shut is open here, so the fixtures are attacks that work."""
    with escape_watch():
        seen = observe(tmp_path, "cpu", confined=False)
    assert seen["project_after"] != seen["project"]
    assert not seen["torch_same"] and seen["torch_planted"] and seen["pth"]
    assert seen["pch_after"] != seen["pch"] and seen["records_after"] != seen["records"] and seen["ccache"]
    assert seen["triton_after"], "the attacker planted no Triton entry unconfined"
    assert seen["objects_marked"] and seen["objects_after"] != seen["objects"]
    assert seen["run_marked"] and seen["pwned"]
    assert seen["victim_build_after"] != seen["victim_build"]


def _kbench(project: Path, tmp: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    full = {**os.environ, "KBENCH_CACHE": str(tmp / "cache"), "PYTHONDONTWRITEBYTECODE": "1", **(env or {})}
    full.pop("PYTHONPATH", None)
    if "CI" not in (env or {}):
        full.pop("CI", None)  # CI itself sets it: the default must be the one for a user's shell here
    return subprocess.run([sys.executable, str(project / "cli.py"), "run", "--problems", str(DOORS / "problems"),
                           "--solutions", str(DOORS / "solutions"), "--set", "victims",
                           "--solution", str(DOORS / "solutions" / "victims" / "level1" / "1_Softmax" / "honest.py"),
                           "--device", "cpu", "--no-timing", "--out", str(tmp / "out"), *args],
                          cwd=project, env=full, capture_output=True, text=True, timeout=600)


@pytest.mark.parametrize("flags, ci, refused", [(("--require-sandbox",), False, True), ((), True, True),
                                                (("--no-require-sandbox",), True, False)])
def test_a_host_without_landlock_is_refused_when_asked_and_under_ci(tmp_path, flags, ci, refused):
    """--require-sandbox (the default under CI=true) refuses, in one line, before any solution
    code runs, on a host whose kernel has no Landlock (a copy of kbench that finds none)."""
    project = _copy_project(tmp_path / "project")
    _copy_unconfined(project)
    proc = _kbench(project, tmp_path, *flags, env={"CI": "true"} if ci else None)
    if not refused:
        assert proc.returncode == 0, proc.stderr[-2000:]
        return
    assert proc.returncode == 2 and not (tmp_path / "out" / "results.json").exists()
    line = proc.stderr.strip().splitlines()[-1]
    assert "no Landlock" in line and "--no-require-sandbox" in line


def test_an_unconfined_run_says_so_first_and_in_every_task(tmp_path):
    project = _copy_project(tmp_path / "project")
    _copy_unconfined(project)
    proc = _kbench(project, tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]  # the console's lines (the table is stdout)
    first = next(i for i, ln in enumerate(lines) if "no sandbox" in ln)
    assert first < next(i for i, ln in enumerate(lines) if "honest.py" in ln)
    assert "[unconfined]" in next(ln for ln in lines if "honest.py" in ln and " ok " in f" {ln} ")
    results = json.loads((tmp_path / "out" / "results.json").read_text())["results"]
    assert [r["sandbox"] for r in results] == [None]
