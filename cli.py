"""kbench command line: parse options into a RunConfig, call the harness, render, exit.

Exit codes: 0 every task passed the gate; 1 the gate failed (or --min-speedup
was missed); 2 usage error (bad flag, missing folder); 130 interrupted (Ctrl-C), 143
stopped by SIGTERM (`timeout`, a CI job's limit, a scheduler): both save what finished first.
"""
from __future__ import annotations

import functools
import math
import os
import signal
import sys
import threading
from pathlib import Path

import click
from click.core import ParameterSource

from harness.report import console
from harness.report.gate import DEFAULT_FAIL_FLAGS, EXIT_USAGE, GatePolicy, gate, parse_flags, reasons_summary
from harness.records import PRECISIONS, UserError

DEFAULT_FAIL_ON = ",".join(sorted(f.value for f in DEFAULT_FAIL_FLAGS))


INTERRUPT_GRACE_S = 10.0


def interrupted(run_folder: Path | None) -> str:
    """The Ctrl-C line: where the finished tasks are and the exact command's flag to continue."""
    if run_folder is None:  # stopped before the run folder was made: nothing ran
        return "interrupted before any task ran; nothing was saved"
    return f"interrupted; finished tasks are saved in {run_folder}: continue with --resume {run_folder}"


# The signals that stop a run in order: Ctrl-C, and SIGTERM, which `timeout`, CI runners and
# job schedulers send first (unhandled, it ended kbench at once: results.json kept only what it
# said at the start, and the finished tasks were left in results.jsonl for --resume to find).
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
_stopped_by: list[int] = []


def _exit_code() -> int:
    """128 + the signal that stopped the run, as a shell reports it: 130 for Ctrl-C, 143 for SIGTERM."""
    return 128 + (_stopped_by[-1] if _stopped_by else signal.SIGINT)


def _interrupt_with_deadline(reporter, signum, frame) -> None:
    """Ctrl-C (or SIGTERM) during a run: KeyboardInterrupt as usual, which kills the
    workers, closes the live display and writes the reports of what finished; and if
    that orderly stop has not ended the process within INTERRUPT_GRACE_S (an interrupt
    that lands inside a lock can leave it held), it ends here. Finished tasks are
    already in the run folder's results.jsonl."""
    from harness.shared import scratch_root
    from harness.shared.isolate import kill_all

    _stopped_by.append(int(signum))

    def hard_exit() -> None:
        kill_all()
        scratch_root.remove()  # os._exit skips atexit
        sys.stderr.write(f"error: {interrupted(reporter.out_dir)}\n")
        sys.stderr.flush()
        os._exit(_exit_code())

    timer = threading.Timer(INTERRUPT_GRACE_S, hard_exit)
    timer.daemon = True
    timer.start()
    for stop in STOP_SIGNALS:  # a second one: a plain KeyboardInterrupt
        signal.signal(stop, signal.default_int_handler)
    raise KeyboardInterrupt


