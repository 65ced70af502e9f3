"""`kbench compare BASE NEW`: a mark per task, a table on stdout, a summary line on
stderr, and an exit code that is the verdict."""
import dataclasses
import io
import json

import pandas as pd
import pytest
from click.testing import CliRunner

import cli
from harness.report import compare, write as report
from harness.report.gate import GatePolicy
from harness.records import RunResults, Status, TaskResult
from test_report import _ok, check_golden, golden_run


def at(r: TaskResult, root: str) -> TaskResult:
    return dataclasses.replace(r, solution_path=f"{root}/{r.solution_path}")


def failed(r: TaskResult, status: Status, message: str) -> TaskResult:
    return dataclasses.replace(r, status=status, message=message, speedup=None, ref_ms=None, sol_ms=None, timing=None)


def base_and_new() -> tuple[RunResults, RunResults]:
    """The report's golden run as BASE (ran in a CI workspace), and a NEW run from a
    checkout elsewhere in which every mark occurs once."""
    base = golden_run()
    g = {(r.problem, r.solution_set): r for r in base.results}
    square, add, mul = (_ok(f"level1/{p}", "claude", 1.0, 1.0, (0.99, 1.01)) for p in ("1_Square", "2_Add", "3_Mul"))
    base = RunResults(base.run, tuple(at(r, "/ci/ws") for r in base.results + (square, add, mul)))
    new = (
        _ok("level1/23_Softmax", "claude", 8.64, 5.4, (1.58, 1.62)),  # 1.8 -> 1.6: slower by 11%
        _ok("level1/23_Softmax", "gpt", 8.64, 9.1, (0.90, 1.00)),  # intervals overlap: not significant
        dataclasses.replace(g["level1/95_CrossEntropyLoss", "claude"], flags=()),  # no longer below the floor: fixed
        g["level1/95_CrossEntropyLoss", "gpt"],  # incorrect again: still failing
        # 98_KLDivLoss/gpt gone: removed
        g["level1/100_HingeLoss", "claude"],  # untimed on both sides
        _ok("level1/100_HingeLoss", "gpt", 10.54, 5.27, (1.9, 2.1)),  # was a timeout: fixed
        g["level2/1_Conv2d_ReLU_BiasAdd", "gpt"],  # tampering again: still failing
        _ok("level1/98_KLDivLoss", "claude", 3.92, 0.8, (4.8, 5.0)),  # new
        failed(square, Status.RUNTIME_ERROR, "CUDA error: an illegal memory access was encountered"),  # newly failing
        _ok("level1/2_Add", "claude", 1.0, 0.66, (1.45, 1.55)),  # faster
        _ok("level1/3_Mul", "claude", 1.0, 1.03, (0.96, 0.98)),  # slower by 3%: within the threshold
    )
    return base, RunResults(dataclasses.replace(golden_run().run, run_id="new"), new)


def marks(cmp: compare.Comparison) -> dict[tuple[str, str], str]:
    return {(r.problem, r.solution_set): r.mark for r in cmp.rows}


def test_every_mark():
    cmp = compare.compare(*base_and_new(), GatePolicy())
    assert marks(cmp) == {
        ("level1/23_Softmax", "claude"): "slower",
        ("level1/23_Softmax", "gpt"): "not significant",
        ("level1/95_CrossEntropyLoss", "claude"): "fixed",
        ("level1/95_CrossEntropyLoss", "gpt"): "still failing",
        ("level1/98_KLDivLoss", "gpt"): "removed",
        ("level1/100_HingeLoss", "claude"): "untimed",
        ("level1/100_HingeLoss", "gpt"): "fixed",
        ("level2/1_Conv2d_ReLU_BiasAdd", "gpt"): "still failing",
        ("level1/98_KLDivLoss", "claude"): "new",
        ("level1/1_Square", "claude"): "newly failing",
        ("level1/2_Add", "claude"): "faster",
        ("level1/3_Mul", "claude"): "slower",
    }
    assert [r.mark for r in cmp.rows][:3] == ["newly failing", "slower", "slower"]  # worst first
    fails = {(r.problem, r.solution_set) for r in cmp.rows if r.fails}
    assert fails == {("level1/1_Square", "claude"), ("level1/23_Softmax", "claude")}  # 3_Mul is 3% < 5%
    assert cmp.exit_code == 1


