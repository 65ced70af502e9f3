"""`kbench list`: per-problem facts computed in parallel once and cached by the file's
hash; a problem that needs a missing optional package says which."""
import json
import os
import subprocess
import sys

from conftest import ROOT

from harness import facts_cache

PROBLEMS = ROOT / "tests" / "fixtures" / "list"


def list_problems(tmp_path, cache):
    """`python cli.py list` as a user runs it, with a cache of the test's own."""
    empty = tmp_path / "no-solutions"
    empty.mkdir(exist_ok=True)
    proc = subprocess.run(
        [sys.executable, str(ROOT / "cli.py"), "list", "--problems", str(PROBLEMS), "--solutions", str(empty)],
        env=dict(os.environ, KBENCH_CACHE=str(cache)), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return proc


def test_missing_package_is_named_and_facts_are_cached(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    facts, cached = facts_cache.facts_of_files(sorted(str(p) for p in (PROBLEMS / "level1").glob("*.py")), cache,
                                               processes=2)
    by_name = {p.rsplit("/", 1)[1]: f for p, f in facts.items()}
    assert by_name["3_NeedsPackage.py"] == "needs kbench_missing_pkg"
    assert by_name["4_Broken.py"] == "ValueError: this problem is broken"
    assert by_name["1_AddReLU.py"].inputs == ("float32[256, 1024]", "float32[256, 1024]")
    assert by_name["1_AddReLU.py"].input_bytes == 2 * 256 * 1024 * 4
    assert cached == 0
    # three entries: "needs" is not cached, since installing the package changes it
    assert len(list((cache / "problem-facts").glob("*.json"))) == 3

    computed, original = [], facts_cache.facts_of_file
    monkeypatch.setattr(facts_cache, "facts_of_file", lambda p: computed.append(p) or original(p))
    again, cached = facts_cache.facts_of_files(sorted(facts), cache, processes=1)
    assert again == facts and cached == 3
    assert [p.rsplit("/", 1)[1] for p in computed] == ["3_NeedsPackage.py"]


def test_cli_list_says_needs_and_reuses_the_cache(tmp_path):
    cache = tmp_path / "cache"
    first = list_problems(tmp_path, cache)
    out = " ".join(first.stdout.split())  # rich may wrap a cell
    assert "needs kbench_missing_pkg" in out and "No module named" not in out
    assert "level1/3_NeedsPackage" in out and "problem facts: 0 of 4 from the cache" in first.stderr
    # The second listing reads the cache: shown by an entry edited in between.
    entries = list((cache / "problem-facts").glob("*.json"))
    edited = next(e for e in entries if "1024" in e.read_text())
    data = json.loads(edited.read_text())
    data["shape"]["inputs"] = ["FROM_THE_CACHE"]
    edited.write_text(json.dumps(data))
    second = list_problems(tmp_path, cache)
    assert "FROM_THE_CACHE" in second.stdout
    assert "problem facts: 3 of 4 from the cache" in second.stderr


def test_changed_file_is_computed_again(tmp_path):
    problem = tmp_path / "level1" / "1_AddReLU.py"
    problem.parent.mkdir()
    problem.write_text((PROBLEMS / "level1" / "1_AddReLU.py").read_text())
    facts, _ = facts_cache.facts_of_files([str(problem)], tmp_path / "cache")
    problem.write_text(problem.read_text().replace("torch.rand(256, 1024)", "torch.rand(8, 4)"))
    again, cached = facts_cache.facts_of_files([str(problem)], tmp_path / "cache")
    assert cached == 0 and again[str(problem)].inputs == ("float32[8, 4]", "float32[8, 4]")
