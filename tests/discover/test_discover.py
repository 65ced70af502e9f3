"""Discovery turns folders into tasks. Users rely on it pairing every solution with the
right problem, in every layout they bring, and on it never losing a file silently."""
from pathlib import Path

import pytest

from harness.discover.folders import discover, find_problems
from harness.records import UserError


def touch(root: Path, *rels: str) -> None:
    for rel in rels:
        f = root / rel
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text("# test file\n")


@pytest.fixture
def problems(tmp_path) -> Path:
    root = tmp_path / "problems"
    touch(root, "level1/1_Add.py", "level1/2_Relu.py", "level1/10_Softmax.py", "level1/23_Softmax.py",
          "level2/1_Conv_ReLU.py", "level1/__init__.py", "level1/_helpers.py", "level1/notes.txt")
    return root


def names(problems_list) -> list[str]:
    return [p.name for p in problems_list]


def pairs(found) -> list[tuple[str, str, str]]:
    return [(t.problem, t.solution_set, Path(t.solution_path).name) for t in found.tasks]


def unmatched_names(found) -> dict[str, str]:
    return {Path(u.path).name: u.reason for u in found.unmatched}


# ---- problems ----------------------------------------------------------------

def test_problems_in_level_folders_naturally_sorted(problems):
    assert names(find_problems(problems)) == [
        "level1/1_Add", "level1/2_Relu", "level1/10_Softmax", "level1/23_Softmax", "level2/1_Conv_ReLU",
    ]


def test_problem_paths_point_at_the_files(problems):
    for p in find_problems(problems):
        assert Path(p.path).is_file()
        assert Path(p.path).stem == p.name.split("/")[1]


def test_private_and_non_python_files_are_not_problems(problems):
    found = names(find_problems(problems))
    assert not any("__init__" in n or "_helpers" in n or "notes" in n for n in found)


def test_single_level_folder_names_problems_by_the_folder(problems):
    assert names(find_problems(problems / "level1")) == [
        "level1/1_Add", "level1/2_Relu", "level1/10_Softmax", "level1/23_Softmax",
    ]


def test_missing_problems_folder_hints_at_a_close_name(tmp_path, problems):
    with pytest.raises(UserError) as e:
        discover(tmp_path / "problms", None)
    msg = str(e.value)
    assert "problms" in msg and "does not exist" in msg and "--problems" in msg
    assert "did you mean" in msg and str(problems) in msg


def test_missing_folder_without_close_name_has_no_hint(tmp_path, problems):
    with pytest.raises(UserError) as e:
        discover(tmp_path / "zzzzzz", None)
    assert "did you mean" not in str(e.value)


def test_problems_only_makes_no_tasks(problems):
    found = discover(problems, None)
    assert len(found.problems) == 5 and found.tasks == () and found.sets == () and found.unmatched == ()


# ---- solution sets -------------------------------------------------------------

def test_one_file_per_problem_in_each_set(tmp_path, problems):
    sols = tmp_path / "solutions"
    touch(sols, "teamA/level1/2_Relu.py", "teamA/level1/10_Softmax.py", "teamB/level1/2_Relu.py",
          "teamB/level2/1_Conv_ReLU.py")
    found = discover(problems, sols)
    assert found.sets == ("teamA", "teamB")
    # ordered by problem (natural), then set
    assert pairs(found) == [
        ("level1/2_Relu", "teamA", "2_Relu.py"),
        ("level1/2_Relu", "teamB", "2_Relu.py"),
        ("level1/10_Softmax", "teamA", "10_Softmax.py"),
        ("level2/1_Conv_ReLU", "teamB", "1_Conv_ReLU.py"),
    ]
    t = found.tasks[0]
    assert t.problem_path == str(problems / "level1" / "2_Relu.py")
    assert t.solution_path == str(sols / "teamA" / "level1" / "2_Relu.py")
    assert found.unmatched == ()


def test_several_candidates_for_one_problem(tmp_path, problems):
    sols = tmp_path / "solutions"
    touch(sols, "gen/level1/23_Softmax/a.py", "gen/level1/23_Softmax/b.py", "gen/level1/23_Softmax/_util.py")
    found = discover(problems, sols)
    assert pairs(found) == [("level1/23_Softmax", "gen", "a.py"), ("level1/23_Softmax", "gen", "b.py")]
    # each candidate is its own task, keyed by its path
    assert len({t.key for t in found.tasks}) == 2