def test_golden_markdown():
    base, new = base_and_new()
    check_golden("compare.md", compare.render_markdown(compare.compare(base, new, GatePolicy()), GatePolicy()))


def test_a_run_against_itself_changes_nothing():
    base, _ = base_and_new()
    cmp = compare.compare(base, base, GatePolicy())
    assert set(marks(cmp).values()) == {"not significant", "still failing", "untimed"}
    assert cmp.exit_code == 0 and all(r.change in (None, 0.0) for r in cmp.rows)


def test_paths_match_exactly_before_ignoring_the_root():
    """Two candidates of one problem in one set must not be paired crosswise."""
    a = _ok("level1/23_Softmax", "m", 1.0, 1.0, (0.99, 1.01))
    b = _ok("level1/23_Softmax", "m", 1.0, 0.5, (1.9, 2.1))
    a = dataclasses.replace(a, solution_path="/x/solutions/m/level1/23_Softmax/a.py")
    b = dataclasses.replace(b, solution_path="/x/solutions/m/level1/23_Softmax/b.py")
    run = RunResults(golden_run().run, (a, b))
    moved = RunResults(run.run, (dataclasses.replace(b, solution_path="/y/solutions/m/level1/23_Softmax/b.py"),
                                 dataclasses.replace(a, solution_path="/y/solutions/m/level1/23_Softmax/a.py")))
    cmp = compare.compare(run, moved, GatePolicy())
    assert {r.candidate: r.mark for r in cmp.rows} == {"level1/23_Softmax/a.py": "not significant",
                                                       "level1/23_Softmax/b.py": "not significant"}


def test_threshold_is_a_fraction_of_the_base_speedup():
    base, new = base_and_new()
    rows = {(r.problem, r.solution_set): r for r in compare.compare(base, new, GatePolicy(), threshold=0.2).rows}
    softmax = rows["level1/23_Softmax", "claude"]
    assert softmax.mark == "slower" and not softmax.fails  # 11% < 20%
    assert softmax.change == pytest.approx(1.6 / 1.8 - 1)
    assert compare.compare(base, new, GatePolicy(), threshold=0.2).exit_code == 1  # 1_Square still newly fails
    rows = {(r.problem, r.solution_set): r for r in compare.compare(base, new, GatePolicy(), threshold=0.02).rows}
    assert rows["level1/3_Mul", "claude"].fails  # 3% > 2%


def test_fail_on_applies_to_both_runs():
    base, new = base_and_new()
    relaxed = marks(compare.compare(base, new, GatePolicy(fail_flags=frozenset())))
    # below_roofline no longer fails: it passed in BASE too, and its speedup did not move
    assert relaxed["level1/95_CrossEntropyLoss", "claude"] == "not significant"
    assert relaxed["level2/1_Conv2d_ReLU_BiasAdd", "gpt"] == "not significant"


def test_summary_line_counts_and_names_the_exit():
    base, new = base_and_new()
    line = compare.summary_line(compare.compare(base, new, GatePolicy()))
    assert line.startswith("compare: 12 tasks: 1 newly failing, 2 slower, 2 fixed, 1 faster, 1 not significant, "
                           "2 still failing, 1 untimed, 1 new, 1 removed, ")
    assert "1 slower by more than 5%" in line and line.endswith("exit 1")
    other = RunResults(dataclasses.replace(new.run, device="NVIDIA A100"), new.results)
    assert "BASE ran on NVIDIA H100 80GB HBM3, NEW on NVIDIA A100" in compare.summary_line(
        compare.compare(base, other, GatePolicy()))


# ---- the command ------------------------------------------------------------------

@pytest.fixture
def files(tmp_path):
    base, new = base_and_new()
    report.write_json(base, tmp_path / "base" / "results.json")
    report.write_json(new, tmp_path / "new" / "results.json")
    return tmp_path / "base" / "results.json", tmp_path / "new"


def invoke(*args):
    return CliRunner().invoke(cli.main, ["compare", *map(str, args)])


def test_cli_prints_the_table_and_exits_1(files):
    res = invoke(*files)
    assert res.exit_code == 1, res.output
    base, new = base_and_new()
    assert res.stdout == compare.render_markdown(compare.compare(base, new, GatePolicy()), GatePolicy())
    assert res.stderr.strip().startswith("compare: 12 tasks") and res.stderr.strip().endswith("exit 1")


