"""The CPU demo set: what `kbench run` runs on a machine without a CUDA GPU when the
user named no device and no folders.

The shipped problems are sized for an H100 (a pure-torch ReLU over them took 3.5
minutes and 16 GB on a 2-core CPU box) and their solutions are CUDA, so a first
`kbench run` there could only refuse or skip everything. demo/ holds problems sized
for a CPU (a few milliseconds a call) with solutions in C++ (load_inline) and in
PyTorch, so that the README's first command shows the whole pipeline (build, check,
time, report) in about a minute and ends green. Runs in the kbench process.
"""
from __future__ import annotations

from pathlib import Path

DEMO = Path(__file__).resolve().parents[2] / "demo"
PROBLEMS, SOLUTIONS = DEMO / "problems", DEMO / "solutions"
# Seconds of timing per task: the run stays near a minute on 2 cores, and a CPU call of
# a few milliseconds still gets hundreds of samples.
TIME_BUDGET_S = 2.0

NOTE = ("no CUDA GPU found, so this runs the CPU demo set (demo/problems, demo/solutions) on --device cpu; "
        "on a machine with an NVIDIA GPU `kbench run` evaluates problems/ and solutions/, and here "
        "`kbench run --device cpu --problems DIR --solutions DIR` evaluates your own C++ and PyTorch solutions")


def wanted() -> bool:
    """No CUDA GPU is visible and the demo set is here (a source checkout, `pip install -e .`)."""
    if not PROBLEMS.is_dir() or not SOLUTIONS.is_dir():
        return False
    import torch

    return not torch.cuda.is_available()
