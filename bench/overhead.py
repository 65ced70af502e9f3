"""Per-task overhead of kbench runs: the median overall and per phase, then each task's phases.

    python bench/overhead.py RUN/results.json [...]
"""
import json
import statistics
import sys

for f in sys.argv[1:]:
    rs = [r for r in json.load(open(f))["results"] if r.get("overhead_seconds") is not None]
    if not rs:
        continue
    ov = sorted(r["overhead_seconds"] for r in rs)
    keys = sorted({k for r in rs for k in r["phase_seconds"]})
    med = {k: round(statistics.median(r["phase_seconds"].get(k, 0.0) for r in rs), 3) for k in keys}
    print(f"{f}: n={len(rs)} overhead median {statistics.median(ov):.3f} s, min {ov[0]:.3f}, max {ov[-1]:.3f}; phase medians {med}")
    for r in rs:
        print(f"  {r['problem']:28} {r['solution_path'].split('/')[-1][:28]:28} {r['status']:8} ov {r['overhead_seconds']:.3f} "
              + " ".join(f"{k}={v:.2f}" for k, v in r["phase_seconds"].items()) + f" share={r.get('custom_share')}")