def test_cli_csv(files):
    res = invoke(*files, "--format", "csv")
    df = pd.read_csv(io.StringIO(res.stdout), keep_default_na=False)
    assert df.columns.tolist() == compare.COLUMNS and len(df) == 12
    assert df[df["problem"] == "level1/1_Square"].iloc[0]["mark"] == "newly failing"


def test_cli_exits_0_when_nothing_got_worse(files, tmp_path):
    base_path, _ = files
    assert invoke(base_path, base_path).exit_code == 0
    base, new = base_and_new()
    better = RunResults(new.run, tuple(r for r in new.results if r.problem not in ("level1/1_Square", "level1/23_Softmax")))
    report.write_json(better, tmp_path / "better.json")
    assert invoke(base_path, tmp_path / "better.json").exit_code == 0


def test_cli_threshold(files, tmp_path):
    base, new = base_and_new()
    only_slower = RunResults(new.run, tuple(r for r in new.results if r.problem != "level1/1_Square"))
    report.write_json(only_slower, tmp_path / "slower.json")
    assert invoke(files[0], tmp_path / "slower.json").exit_code == 1  # softmax/claude 11% slower > 5%
    assert invoke(files[0], tmp_path / "slower.json", "--threshold", "0.2").exit_code == 0
    assert invoke(*files, "--threshold", "0.5").exit_code == 1  # a newly failing task fails at any threshold


@pytest.mark.parametrize("args", [["--threshold", "-0.1"], ["--threshold", "x"], ["--format", "html"]])
def test_cli_bad_options_exit_2(files, args):
    assert invoke(*files, *args).exit_code == 2


def test_cli_missing_file_exits_2_with_one_line(files, tmp_path):
    res = invoke(files[0], tmp_path / "nope.json")
    assert res.exit_code == 2 and res.stdout == ""
    assert res.stderr.startswith("error: no results file") and str(tmp_path / "nope.json") in res.stderr


def _with_problem(r: TaskResult, sha: str) -> TaskResult:
    return dataclasses.replace(r, problem_sha256=sha)


def test_changed_problem_file_is_not_comparable():
    """A task whose problem file changed between the runs is never faster, slower,
    fixed or newly failing: the runs measured different things."""
    base_ok = _ok("level1/2_Add", "claude", 1.0, 1.0, (0.99, 1.01))
    faster = _ok("level1/2_Add", "claude", 1.0, 0.5, (1.9, 2.1))
    slower = _ok("level1/3_Mul", "claude", 1.0, 2.0, (0.45, 0.55))
    base_mul = _ok("level1/3_Mul", "claude", 1.0, 1.0, (0.99, 1.01))
    broken = failed(_ok("level1/4_Sub", "claude", 1.0, 1.0, (0.99, 1.01)), Status.INCORRECT, "wrong")
    base_sub = _ok("level1/4_Sub", "claude", 1.0, 1.0, (0.99, 1.01))
    info = golden_run().run
    base = RunResults(info, (_with_problem(base_ok, "aa"), _with_problem(base_mul, "bb"), _with_problem(base_sub, "cc")))
    new = RunResults(info, (_with_problem(faster, "a2"), _with_problem(slower, "b2"), _with_problem(broken, "c2")))
    cmp = compare.compare(base, new, GatePolicy())
    assert set(marks(cmp).values()) == {"not comparable"}
    assert cmp.exit_code == 0 and not any(r.fails for r in cmp.rows) and all(r.change is None for r in cmp.rows)
    md = compare.render_markdown(cmp, GatePolicy())
    assert md.count("not comparable (problem file changed)") == 3
    assert "3 not comparable" in compare.summary_line(cmp)


def test_same_or_unrecorded_problem_hash_compares_as_before():
    base_ok = _ok("level1/2_Add", "claude", 1.0, 1.0, (0.99, 1.01))
    faster = _ok("level1/2_Add", "claude", 1.0, 0.5, (1.9, 2.1))
    info = golden_run().run
    for b_sha, n_sha in (("aa", "aa"), ("", "a2"), ("aa", "")):
        cmp = compare.compare(RunResults(info, (_with_problem(base_ok, b_sha),)),
                              RunResults(info, (_with_problem(faster, n_sha),)), GatePolicy())
        assert marks(cmp) == {("level1/2_Add", "claude"): "faster"}, (b_sha, n_sha)