class KbenchGroup(click.Group):
    """Turns a UserError anywhere, and a bad option value, into one line and exit code 2,
    never a traceback or a usage screen."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except UserError as e:
            console.error(str(e))
            sys.exit(EXIT_USAGE)
        except click.UsageError as e:
            if type(e).__name__ == "NoArgsIsHelpError":  # a bare subcommand: its help is the answer
                raise
            command = e.ctx.command_path if e.ctx else "kbench"
            console.error(f"{e.format_message()} (see {command} --help)")
            sys.exit(EXIT_USAGE)


class Seconds(click.ParamType):
    """A positive, finite number of seconds: 0, -5 and nan would make every task fail."""

    name = "seconds"

    def convert(self, value, param, ctx):
        if isinstance(value, float) and math.isfinite(value) and value > 0:
            return value
        try:
            seconds = float(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number of seconds", param, ctx)
        if not math.isfinite(seconds) or seconds <= 0:
            self.fail(f"takes a positive number of seconds, not {value}", param, ctx)
        return seconds


class PositiveInt(click.ParamType):
    """A count of at least 1: --build-jobs -1 aborted the run with SIGABRT after discovery,
    and 0 read as "the default" without a word."""

    name = "count"

    def convert(self, value, param, ctx):
        try:
            count = int(value)
        except (TypeError, ValueError):
            self.fail(f"takes a whole number of at least 1, not {value!r}", param, ctx)
        if count < 1:
            self.fail(f"takes a whole number of at least 1, not {value}", param, ctx)
        return count


class FiniteFloat(click.ParamType):
    """A finite number above `least` (or at least it, `inclusive`): nan compares false with
    everything, so `--min-speedup nan` or `--threshold nan` would switch its check off."""

    name = "number"

    def __init__(self, least: float, inclusive: bool):
        self.least, self.inclusive = least, inclusive

    def convert(self, value, param, ctx):
        try:
            number = float(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number", param, ctx)
        ok = number >= self.least if self.inclusive else number > self.least
        if not math.isfinite(number) or not ok:
            bound = f"at least {self.least:g}" if self.inclusive else f"above {self.least:g}"
            self.fail(f"takes a finite number {bound}, not {value}", param, ctx)
        return number


def _writable_out(ctx, param, value: Path | None) -> Path | None:
    """--out must be a folder kbench can write: say so now, in one line, rather than
    with a traceback after the builds."""
    from harness.run.usage import writable_folder

    return None if value is None else writable_folder(value, "--out")


@click.group(cls=KbenchGroup)
@click.version_option(package_name=None, version=__import__("harness").__version__, prog_name="kbench")
def main() -> None:
    """Evaluate custom GPU kernels against PyTorch reference problems."""


def _folder_options(f):
    f = click.option("--solutions", "solutions", default="solutions", show_default=True, type=click.Path(path_type=Path),
                     help="Folder of solution sets: <set>/<level>/<problem>.py, or a KernelBench generation folder.")(f)
    f = click.option("--problems", "problems", default="problems", show_default=True, type=click.Path(path_type=Path),
                     help="Folder of problems: <level>/<name>.py (a KernelBench checkout's KernelBench/ works as is).")(f)
    f = click.option("-p", "--problem", "problem_filters", multiple=True, metavar="PATTERN",
                     help="Only problems matching PATTERN (glob, or a substring such as 'Softmax'). Repeatable.")(f)
    f = click.option("-s", "--set", "set_filters", multiple=True, metavar="PATTERN",
                     help="Only solution sets matching PATTERN. Repeatable.")(f)
    f = click.option("--solution", "solution_files", multiple=True, metavar="FILE",
                     type=click.Path(path_type=Path, dir_okay=False),
                     help="Only this solution file (one candidate among several in a set), under --solutions. "
                          "Repeatable.")(f)
    return f


@main.command()
@_folder_options
@click.option("--out", type=click.Path(path_type=Path), callback=_writable_out,
              help="Run folder [default: results/<timestamp>/].")
@click.option("--device", type=click.Choice(["cuda", "cpu"]),
              help="cpu runs the same pipeline on C++ and pure-torch solutions with a CPU clock [default: cuda; with "
                   "no GPU and no --problems/--solutions, the CPU demo set].")
@click.option("--timeout", type=Seconds(), default=300.0, show_default=True, help="Seconds per task (load, check, time).")
@click.option("--build-timeout", type=Seconds(), default=600.0, show_default=True, help="Seconds per solution build.")
@click.option("--build-jobs", type=PositiveInt(), help="Parallel builds [default: cores, at most 16].")
@click.option("--cache-dir", type=click.Path(path_type=Path), help="Build cache [default: $KBENCH_CACHE or ~/.cache/kbench].")
@click.option("--no-cache", is_flag=True, help="Rebuild every solution, ignoring cached builds.")
@click.option("--trials", type=click.IntRange(1, 100), default=5, show_default=True, help="Random correctness trials per task.")
@click.option("--seed", type=int, default=42, show_default=True)
@click.option("--precision", type=click.Choice(PRECISIONS), default="fp32", show_default=True,
              help="fp16/bf16: floating inputs, weights and buffers cast to that dtype on both sides, tolerances "
                   "scaled for it from the float64 reference; fp32 runs problems as written.")
@click.option("--no-fp64", is_flag=True, help="Skip the float64 reference (faster; tolerances fall back to fixed floors).")
@click.option("--no-timing", is_flag=True, help="Check correctness only.")
@click.option("--time-budget", type=Seconds(), default=10.0, show_default=True, help="Seconds of timing per task at most.")
@click.option("--timing-mode", type=click.Choice(["auto", "hold", "events", "graph"]), default="auto", show_default=True,
              help="How GPU calls are timed: hold (a batch queued behind a hold that the judge releases, so its clock "
                   "holds the device's time), events (eager batches back to back), graph (a CUDA graph's replay); auto "
                   "holds where the forward queues, else graphs for calls under 50 us, else eager batches.")
@click.option("--fail-on", default=DEFAULT_FAIL_ON, show_default=True,
              help="Comma-separated flags that fail the gate, or 'none'.")
@click.option("--min-speedup", type=FiniteFloat(0, inclusive=False),
              help="Also fail the gate when a correct task is slower than this.")
@click.option("--exit-zero", is_flag=True, help="Exit 0 even when tasks fail (research runs where failures are expected).")
@click.option("--compile-baseline", is_flag=True,
              help="Also time the reference under torch.compile (compiled before timing) for a second speedup.")
@click.option("--gpus", default="", metavar="LIST",
              help="GPUs to spread tasks over, one timing task per GPU: '0,1,2,3' or 'all' [default: all that "
                   "CUDA_VISIBLE_DEVICES shows].")
@click.option("--resume", type=click.Path(path_type=Path), metavar="RUN_DIR",
              help="Continue an interrupted run, skipping tasks whose solution, problem and options are unchanged.")
@click.option("--junit", "junit_path", type=click.Path(path_type=Path, dir_okay=False), metavar="PATH",
              help="Also write JUnit XML (one testcase per task) to PATH, for CI test reporters.")
@click.option("--cpu-threads", type=click.IntRange(1, 1024), default=1, show_default=True,
              help="Threads of the reference and of the solution on --device cpu.")
@click.option("--executor", type=click.Choice(["local", "dask"]), default="local", show_default=True,
              help="Where tasks run: this host's GPUs, or a Dask cluster (see --scheduler).")
@click.option("--scheduler", metavar="ADDRESS",
              help="--executor dask: a running Dask scheduler (tcp://host:8786) [default: a cluster on this host].")
@click.option("--dask-workers", type=click.IntRange(0, 512), default=0,
              help="--executor dask without --scheduler: workers to start [default: one per GPU; 3 on --device cpu].")
@click.option("--require-sandbox/--no-require-sandbox", default=None,
              help="Refuse to run solution code where builds and candidates cannot be confined (no Landlock) "
                   "[default: on under CI=true, else off, with a warning].")
@click.option("--reserve-cores/--no-reserve-cores", default=True, show_default=True,
              help="On CUDA, give each GPU lane's judge and candidate 2 CPU cores that builds and other tasks "
                   "cannot take (reserved only where 2 per GPU and 2 more exist).")
def run(problems, solutions, problem_filters, set_filters, solution_files, out, device, timeout, build_timeout, build_jobs, cache_dir,
        no_cache, trials, seed, precision, no_fp64, no_timing, time_budget, timing_mode, fail_on, min_speedup, exit_zero, compile_baseline, gpus,
        resume, junit_path, cpu_threads, executor, scheduler, dask_workers, require_sandbox, reserve_cores) -> None:
    """Build, check and time every solution against its problem; write results.json, results.csv, report.md."""
    from harness.discover import demo
    from harness.run import pipeline
    from harness.shared.isolate import kill_all
    from harness.records import Options, TimingConfig
    from harness.run.gpus import parse as parse_gpus
    from harness.run.usage import writable_file

    policy = GatePolicy(fail_flags=parse_flags(fail_on), min_speedup=min_speedup, exit_zero=exit_zero)
    if min_speedup is not None and no_timing:
        raise UserError(f"--min-speedup {min_speedup:g} needs timing, and --no-timing turns it off; drop one of them")
    if scheduler and executor != "dask":
        raise UserError("--scheduler needs --executor dask")
    if junit_path is not None:
        writable_file(junit_path, "--junit", created_by_run=resume or out)
    if device is None and not _given("problems") and not _given("solutions") and demo.wanted():
        # The README's first command on a machine without a GPU: see harness/discover/demo.py.
        problems, solutions, device = demo.PROBLEMS, demo.SOLUTIONS, "cpu"
        time_budget = time_budget if _given("time_budget") else demo.TIME_BUDGET_S
        console.note(demo.NOTE)
    if timing_mode == "graph" and device == "cpu":
        raise UserError("--timing-mode graph needs --device cuda: CUDA graphs do not exist on the CPU; use auto or events")
    options = Options(device=device or "cuda", timeout=timeout, trials=trials, seed=seed, fp64=not no_fp64,
                      time=not no_timing, timing=TimingConfig(budget_s=time_budget, mode=timing_mode),
                      compile_baseline=compile_baseline, cpu_threads=cpu_threads, build_timeout=build_timeout,
                      precision=precision,
                      require_sandbox=require_sandbox if require_sandbox is not None else _in_ci())
    cfg = pipeline.RunConfig(
        problems_dir=problems, solutions_dir=solutions, out_dir=out, options=options, build_jobs=build_jobs or 0,
        use_cache=not no_cache, problem_filters=tuple(problem_filters), set_filters=tuple(set_filters),
        policy=policy, resume=resume, gpus=parse_gpus(gpus), executor=executor, scheduler=scheduler,
        dask_workers=dask_workers, junit_path=junit_path, solution_files=tuple(solution_files),
        reserve_cores=reserve_cores,
        **({"cache_dir": cache_dir} if cache_dir else {}),
    )
    reporter = console.RichReporter(policy)
    previous = {stop: signal.signal(stop, functools.partial(_interrupt_with_deadline, reporter)) for stop in STOP_SIGNALS}
    try:
        with reporter:
            results, out_dir = pipeline.run(cfg, reporter)
    except KeyboardInterrupt:
        kill_all()
        console.error(interrupted(reporter.out_dir))
        sys.exit(_exit_code())
    finally:
        for stop, handler in previous.items():
            signal.signal(stop, handler)
    console.print_results(results, policy)
    verdict = gate(results.results, policy)
    console.note(f"wrote {out_dir}/results.json, results.csv, report.md")
    if junit_path is not None:  # written by the pipeline, with results.json (also when a run is cut short)
        console.note(f"wrote {junit_path}")
    if verdict.failed:
        console.note(f"gate: {len(verdict.failed)} of {len(results.results)} tasks failed ({reasons_summary(verdict)})"
                     + (" (--exit-zero: exit 0)" if policy.exit_zero else ""))
    sys.exit(verdict.exit_code)


def _in_ci() -> bool:
    """CI=true (GitHub Actions, GitLab, most CI services set it): where a gate runs on
    solutions from pull requests, unconfined is refused unless asked for."""
    return os.environ.get("CI", "").strip().lower() in ("true", "1", "yes")


def _given(option: str) -> bool:
    """Whether the user passed this option (its value may still equal the default)."""
    return click.get_current_context().get_parameter_source(option) is not ParameterSource.DEFAULT


@main.command(name="list")
@_folder_options
def list_(problems, solutions, problem_filters, set_filters, solution_files) -> None:
    """Show problems, solution sets, the tasks they make, and files that match no problem."""
    from harness.discover.folders import discover
    from harness.discover.facts import facts_of_files

    found = discover(problems, solutions if solutions.exists() or solutions != Path("solutions") else None,
                     tuple(problem_filters), tuple(set_filters), tuple(solution_files))
    facts, cached = facts_of_files([p.path for p in found.problems])
    console.print_discovery(found, facts, cached)


@main.command()
@click.argument("results_path", type=click.Path(path_type=Path), metavar="RESULTS")
@click.option("--format", "fmt", type=click.Choice(["md", "csv", "json", "html", "junit"]), default="md",
              show_default=True, help="html: one self-contained page with charts; junit: JUnit XML for CI.")
@click.option("--fail-on", default=DEFAULT_FAIL_ON, show_default=True, help="Flags that make a task's verdict fail.")
@click.option("--out", "out_path", type=click.Path(path_type=Path, dir_okay=False), metavar="FILE",
              help="Write to FILE instead of stdout.")
def report(results_path, fmt, fail_on, out_path) -> None:
    """Re-render a run's results.json (or run folder, read from its results.jsonl) to stdout or --out FILE."""
    from harness.report import html, junit
    from harness.report import write as writers
    from harness.records import to_json_dict
    from harness.run.usage import writable_file

    if out_path is not None:  # before the work: a typo in the folder must not create it, nor fail after rendering
        writable_file(out_path, "--out")
    run_results = writers.load_run(results_path, console.warning)
    policy = GatePolicy(fail_flags=parse_flags(fail_on))
    if fmt == "md":
        text = writers.render_markdown(run_results, policy) + "\n"
    elif fmt == "csv":
        text = writers.table(run_results, policy).to_csv(index=False, float_format="%.6g")
    elif fmt == "html":
        text = html.render(run_results, policy)
    elif fmt == "junit":
        text = junit.render(run_results, policy)
    else:
        import json

        text = json.dumps(to_json_dict(run_results), indent=1) + "\n"
    if out_path is None:
        click.echo(text, nl=False)
    else:
        writers.atomic_write(out_path, text)
        console.note(f"wrote {out_path}")


