"""Golden-file tests of the three result files, and reading results back.

The golden files under tests/golden/ are the exact expected output for the hand-built
run below. After an intended change to a writer, rewrite them with
    KBENCH_UPDATE_GOLDEN=1 python -m pytest tests/report/test_report.py
and read the diff before committing it.
"""
import dataclasses
import json
import os
from pathlib import Path

import pandas as pd
import pytest

import harness
from harness.report import write as report
from harness.report.gate import GatePolicy
from harness.records import CheckResult, Flag, RunInfo, RunResults, SideTiming, Status, TaskResult, Timing, UserError

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
UPDATE = os.environ.get("KBENCH_UPDATE_GOLDEN") == "1"


def _timing(ref_ms: float, sol_ms: float, ci: tuple[float, float], n: int = 40, clock: str = "cuda_burst") -> Timing:
    return Timing(
        # The host's time to queue a call (synthetic): the report shows it beside the device time, except on
        # the CPU clock, which cannot tell the two apart.
        ref=SideTiming(median_ms=ref_ms, iqr_ms=ref_ms * 0.01, n=n, samples_ms=(ref_ms,) * 3, clock=clock,
                       host_ms=0.03 if clock != "cpu_clock" else None),
        sol=SideTiming(median_ms=sol_ms, iqr_ms=sol_ms * 0.02, n=n, samples_ms=(sol_ms,) * 3, clock=clock,
                       host_ms=0.045 if clock != "cpu_clock" else None),
        speedup=ref_ms / sol_ms,
        speedup_ci=ci,
        clock=clock,
        stop_reason="converged",
        calls_per_batch=8 if clock == "cuda_burst" else 400,
        fixed_ms=0.11,
        ref_fixed_ms=0.03,
        floor_ms=sol_ms * 0.9,  # 90% of floor
        bytes_moved=int(sol_ms * 0.9 * 3e9),  # at 3000 GB/s: 2700 GB/s achieved
    )


def _check(err: float | None) -> CheckResult:
    return CheckResult(passed=err is not None and err < 1e-4, message="", trials=6, rel_l2_err_fp64=err)


def _ok(problem, sset, ref_ms, sol_ms, ci, flags=(), n=40, seconds=10.0, clock="cuda_burst") -> TaskResult:
    return TaskResult(
        problem=problem, solution_set=sset, solution_path=f"solutions/{sset}/{problem}.py", status=Status.OK,
        message="", flags=tuple(flags), ref_ms=ref_ms, sol_ms=sol_ms, speedup=ref_ms / sol_ms, phase="done",
        seconds=seconds, check=_check(2e-7), timing=_timing(ref_ms, sol_ms, ci, n, clock),
    )


def golden_run() -> RunResults:
    """Two sets over five problems, with a result of each kind a report must show."""
    info = RunInfo(
        run_id="20250102-030405", kbench_version="0.1.0", device="NVIDIA H100 80GB HBM3", torch_version="2.13.0",
        cuda_version="12.8",
        options={"trials": 5, "seed": 42, "device": "cuda", "time_budget": 10.0},
        started="2025-01-02T03:04:05+00:00", finished=None,
        unmatched=("solutions/stray.py: a solution file must sit in a set folder: <set>/<level>/<problem>.py",),
    )
    results = (
        _ok("level1/23_Softmax", "claude", 8.64, 4.8, (1.78, 1.82), seconds=21.456),
        _ok("level1/23_Softmax", "gpt", 8.64, 9.6, (0.88, 0.92), flags=[Flag.NOISY]),
        _ok("level1/95_CrossEntropyLoss", "claude", 0.474, 0.158, (2.9, 3.1), flags=[Flag.BELOW_ROOFLINE],
            clock="cuda_graph"),
        TaskResult(
            problem="level1/95_CrossEntropyLoss", solution_set="gpt",
            solution_path="solutions/gpt/level1/95_CrossEntropyLoss.py", status=Status.INCORRECT,
            message="output shape [1] vs reference [] | trial 1", phase="check", seconds=4.2, check=_check(0.5),
            log_path="results/20250102-030405/logs/gpt/level1_95_CrossEntropyLoss__95_CrossEntropyLoss.log",
        ),
        TaskResult(
            problem="level1/98_KLDivLoss", solution_set="gpt", solution_path="solutions/gpt/level1/98_KLDivLoss.py",
            status=Status.BUILD_ERROR, message='kernel.cu(12): error: identifier "x" is undefined', phase="build",
            seconds=30.0, log_path="/ci/ws/results/20250102-030405/logs/gpt/level1_98_KLDivLoss__98_KLDivLoss.log",
        ),
        TaskResult(
            problem="level1/100_HingeLoss", solution_set="claude",
            solution_path="solutions/claude/level1/100_HingeLoss.py", status=Status.OK, message="",
            flags=(Flag.NO_CUSTOM_KERNEL,), phase="done", seconds=3.0, check=_check(1e-7),
        ),  # correct, timing not run (--no-timing)
        TaskResult(
            problem="level1/100_HingeLoss", solution_set="gpt", solution_path="solutions/gpt/level1/100_HingeLoss.py",
            status=Status.TIMEOUT, message="no result after 300 s (--timeout) during check; process group killed",
            phase="check", seconds=300.0,
        ),
        # a 5 us kernel: times read in the unit that fits (5.00 us, not 0.0050 ms)
        _ok("level2/1_Conv2d_ReLU_BiasAdd", "gpt", 0.0125, 0.005, (2.4, 2.6), flags=[Flag.TAMPERING]),
    )
    return RunResults(info, results)