def test_problem_sha256_round_trips_and_old_files_read(tmp_path):
    run = RunResults(golden_run().run, (_with_problem(golden_run().results[0], "ab" * 32),))
    report.write_json(run, tmp_path / "results.json")
    assert report.load_run(tmp_path).results[0].problem_sha256 == "ab" * 32
    assert report.load_run(tmp_path).results[0] == run.results[0]
    data = json.loads((tmp_path / "results.json").read_text())
    del data["results"][0]["problem_sha256"]  # a file written before the field existed
    (tmp_path / "results.json").write_text(json.dumps(data))
    assert report.load_run(tmp_path).results[0].problem_sha256 == ""


def test_a_problem_that_fails_in_new_is_not_called_the_solutions_failure():
    """NEW never judged the solution: "problem error", failing the exit code only where
    BASE had shown the kernel to pass (CI must not wave through a kernel it cannot check)."""
    from test_report import problem_error

    base = golden_run()
    passed, failed = base.results[0], base.results[3]  # softmax/claude ok; cross entropy/gpt incorrect
    broken = [dataclasses.replace(problem_error(r.solution_path, r.solution_set), problem=r.problem)
              for r in (passed, failed)]
    cmp = compare.compare(RunResults(base.run, (passed, failed)), RunResults(base.run, tuple(broken)), GatePolicy())
    assert [(r.mark, r.fails) for r in cmp.rows] == [("problem error", True), ("problem error", False)]
    assert cmp.exit_code == 1
    md = compare.render_markdown(cmp, GatePolicy())
    assert md.count("problem error (NEW's problem file failed)") == 2 and "newly failing" not in md
    assert "2 problem error" in compare.summary_line(cmp)


def _timed(speedup: float, ci) -> TaskResult:
    r = _ok("level1/1_Square", "claude", 1.0, 1.0 / speedup, (0.0, 0.0))
    return dataclasses.replace(r, speedup=speedup, timing=dataclasses.replace(r.timing, speedup=speedup, speedup_ci=ci))


def test_faster_or_slower_only_where_the_two_intervals_separate():
    """Over 2000 random pairs of runs (wide and narrow intervals, overlapping, touching and
    apart): a task is faster or slower exactly when its intervals do not overlap, and
    the direction is the intervals' own."""
    import numpy as np

    rng = np.random.default_rng(26)
    seen = set()
    for _ in range(2000):
        sides = []
        for _ in range(2):
            s = float(rng.uniform(0.5, 2.0))
            lo, hi = s * (1 - float(rng.uniform(0, 0.3))), s * (1 + float(rng.uniform(0, 0.3)))
            sides.append(_timed(s, (lo, hi)))
        b, n = sides
        mark, _, _ = compare._mark(b, n, GatePolicy(), 0.05)
        (b_lo, b_hi), (n_lo, n_hi) = b.timing.speedup_ci, n.timing.speedup_ci
        separated = n_lo > b_hi or n_hi < b_lo
        assert (mark in ("faster", "slower")) == separated, (mark, b.timing.speedup_ci, n.timing.speedup_ci)
        if separated:
            assert mark == ("faster" if n_lo > b_hi else "slower")
        seen.add(mark)
    assert seen == {"faster", "slower", "not significant"}


@pytest.mark.parametrize("ci", [(float("nan"), float("nan")), (1.2, 0.8), None, (float("-inf"), 5.0), (0.0, 0.0)])
def test_an_interval_that_cannot_be_read_never_separates(ci):
    """A NaN, inverted, missing or empty interval is no evidence of a change, however far apart the speedups."""
    base, new = _timed(1.0, (0.99, 1.01)), _timed(3.0, ci)
    for b, n in ((base, new), (new, base)):
        assert compare._mark(b, n, GatePolicy(), 0.05)[0] == "not significant"


def test_an_interval_that_misses_its_speedup_is_widened_to_it():
    """Speedup 1.5 with an interval [1.0, 1.1] (a bootstrap of few samples): the claim is at
    most as strong as [1.0, 1.5], which overlaps a base of [1.4, 1.6]."""
    assert compare._mark(_timed(1.5, (1.4, 1.6)), _timed(1.5, (1.0, 1.1)), GatePolicy(), 0.05)[0] == "not significant"
    assert compare.interval(_timed(1.5, (1.0, 1.1))) == (1.0, 1.5)
