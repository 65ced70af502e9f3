"""kbench: evaluate custom GPU kernels against PyTorch references.

One folder per stage, each saying in its __init__ which process runs it and
what it may import; a folder imports only folders listed below it
(tests/test_layout.py holds the code to that):

  api.py, this file   the library's entrance (evaluate, Session, load_results)
  run/                kbench's process: a run from the command line to the reports
  report/             kbench's process: the terminal, results files, compare
  judge/              the judge process (trusted)      candidate/  the candidate process
  discover/           kbench's process: problems, solutions, what a problem moves
  build/              the build processes: compile each solution once, cached
  shared/             code that several processes run (sandbox, children, the wire format)
  records.py          the records every stage passes; imports nothing of kbench's
"""
from __future__ import annotations

from .records import __version__  # noqa: F401  (the one place it is written: records.py)


def load_results(path):
    """A run's results as a pandas DataFrame, one row per task (for notebooks).
    `path` is a results.json, or a run folder (read from its results.jsonl store)."""
    from pathlib import Path

    from .report.gate import GatePolicy
    from .report.write import load_run, table

    return table(load_run(Path(path)), GatePolicy())


def evaluate(problem_source: str, solution_source: str, *, device: str = "cuda", **options):
    """One candidate's verdict, as `kbench run` gives it (see harness/api.py)."""
    from .api import evaluate as _evaluate

    return _evaluate(problem_source, solution_source, device=device, **options)


def __getattr__(name: str):
    if name == "Session":  # imported on first use: `import harness` stays light for report readers
        from .api import Session

        return Session
    raise AttributeError(f"module 'harness' has no attribute {name!r}")