def check_golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if UPDATE:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return
    assert path.is_file(), f"{path} is missing: run with KBENCH_UPDATE_GOLDEN=1 once"
    assert text == path.read_text(), f"{name} differs from {path}; if intended, rerun with KBENCH_UPDATE_GOLDEN=1"


@pytest.fixture
def written(tmp_path) -> Path:
    report.write_all(golden_run(), tmp_path, GatePolicy())
    return tmp_path


@pytest.mark.parametrize("name", ["report.md", "results.csv", "results.json"])
def test_golden_files(written, name):
    check_golden(name, (written / name).read_text())


def test_report_md_says_what_a_reader_needs(written):
    md = (written / "report.md").read_text()
    assert "not finished" in md  # a cut-short run says so
    assert "## Per solution set" in md  # two sets compared side by side
    assert "solutions/stray.py" in md  # unmatched files are shown
    # 3 of 8 pass: the untimed one included; the below_roofline and tampering
    # oks fail the default flag policy and are no wins
    assert "| fast_0 | 37.5% |" in md
    assert "| fast_1 | 12.5% |" in md  # only softmax/claude at 1.8x
    assert "| geomean speedup (correct tasks) | 1.273x (n=2) |" in md  # sqrt(1.8 * 0.9)
    assert "output shape [1] vs reference [] | trial 1" in md  # failure list keeps the message whole
    # which clock timed each task: a column when they differ, and the counts
    assert "| 2.900-3.100 | cuda_graph | fail |" in md
    assert "Timed by: cuda_burst (3 tasks), cuda_graph (1 task)." in md
    assert "CUDA events the judge records around its batch" in md
    assert "| floor | % of floor | GB/s |" in md and "| 90 | 2700 |" in md  # roofline columns
    # a solution column, and times in the unit that fits
    assert "| level2/1_Conv2d_ReLU_BiasAdd | gpt | 1_Conv2d_ReLU_BiasAdd.py | ok | tampering | 12.50 us | 5.00 us |" in md
    assert "| level1/23_Softmax | claude | 23_Softmax.py | ok |  | 8.640 ms | 4.800 ms |" in md
    assert "A timed batch's fixed cost, subtracted before dividing by its calls: 110 us for the solution's" in md
    assert "vs reference [] \\| trial 1" not in md.split("## Failures and flags")[0]  # not in a table at all
    # a flag on a correct task has no message: no dangling colon
    assert "(`solutions/gpt/level1/23_Softmax.py`)\n" in md


def test_a_finished_run_says_when(tmp_path):
    run = golden_run()
    run = RunResults(RunInfo(**{**run.run.__dict__, "finished": "2025-01-02T04:00:00+00:00"}), run.results)
    md = report.render_markdown(run, GatePolicy())
    assert "finished 2025-01-02T04:00:00+00:00" in md and "not finished" not in md


def test_single_set_has_no_per_set_table():
    run = golden_run()
    run = RunResults(run.run, tuple(r for r in run.results if r.solution_set == "gpt"))
    assert "## Per solution set" not in report.render_markdown(run, GatePolicy())


def test_empty_run_renders():
    run = RunResults(golden_run().run, ())
    md = report.render_markdown(run, GatePolicy())
    assert "| total | 0 |" in md and "## Failures and flags" not in md
    assert "| geomean speedup (correct tasks) | n/a (n=0) |" in md
    assert report.table(run, GatePolicy()).columns.tolist() == report.CSV_COLUMNS


