"""bench/rl_throughput.py, the RL-use throughput bench: its candidates are what they
declare (each template's edits apply, the files parse), and the whole bench runs
end to end on the CPU at a smoke test's scale with every verdict as declared."""
import ast
import json
import os
import re
import subprocess
import sys
from collections import Counter

from conftest import ROOT

sys.path.insert(0, str(ROOT / "bench"))
import rl_candidates  # noqa: E402


def test_two_hundred_cuda_candidates_parse_and_about_half_fail():
    candidates = rl_candidates.candidates(200, "cuda")
    outcomes = Counter(c.outcome for c in candidates)
    assert 80 <= outcomes["ok"] <= 120, outcomes
    assert {"compile_error", "wrong", "raise", "exit", "illegal", "hang"} <= set(outcomes), outcomes
    assert len({c.source for c in candidates}) == 200  # each a build of its own
    assert len({c.template for c in candidates}) == len(rl_candidates.CUDA_TEMPLATES)
    for c in candidates:
        ast.parse(c.source)
        assert "load_inline" in c.source and "verbose=True" in c.source and "<<<" in c.source
        assert os.path.isfile(c.problem_path)


def test_the_bench_runs_on_the_cpu_with_every_verdict_as_declared(tmp_path):
    out = tmp_path / "rl.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "KBENCH_HANG_IMPORT_S": "5"}
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "rl_throughput.py"), "--work", str(tmp_path / "w"),
                           "--device", "cpu", "--candidates", "10", "--time-budget", "0.2", "--json", str(out)],
                          capture_output=True, text=True, timeout=900, env=env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    run = json.loads(out.read_text())["runs"][0]
    assert run["candidates"] == 10 and sum(run["statuses"].values()) == 10
    assert run["unexpected"] == [], run["unexpected"]
    assert run["statuses"].get("ok", 0) >= 3 and run["statuses"].get("build_error", 0) >= 1, run["statuses"]
    assert run["kernels_per_hour"] > 0 and 0 < run["timing_share"] < 1
    # GPUs | cores | candidates | done | cache: one row for the batch
    assert re.search(r"^\| 1 \| \d+ \| 10 \| 10 \| cold \|", done.stdout, re.M), done.stdout[-3000:]
