"""The run folder's store (results.jsonl): each finished task is appended as one line, so
saving stays cheap at 10,000 tasks; results.json and the other reports are written at the
start, the end and on the way out of a run cut short; a folder whose results.json was never
written is read back from its store. The pipeline runs here in-process with a fake executor
that finishes every task at once: only the saving is measured."""
import json
from concurrent.futures import Future
from pathlib import Path

import pytest
from click.testing import CliRunner

import cli
from harness.run import pipeline
from harness.report import write as report, store
from harness.run.executors import Finished
from harness.report.gate import GatePolicy
from harness.discover.folders import Discovery
from harness.records import (
    Options, Problem, RunResults, Source, Status, Task, TaskResult, TaskSpec, UserError, to_json_dict,
)
from test_report import golden_run


class FakeExecutor:
    """Finishes each task when it is submitted; `fail_at` (a 1-based count) raises there instead."""

    def __init__(self, fail_at: int | None = None, error: BaseException | None = None):
        self.fail_at, self.error, self.count = fail_at, error, 0

    def submit(self, spec, log_path=None) -> Future:
        self.count += 1
        fut: Future = Future()
        if self.count == self.fail_at:
            fut.set_exception(self.error)
        else:
            fut.set_result(Finished(TaskResult(spec.problem, spec.solution_set, spec.solution_source.path, Status.OK,
                                               "", phase="done", fingerprint=spec.fingerprint)))
        return fut

    def close(self, cancel: bool = False) -> None:
        pass


class Recorder:
    """A Reporter that keeps what it is told; `on_done` runs after each finished task."""

    def __init__(self, on_done=None):
        self.notes, self.done, self.on_done = [], [], on_done

    def discovered(self, discovery, todo, reused):
        self.todo, self.reused = todo, reused

    def build_started(self, count):
        pass

    def build_done(self, task, result):
        pass

    def task_started(self, task, index, total):
        pass

    def task_done(self, result):
        self.done.append(result)
        if self.on_done:
            self.on_done(result)

    def note(self, text):
        self.notes.append(text)

    def run_folder(self, path):
        self.out_dir = path

    def devices(self, text):
        self.notes.append(text)


def make_tasks(root: Path, count: int) -> tuple[Path, Path]:
    """One problem and `count` candidate solutions for it in one set."""
    problems, solutions = root / "problems", root / "solutions"
    (problems / "level1").mkdir(parents=True)
    (problems / "level1" / "1_P.py").write_text("# a problem the fake executor never runs\n")
    folder = solutions / "s" / "level1" / "1_P"
    folder.mkdir(parents=True)
    for i in range(count):
        (folder / f"c{i:05d}.py").write_text(f"# candidate {i}\n")
    return problems, solutions


def run(root: Path, executor: FakeExecutor, reporter: Recorder, monkeypatch, **cfg) -> tuple[RunResults, Path]:
    monkeypatch.setattr(pipeline, "_executor", lambda *a: executor)
    monkeypatch.setattr(pipeline, "probe_device", lambda device: pipeline.DeviceInfo("cpu", "", None, "2.x"))
    config = pipeline.RunConfig(problems_dir=root / "problems", solutions_dir=root / "solutions",
                                out_dir=root / "out", options=Options(device="cpu"), **cfg)
    return pipeline.run(config, reporter)


def written_bytes() -> int:
    """Bytes this process has passed to write(2), to any file: whatever the saving does."""
    return int(dict(line.split(": ") for line in Path("/proc/self/io").read_text().splitlines())["wchar"])


@pytest.mark.skipif(not Path("/proc/self/io").is_file(), reason="needs Linux's /proc/self/io")
def test_saving_costs_the_same_per_task_at_10000_tasks(tmp_path, monkeypatch):
    """Rewriting results.json, results.csv and report.md after each task writes about
    k * (size of one task) bytes at task k: 50 GB over 10,000 tasks. The budget here is a
    few times the task's own line, checked every 20 tasks; the old approach exceeded it at the first check.
    The tasks are made up (no files to discover, read and hash): only saving is measured."""
    n = 10_000
    problem = Problem("level1/1_P", str(tmp_path / "1_P.py"))
    tasks = tuple(Task(problem.name, problem.path, "s", f"/solutions/s/level1/1_P/c{i:05d}.py") for i in range(n))
    monkeypatch.setattr(pipeline, "discover", lambda *a: Discovery((problem,), ("s",), tasks, ()))
    monkeypatch.setattr(pipeline, "fingerprint", lambda task, cfg: "f" * 20)
    monkeypatch.setattr(pipeline, "task_spec", lambda task, options, fp: TaskSpec(
        task.problem, task.solution_set, Source(task.problem_path, ""), Source(task.solution_path, ""), options, fp))
    sample = TaskResult(problem.name, "s", tasks[0].solution_path, Status.OK, "", phase="done", fingerprint="f" * 20,
                        log_path=str(tmp_path / "out/logs/s/level1_1_P__c00000.log"))
    line = len(json.dumps(to_json_dict(sample)))
    start: list[int] = []

    def within_budget(result: TaskResult) -> None:
        k = len(reporter.done)
        if k == 1:
            start.append(written_bytes() - line)
        elif k % 20 == 0:
            spent = written_bytes() - start[0]
            assert spent <= 64_000 + 4 * line * k, f"task {k}: {spent} bytes written since the first task, for {k} tasks"

    reporter = Recorder(within_budget)
    results, out = run(tmp_path, FakeExecutor(), reporter, monkeypatch)
    assert len(reporter.done) == len(results.results) == n
    assert len((out / store.STORE_NAME).read_text().splitlines()) == 1 + n + 1  # header, one per task, final info
    assert report.load_run(out) == results  # the store holds the run,
    assert len(json.loads((out / "results.json").read_text())["results"]) == n  # and results.json was written at the end