def test_kernelbench_generations_in_a_set_folder(tmp_path, problems):
    sols = tmp_path / "solutions"
    touch(sols, "run7/level_1_problem_23_sample_0_kernel.py", "run7/level_1_problem_23_sample_1_kernel.py",
          "run7/level_2_problem_1_sample_0_kernel.py", "run7/nested/level_1_problem_2_sample_0_kernel.py")
    found = discover(problems, sols)
    assert found.sets == ("run7",)
    assert pairs(found) == [
        ("level1/2_Relu", "run7", "level_1_problem_2_sample_0_kernel.py"),
        ("level1/23_Softmax", "run7", "level_1_problem_23_sample_0_kernel.py"),
        ("level1/23_Softmax", "run7", "level_1_problem_23_sample_1_kernel.py"),
        ("level2/1_Conv_ReLU", "run7", "level_2_problem_1_sample_0_kernel.py"),
    ]


def test_kernelbench_generation_folder_is_one_set(tmp_path, problems):
    gen = tmp_path / "generations" / "gpt4_run"
    touch(gen, "level_1_problem_10_sample_0_kernel.py", "level_1_problem_1_sample_0_kernel.py")
    found = discover(problems, gen)
    assert found.sets == ("gpt4_run",)
    assert pairs(found) == [
        ("level1/1_Add", "gpt4_run", "level_1_problem_1_sample_0_kernel.py"),
        ("level1/10_Softmax", "gpt4_run", "level_1_problem_10_sample_0_kernel.py"),
    ]
    assert found.unmatched == ()


def test_kernelbench_generation_folder_given_as_dot_is_named(tmp_path, problems, monkeypatch):
    gen = tmp_path / "gpt4_run"
    touch(gen, "level_1_problem_1_sample_0_kernel.py")
    monkeypatch.chdir(gen)
    found = discover(problems, Path("."))
    assert found.sets == ("gpt4_run",)
    assert [t.solution_set for t in found.tasks] == ["gpt4_run"]


def test_kernelbench_number_with_no_problem_is_reported(tmp_path, problems):
    gen = tmp_path / "gen"
    touch(gen, "level_1_problem_99_sample_0_kernel.py", "level_3_problem_1_sample_0_kernel.py")
    found = discover(problems, gen)
    assert found.tasks == ()
    reasons = unmatched_names(found)
    assert "no problem numbered 99" in reasons["level_1_problem_99_sample_0_kernel.py"]
    assert "level1" in reasons["level_1_problem_99_sample_0_kernel.py"]
    assert "no problem numbered 1" in reasons["level_3_problem_1_sample_0_kernel.py"]
    assert "level3" in reasons["level_3_problem_1_sample_0_kernel.py"]


def test_unmatched_files_are_reported_with_reasons(tmp_path, problems):
    sols = tmp_path / "solutions"
    touch(sols,
          "teamA/level1/2_Relu.py",            # matches
          "teamA/level1/77_Nothing.py",        # no such problem
          "teamA/level9/1_Add.py",             # no such level
          "teamA/stray.py",                    # too shallow
          "teamA/level1/2_Relu/v1/deep.py",    # too deep
          "loose.py")                          # not in a set folder
    found = discover(problems, sols)
    assert pairs(found) == [("level1/2_Relu", "teamA", "2_Relu.py")]
    reasons = unmatched_names(found)
    assert set(reasons) == {"77_Nothing.py", "1_Add.py", "stray.py", "deep.py", "loose.py"}
    assert "no problem 'level1/77_Nothing'" in reasons["77_Nothing.py"]
    assert "no problem 'level9/1_Add'" in reasons["1_Add.py"]
    assert "<set>/<level>/<problem>.py" in reasons["stray.py"]
    assert "<set>/<level>/<problem>.py" in reasons["deep.py"]
    assert "set folder" in reasons["loose.py"]
    # full paths, so the user can find the file
    assert str(sols / "loose.py") in {u.path for u in found.unmatched}


def test_private_files_and_caches_in_sets_are_ignored(tmp_path, problems):
    sols = tmp_path / "solutions"
    touch(sols, "teamA/level1/2_Relu.py", "teamA/level1/__init__.py", "teamA/level1/_common.py",
          "teamA/level1/__pycache__/2_Relu.py", "teamA/level1/notes.md", "_scratch/level1/2_Relu.py",
          ".hidden/level1/2_Relu.py")
    found = discover(problems, sols)
    assert found.sets == ("teamA",)
    assert pairs(found) == [("level1/2_Relu", "teamA", "2_Relu.py")]
    assert found.unmatched == ()


def test_missing_solutions_folder_hints_at_a_close_name(tmp_path, problems):
    (tmp_path / "solutions").mkdir()
    with pytest.raises(UserError) as e:
        discover(problems, tmp_path / "solutons")
    msg = str(e.value)
    assert "--solutions" in msg and "solutons" in msg
    assert f"did you mean '{tmp_path / 'solutions'}'" in msg


# ---- filters -----------------------------------------------------------------

