"""kbench: evaluate custom GPU kernels against PyTorch references."""
from __future__ import annotations

from .records import __version__  # noqa: F401  (the one place it is written: records.py)


def load_results(path):
    """A run's results as a pandas DataFrame, one row per task (for notebooks).
    `path` is a results.json, or a run folder (read from its results.jsonl store)."""
    from pathlib import Path

    from .gate import GatePolicy
    from .report import load_run, table

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
