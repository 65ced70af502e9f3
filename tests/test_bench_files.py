"""The timing benchmarks' task files, checked on the CPU through their --dry-run: every
problem imports, draws inputs and runs its reference (small sizes), every solution
parses and matches its problem's forward. No builds, no GPU."""
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("script", ["timing_accuracy.py", "timing_repro.py"])
def test_dry_run_writes_and_checks_the_task_files(script, tmp_path):
    done = subprocess.run([sys.executable, str(ROOT / "bench" / script), "--dry-run", "--work", str(tmp_path)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "dry run ok" in done.stdout
    solutions = tmp_path / "solutions" / "models"
    # 12 problems; the wait problem has its plain solution and three with injected waits.
    assert len(list((tmp_path / "problems").rglob("*.py"))) == 12
    waits = sorted(p.name for p in (solutions / "level1" / "12_Tanh").glob("*.py"))
    assert waits == ["wait_0us.py", "wait_10us.py", "wait_2000us.py", "wait_50us.py"]
    assert "WAIT_US = 2000\n" in (solutions / "level1" / "12_Tanh" / "wait_2000us.py").read_text()
    assert done.stdout.count("  solution ") == 15


def test_dry_run_refuses_a_solution_whose_forward_does_not_match(tmp_path):
    sys.path.insert(0, str(ROOT / "bench"))
    import timing_tasks

    problems, solutions = timing_tasks.write_work(tmp_path)
    bad = solutions / "models" / "level1" / "4_Softmax.py"
    bad.write_text(bad.read_text().replace("def forward(self, x: torch.Tensor)", "def forward(self, x, y)"))
    with pytest.raises(AssertionError, match="ModelNew.forward takes 2 inputs"):
        timing_tasks.validate(problems, solutions)