@pytest.fixture
def two_sets(tmp_path, problems) -> Path:
    sols = tmp_path / "solutions"
    touch(sols, "gpt_a/level1/10_Softmax.py", "gpt_a/level1/23_Softmax.py", "gpt_a/level1/1_Add.py",
          "claude/level1/23_Softmax.py", "claude/level2/1_Conv_ReLU.py")
    return sols


def test_problem_filter_substring(problems, two_sets):
    found = discover(problems, two_sets, problem_filters=("Softmax",))
    assert names(found.problems) == ["level1/10_Softmax", "level1/23_Softmax"]
    assert {t.problem for t in found.tasks} == {"level1/10_Softmax", "level1/23_Softmax"}
    assert len(found.tasks) == 3


def test_problem_filter_glob(problems, two_sets):
    found = discover(problems, two_sets, problem_filters=("level1/2*",))
    assert names(found.problems) == ["level1/2_Relu", "level1/23_Softmax"]
    assert [t.solution_set for t in found.tasks] == ["claude", "gpt_a"]


def test_glob_filter_must_match_the_whole_name(problems, two_sets):
    # a pattern with wildcards is a glob, not a substring: 'Soft*' matches no full name
    found = discover(problems, two_sets, problem_filters=("Soft*",))
    assert found.problems == () and found.tasks == ()


def test_several_problem_filters_are_a_union(problems, two_sets):
    found = discover(problems, two_sets, problem_filters=("1_Add", "level2/*"))
    assert names(found.problems) == ["level1/1_Add", "level2/1_Conv_ReLU"]
    assert [t.problem for t in found.tasks] == ["level1/1_Add", "level2/1_Conv_ReLU"]


def test_set_filter_substring_and_glob(problems, two_sets):
    found = discover(problems, two_sets, set_filters=("gpt",))
    assert found.sets == ("gpt_a",)
    assert {t.solution_set for t in found.tasks} == {"gpt_a"} and len(found.tasks) == 3
    found = discover(problems, two_sets, set_filters=("c*e",))
    assert found.sets == ("claude",)
    assert len(found.tasks) == 2


def test_problem_and_set_filters_combine(problems, two_sets):
    found = discover(problems, two_sets, problem_filters=("23_",), set_filters=("claude",))
    assert pairs(found) == [("level1/23_Softmax", "claude", "23_Softmax.py")]


# ---- --solution: one candidate among several -------------------------------------

def test_solution_file_selects_one_candidate_among_several(tmp_path, problems, monkeypatch):
    sols = tmp_path / "solutions"
    touch(sols, "m/level1/23_Softmax/a.py", "m/level1/23_Softmax/b.py", "m/level1/23_Softmax/c.py", "m/level1/1_Add.py")
    found = discover(problems, sols, solution_files=(sols / "m/level1/23_Softmax/b.py",))
    assert pairs(found) == [("level1/23_Softmax", "m", "b.py")]
    # a relative path, given twice, and the run's order whatever the order given
    monkeypatch.chdir(tmp_path)
    rel = Path("solutions/m/level1/23_Softmax/c.py")
    found = discover(problems, sols, solution_files=(rel, rel, sols / "m/level1/1_Add.py"))
    assert pairs(found) == [("level1/1_Add", "m", "1_Add.py"), ("level1/23_Softmax", "m", "c.py")]


def test_solution_file_left_out_by_a_filter_says_so(tmp_path, problems):
    sols = tmp_path / "solutions"
    touch(sols, "m/level1/23_Softmax/a.py")
    with pytest.raises(UserError, match="left out by -p or -s"):
        discover(problems, sols, ("Add",), (), (sols / "m/level1/23_Softmax/a.py",))


def test_problems_given_a_file_says_it_is_a_file(problems):
    with pytest.raises(UserError, match="is a file, not a folder; pass the folder that holds <level>/<name>.py"):
        find_problems(problems / "level1" / "1_Add.py")


def test_nothing_to_run_names_the_filter_and_what_exists(tmp_path, problems):
    from harness.discover.folders import why_nothing_to_run

    sols = tmp_path / "solutions"
    touch(sols, "m/level1/1_Add.py", "other/level1/2_Relu.py")
    found = discover(problems, sols, ("NoSuchThing",))
    msg = str(why_nothing_to_run(found, problems, sols, ("NoSuchThing",), ()))
    assert msg.startswith("-p NoSuchThing matched none of the 5 problems under")
    assert "level1/1_Add, level1/2_Relu, level1/10_Softmax, level1/23_Softmax, level2/1_Conv_ReLU" in msg
    found = discover(problems, sols, (), ("nope",))
    assert "-s nope matched none of the solution sets" in str(why_nothing_to_run(found, problems, sols, (), ("nope",)))
    assert "m, other" in str(why_nothing_to_run(found, problems, sols, (), ("nope",)))