def test_verdict_column_follows_the_policy(written):
    df = pd.read_csv(written / "results.csv")
    by_flag = dict(zip(df["solution_path"], df["verdict"]))
    assert by_flag["solutions/claude/level1/95_CrossEntropyLoss.py"] == "fail"  # below_roofline fails by default
    relaxed = report.table(golden_run(), GatePolicy(fail_flags=frozenset()))
    assert dict(zip(relaxed["solution_path"], relaxed["verdict"]))["solutions/claude/level1/95_CrossEntropyLoss.py"] == "pass"


def test_results_csv_has_one_row_per_task_and_the_documented_columns(written):
    df = pd.read_csv(written / "results.csv")
    assert df.columns.tolist() == report.CSV_COLUMNS
    assert len(df) == len(golden_run().results)


def test_write_json_loads_back_equal(written):
    assert report.load_run(written / "results.json") == golden_run()


def test_load_run_on_a_folder(written):
    assert report.load_run(written) == golden_run()


def test_atomic_write_leaves_no_temporary_file(written):
    assert sorted(p.name for p in written.iterdir()) == ["report.md", "results.csv", "results.json"]


def test_load_run_missing_file_names_the_path(tmp_path):
    missing = tmp_path / "nope" / "results.json"
    with pytest.raises(UserError, match="no results file") as e:
        report.load_run(missing)
    assert str(missing) in str(e.value)


def test_load_run_folder_without_results_names_the_path(tmp_path):
    with pytest.raises(UserError) as e:
        report.load_run(tmp_path)
    assert str(tmp_path / "results.json") in str(e.value)


def test_load_run_invalid_json_names_the_path(tmp_path):
    bad = tmp_path / "results.json"
    bad.write_text('{"schema_version": 1, "run": ')  # a file cut short
    with pytest.raises(UserError) as e:
        report.load_run(bad)
    msg = str(e.value)
    assert str(bad) in msg and "not valid JSON" in msg and "\n" not in msg


def test_load_results_gives_a_dataframe_per_task(written):
    for path in (written, written / "results.json", str(written)):
        df = harness.load_results(path)
        assert isinstance(df, pd.DataFrame)
        assert len(df) == 8
        assert df.columns.tolist() == report.CSV_COLUMNS
    assert df["status"].tolist().count("ok") == 5
    row = df[df["solution_path"] == "solutions/claude/level1/23_Softmax.py"].iloc[0]
    assert row["speedup"] == pytest.approx(1.8) and row["verdict"] == "pass" and row["samples"] == 40


# ---- several candidates per problem: pass@k ----------------------------------------

def test_pass_at_k_matches_counting_every_draw():
    import itertools
    import math

    from harness.shared.stats import pass_at_k

    for n in range(1, 8):
        for c in range(n + 1):
            for k in range(1, n + 1):
                draws = list(itertools.combinations([True] * c + [False] * (n - c), k))
                assert pass_at_k(n, c, k) == pytest.approx(sum(any(d) for d in draws) / len(draws)), (n, c, k)
    assert pass_at_k(12, 3, 5) == pytest.approx(1 - math.comb(9, 5) / math.comb(12, 5))
    assert pass_at_k(200, 1, 1) == pytest.approx(1 / 200) and pass_at_k(200, 0, 100) == 0.0


@pytest.mark.parametrize("n,c,k", [(5, 6, 1), (5, -1, 1), (5, 2, 0), (5, 2, 6)])
def test_pass_at_k_rejects_impossible_counts(n, c, k):
    from harness.shared.stats import pass_at_k

    with pytest.raises(ValueError):
        pass_at_k(n, c, k)


def candidates_run() -> RunResults:
    """Set `model` samples 12 candidates for softmax (3 correct, one more that tampers)
    and 4 for hinge (2 correct); set `team` has one kernel per problem."""
    def cand(problem, i, speedup=None, status=Status.OK, flags=()):
        if speedup is None:
            r = TaskResult(problem=problem, solution_set="model", solution_path="", status=status, message="failed")
        else:
            r = _ok(problem, "model", 1.0, 1.0 / speedup, (speedup * 0.99, speedup * 1.01), flags=flags)
        return dataclasses.replace(r, solution_path=f"solutions/model/{problem}/{i}.py")

    softmax, hinge = "level1/23_Softmax", "level1/100_HingeLoss"
    results = [cand(softmax, i, s) for i, s in enumerate((1.2, 0.8, 2.0))]
    results += [cand(softmax, 3, 5.0, flags=[Flag.TAMPERING])]  # fastest, but no win
    results += [cand(softmax, i, status=Status.INCORRECT) for i in range(4, 12)]
    results += [_ok(softmax, "team", 8.64, 4.8, (1.78, 1.82))]  # a run orders tasks by problem, then set
    results += [cand(hinge, 0, 0.5), cand(hinge, 1, 0.7), cand(hinge, 2, status=Status.BUILD_ERROR),
                cand(hinge, 3, status=Status.TIMEOUT)]
    return RunResults(golden_run().run, tuple(results))


