"""Print a run's tasks (status, flags, clock, speedup, the bound's overheads, custom_share,
harness overhead, message) and the fixtures whose verdict differs from their KBENCH_EXPECT.

    python tests/summarize_run.py RUN/results.json [...]   (used for the GPU runs quoted in notes)
"""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from expect import mismatches  # noqa: E402

for path in sys.argv[1:]:
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as e:
        print(path, e)
        continue
    results = data["results"]
    print(path, len(results), "tasks")
    for r in results:
        t = r.get("timing") or {}
        speedup = round(r["speedup"], 2) if r.get("speedup") else None
        print(" ", r["solution_path"].split("/")[-1][:28], r["problem"].split("/")[-1][:14], r["status"],
              ",".join(r["flags"]), t.get("clock"), speedup, t.get("calls_per_batch"), t.get("fixed_ms"),
              r.get("custom_share"), r.get("overhead_seconds"),
              "clocks", (t.get("ref") or {}).get("clock"), (t.get("sol") or {}).get("clock"),
              "host_ms", (t.get("ref") or {}).get("host_ms"), (t.get("sol") or {}).get("host_ms"),
              "judged_ms", (t.get("ref") or {}).get("judged_ms"), (t.get("sol") or {}).get("judged_ms"), "|", r["message"][:160])
    try:
        bad = mismatches(results)
    except AssertionError as e:  # files without a declaration (a shipped set)
        print("no declarations:", str(e)[:120])
        continue
    print("MISMATCHES", len(bad))
    for m in bad:
        print("  ", m[:400])
