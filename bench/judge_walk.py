"""How a timed pair walks through the judge's modules (issue 30: "a batch's walk through judge/
enters each room once"): one task run with KBENCH_JUDGE_WALK (harness/judge/walk.py), then the
last pair's stays and returns printed.

  python bench/judge_walk.py                      # CPU: a pure-torch affine, 8 MB in and out
  python bench/judge_walk.py --device cuda --solution \\
      tests/fixtures/adversarial/cuda/25_judge_evidence/level1/2_Affine/honest.py

The solution's folder layout is kept (<set>/<level>/<problem>/<file>.py) in a scratch copy, so
that the run judges that one file. The walk is the judge's structure, not a timing: the profile
hook that records it slows the judge's loop, so this run's figures mean nothing."""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ADVERSARIAL = ROOT / "tests" / "fixtures" / "adversarial"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--problems", type=Path, default=ADVERSARIAL / "problems")
    ap.add_argument("--solution", type=Path,
                    default=ADVERSARIAL / "cpu" / "00_legit" / "level1" / "2_Affine" / "same_as_reference.py")
    ap.add_argument("--time-budget", default="1")
    args = ap.parse_args()
    solution = args.solution.resolve()
    with tempfile.TemporaryDirectory(prefix="kbench-walk-") as tmp:
        work = Path(tmp)
        layout = solution.relative_to(solution.parents[3])  # <set>/<level>/<problem>/<file>.py
        (work / "sol" / layout).parent.mkdir(parents=True)
        shutil.copy(solution, work / "sol" / layout)
        out = work / "walk.json"
        cmd = [sys.executable, str(ROOT / "cli.py"), "run", "--problems", str(args.problems), "--solutions",
               str(work / "sol"), "--out", str(work / "r"), "--device", args.device, "--time-budget",
               args.time_budget, "--timeout", "300", "--exit-zero"]
        done = subprocess.run(cmd, env={**os.environ, "KBENCH_JUDGE_WALK": str(out)}, capture_output=True, text=True)
        result = json.loads((work / "r" / "results.json").read_text())["results"][0]
        if not out.exists():
            print(f"no walk written: the task ended {result['status']} before a timed pair "
                  f"({result['message'][:200]})\n{done.stderr[-2000:]}", file=sys.stderr)
            return 1
        walk = json.loads(out.read_text())
    rooms = [room for room, _ in walk["stays"]]
    print(f"[judge_walk] {layout} on {args.device}: {result['status']}, clock {(result.get('timing') or {}).get('clock')}")
    print(f"[judge_walk] the last timed pair: {len(rooms)} stays, {walk['returns']} returns, "
          f"{len(set(rooms))} rooms")
    print("[judge_walk] stays per room: " + ", ".join(f"{room} {n}" for room, n in Counter(rooms).most_common()))
    print("[judge_walk] " + " -> ".join(rooms))
    return 0


if __name__ == "__main__":
    sys.exit(main())