@main.command()
@click.argument("base_path", type=click.Path(path_type=Path), metavar="BASE")
@click.argument("new_path", type=click.Path(path_type=Path), metavar="NEW")
@click.option("--threshold", type=FiniteFloat(0, inclusive=True), default=0.05, show_default=True,
              help="Fail when a task is significantly slower by more than this fraction of its BASE speedup.")
@click.option("--format", "fmt", type=click.Choice(["md", "csv"]), default="md", show_default=True)
@click.option("--fail-on", default=DEFAULT_FAIL_ON, show_default=True,
              help="Flags that make a task's verdict fail, in both runs alike.")
def compare(base_path, new_path, threshold, fmt, fail_on) -> None:
    """Compare two runs task by task: newly failing, fixed, faster, slower, not significant, not comparable
    (the problem file changed), problem error (NEW's problem file failed), new, removed.

    Exit 1 when a task newly fails, passed but has a problem error in NEW, or is significantly slower by more
    than --threshold, else 0."""
    from harness.report import compare as cmp
    from harness.report.write import load_run

    policy = GatePolicy(fail_flags=parse_flags(fail_on))
    result = cmp.compare(load_run(base_path, console.warning), load_run(new_path, console.warning), policy, threshold)
    click.echo(cmp.render_markdown(result, policy) if fmt == "md" else cmp.render_csv(result, policy), nl=False)
    console.note(cmp.summary_line(result))
    sys.exit(result.exit_code)


if __name__ == "__main__":
    main()