def test_store_reads_back_the_run_in_its_order(tmp_path):
    run = golden_run()
    keys = [r.key for r in run.results]
    with store.ResultStore.create(tmp_path, run.run, keys, run.results[:2]) as s:
        for r in reversed(run.results[2:]):  # tasks finish in any order
            s.append(r)
        s.append(run.results[3])  # a task run again: the later line wins, in place
        s.set_run(golden_run().run)
    assert store.read(tmp_path / store.STORE_NAME, pytest.fail) == run
    assert report.load_run(tmp_path, pytest.fail) == run  # a folder without results.json


def test_a_cut_short_last_line_is_left_out_with_a_warning(tmp_path):
    run = golden_run()
    with store.ResultStore.create(tmp_path, run.run, [r.key for r in run.results], run.results[:3]) as s:
        s.append(run.results[3])
    path = tmp_path / store.STORE_NAME
    with open(path, "a") as f:
        f.write(json.dumps({"result": to_json_dict(run.results[4])})[:150])  # killed while writing it
    warnings: list[str] = []
    assert report.load_run(tmp_path, warnings.append).results == run.results[:4]
    assert len(warnings) == 1 and str(path) in warnings[0] and "cut short" in warnings[0] and "--resume" in warnings[0]

    lines = path.read_text().splitlines()
    path.write_text("\n".join([lines[0], lines[1][:40], *lines[2:]]) + "\n")  # not the last line: not a kill
    with pytest.raises(UserError, match=f"{path}: line 2 is not a kbench results line") as e:
        report.load_run(tmp_path, warnings.append)
    assert "\n" not in str(e.value)


def test_kbench_report_reads_a_folder_whose_results_json_was_never_written(tmp_path):
    run = golden_run()
    store.ResultStore.create(tmp_path, run.run, [r.key for r in run.results], run.results).close()
    with open(tmp_path / store.STORE_NAME, "a") as f:
        f.write('{"result": {"problem": "lev')
    res = CliRunner().invoke(cli.main, ["report", str(tmp_path), "--format", "csv"])
    assert res.exit_code == 0, res.output
    assert res.stdout == report.table(run, GatePolicy()).to_csv(index=False, float_format="%.6g")
    assert "warning:" in res.stderr and "cut short" in res.stderr


def test_an_interrupted_run_writes_its_reports_and_junit_on_the_way_out(tmp_path, monkeypatch):
    make_tasks(tmp_path, 5)
    junit, reporter = tmp_path / "junit.xml", Recorder()
    with pytest.raises(KeyboardInterrupt):
        run(tmp_path, FakeExecutor(fail_at=4, error=KeyboardInterrupt()), reporter, monkeypatch, junit_path=junit)
    out, finished = tmp_path / "out", len(reporter.done)  # the interrupt lands after 0 to 4 tasks
    saved = report.load_run(out / "results.json")
    assert len(saved.results) == finished < 5 and saved.run.finished is None
    assert report.load_run(out) == saved  # the store holds the same
    assert junit.read_text().count("<testcase") == finished
    assert (out / "report.md").read_text().count("| level1/1_P | s | c0") == finished


def test_a_failed_run_writes_its_reports_and_still_raises_its_own_error(tmp_path, monkeypatch):
    make_tasks(tmp_path, 3)
    reporter = Recorder()
    with pytest.raises(RuntimeError, match="a bug of ours"):
        run(tmp_path, FakeExecutor(fail_at=2, error=RuntimeError("a bug of ours")), reporter, monkeypatch)
    assert len(report.load_run(tmp_path / "out" / "results.json").results) == len(reporter.done) < 3


def test_resume_reads_a_killed_runs_store(tmp_path, monkeypatch):
    """A run killed outright leaves no results.json of its own, and maybe half a line:
    --resume reuses every whole line and reruns the rest."""
    make_tasks(tmp_path, 4)
    first, out = run(tmp_path, FakeExecutor(), Recorder(), monkeypatch)
    (out / "results.json").unlink()
    path = out / store.STORE_NAME
    lines = path.read_text().splitlines()
    path.write_text("\n".join(lines[:-2]) + "\n" + lines[-2][:30])  # the last task's line cut, no final info
    reporter = Recorder()
    second, _ = run(tmp_path, FakeExecutor(), reporter, monkeypatch, resume=out)
    assert (reporter.reused, reporter.todo) == (3, 1)
    assert any("cut short" in n for n in reporter.notes)
    assert [r.key for r in second.results] == [r.key for r in first.results]
    assert report.load_run(out / "results.json") == second and second.run.finished


def test_resume_without_any_results_names_both_files(tmp_path, monkeypatch):
    make_tasks(tmp_path, 1)
    (tmp_path / "out").mkdir()
    with pytest.raises(UserError, match="no results.json or results.jsonl in"):
        run(tmp_path, FakeExecutor(), Recorder(), monkeypatch, resume=tmp_path / "out")
