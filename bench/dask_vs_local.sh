#!/usr/bin/env bash
# The cold set (bench/cold_set.py's 20 candidates) under both executors, on this host's GPUs:
#   1. --executor local with an empty build cache (it builds),
#   2. --executor dask on that cache (a cluster kbench starts here: one worker per GPU),
#   3. --executor local again on that cache,
# then each task's status and flags side by side, and where the Dask tasks ran.
#   bash bench/dask_vs_local.sh WORK_DIR
set -u
work=${1:?usage: bash bench/dask_vs_local.sh WORK_DIR}
rm -rf "$work" && mkdir -p "$work"
python - "$work" <<'PY'
import sys; from pathlib import Path
sys.path.insert(0, "bench"); import cold_set
cold_set.write_set(Path(sys.argv[1]) / "set")
PY
# The cold set's own options (cold_set.KBENCH_ARGS), not a copy of them.
read -r -a opts <<< "$(python -c 'import sys; sys.path.insert(0, "bench"); import cold_set; print(*cold_set.KBENCH_ARGS)')"
args=(--problems "$work/set/problems" --solutions "$work/set/solutions" --cache-dir "$work/cache" "${opts[@]}")
for run in local dask local_warm; do
  ex=${run%_warm}
  t0=$(date +%s.%N)
  python cli.py run "${args[@]}" --executor "$ex" --out "$work/$run" > "$work/$run.log" 2>&1
  echo "$run: exit $?, $(python -c "print(f'{$(date +%s.%N) - $t0:.1f}')") s wall; $(grep -h 'gate:' "$work/$run.log")"
done
python - "$work" <<'PY'
import collections, json, sys
work = sys.argv[1]
runs = {r: {x["solution_path"].split("/solutions/")[-1]: x for x in json.load(open(f"{work}/{r}/results.json"))["results"]}
        for r in ("local", "dask", "local_warm")}
differ = 0
for key in sorted(runs["local"]):
    seen = [(runs[r].get(key, {}).get("status"), tuple(runs[r].get(key, {}).get("flags", ()))) for r in runs]
    differ += len(set(seen)) > 1
    print(f"{key:45} " + "  ".join(f"{s} {','.join(f) or '-'}" for s, f in seen))
print("tasks whose status or flags differ between the runs:", differ)
print("dask tasks per worker:", dict(collections.Counter(x.get("worker", "") for x in runs["dask"].values())))
PY