def test_several_candidates_section():
    md = report.render_markdown(candidates_run(), GatePolicy())
    section = md.split("## Several candidates per problem\n")[1].split("\n## ")[0]
    rows = [line for line in section.splitlines() if line.startswith("| level")]
    assert rows == [
        # pass@5 = 1 - C(9,5)/C(12,5) = 1 - 126/792; pass@10 = 1: fewer than 10 are wrong
        "| level1/23_Softmax | model | 12 | 3 | 25.0% | 84.1% | 100.0% | 2.000 |",
        "| level1/23_Softmax | team | 1 | 1 | 100.0% |  |  | 1.800 |",  # k > n: empty
        "| level1/100_HingeLoss | model | 4 | 2 | 50.0% |  |  | 0.700 |",
    ]
    relaxed = report.render_markdown(candidates_run(), GatePolicy(fail_flags=frozenset()))
    assert "| level1/23_Softmax | model | 12 | 4 | 33.3% |" in relaxed and "| 5.000 |" in relaxed  # tampering counts


def test_no_candidates_section_with_one_candidate_per_problem():
    assert "Several candidates" not in report.render_markdown(golden_run(), GatePolicy())


# ---- a problem file that failed ------------------------------------------------------

def problem_error(path: str, sset: str = "model") -> TaskResult:
    return TaskResult(problem="level1/98_KLDivLoss", solution_set=sset, solution_path=path, status=Status.PROBLEM_ERROR,
                      message="problem file problems/level1/98_KLDivLoss.py, line 21: get_inputs() raised ValueError: "
                              "bad shape; fix the problem file (the solution was not judged)", phase="check")


def test_a_problem_that_failed_is_named_once_as_the_problems():
    run = golden_run()
    run = RunResults(run.run, run.results + tuple(problem_error(f"solutions/model/level1/98_KLDivLoss/{i}.py")
                                                  for i in range(3)))
    md = report.render_markdown(run, GatePolicy())
    assert "| problem_error | 3 |" in md  # counted apart from the solutions' failures
    section = md.split("## Problem files that failed\n")[1].split("\n## ")[0]
    assert "were not judged" in section and "--resume" in section
    rows = [line for line in section.splitlines() if line.startswith("| level1")]
    assert rows == ["| level1/98_KLDivLoss | 3 | problem file problems/level1/98_KLDivLoss.py, line 21: get_inputs() "
                    "raised ValueError: bad shape; fix the problem file (the solution was not judged) |"]
    assert "## Problem files that failed" not in report.render_markdown(golden_run(), GatePolicy())


def test_a_cpu_report_describes_the_cpu_clock_not_cuda_events():
    run = RunResults(dataclasses.replace(golden_run().run, device="cpu"), (
        _ok("level1/1_A", "m", 2.0, 1.0, (1.9, 2.1), clock="cpu_clock"),
        _ok("level1/2_B", "m", 3.0, 1.0, (2.9, 3.1), clock="cpu_clock"),
    ))
    md = report.render_markdown(run, GatePolicy())
    assert "the CPU time each side's processes used for a batch of calls" in md
    assert "CUDA" not in md.split("## Results", 1)[1] and "host_bound" not in md  # no GPU words on a CPU run
    gpu = report.render_markdown(golden_run(), GatePolicy())
    assert "CUDA events the judge records around its batch" in gpu and "CPU time each side" not in gpu


def test_failure_lines_link_the_tasks_log_inside_the_run_folder():
    md = report.render_markdown(golden_run(), GatePolicy())
    line = next(ln for ln in md.splitlines() if ln.startswith("- **build_error**"))
    # relative to report.md, whatever folder the run was written from (an absolute CI path here)
    assert line.endswith("(log: [logs/gpt/level1_98_KLDivLoss__98_KLDivLoss.log]"
                         "(logs/gpt/level1_98_KLDivLoss__98_KLDivLoss.log))")
    assert report.log_link("/elsewhere/task.log") == "`/elsewhere/task.log`"


def test_an_ok_task_that_fails_the_gate_is_listed_with_the_reason():
    """--min-speedup fails an ok task with no flag: report.md says so, in the failures list."""
    md = report.render_markdown(golden_run(), GatePolicy(min_speedup=2.0))
    line = next(ln for ln in md.splitlines() if ln.startswith("- **ok**") and "`level1/23_Softmax` in set `claude`" in ln)
    assert line.endswith("fails the gate: speedup 1.80x < --min-speedup 2.")
