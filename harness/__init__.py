"""kbench: evaluate custom GPU kernels against PyTorch references."""
from __future__ import annotations

__version__ = "0.1.0"


def load_results(path):
    """A run's results as a pandas DataFrame, one row per task (for notebooks).
    `path` is a results.json or the run folder holding it."""
    from pathlib import Path

    from .gate import GatePolicy
    from .report import load_run, table

    return table(load_run(Path(path)), GatePolicy())
