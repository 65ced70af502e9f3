"""Several GPUs: the same tasks on one GPU and on two (`--gpus`), warm cache.

Copies of the shipped set (byte-identical: one build per problem) over the
shipped problems. A first two-GPU run builds; then one GPU and two GPUs are
timed with every build cached. Prints wall times, tasks per GPU and each
problem's median speedup per GPU (the GPUs should agree).

    python bench/gpus.py [--copies 4] [--work DIR]
"""
import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def make_copies(source: Path, root: Path, copies: int) -> None:
    for k in range(copies):
        for src in sorted(source.rglob("*.py")):
            dst = root / f"copy{k}" / src.relative_to(source)
            dst.parent.mkdir(parents=True, exist_ok=True)
            dst.write_bytes(src.read_bytes())  # byte-identical: one build serves every copy


def run(work: Path, name: str, gpus: str) -> dict:
    out = work / name
    t0 = time.monotonic()
    subprocess.run([sys.executable, str(ROOT / "cli.py"), "run", "--problems", str(ROOT / "problems"),
                    "--solutions", str(work / "solutions"), "--gpus", gpus, "--out", str(out), "--exit-zero"],
                   check=True, stdout=subprocess.DEVNULL)
    wall = time.monotonic() - t0
    data = json.loads((out / "results.json").read_text())
    return {"name": name, "gpus": gpus, "wall": wall, "build": data["run"]["build_seconds"] or 0.0,
            "results": data["results"]}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--copies", type=int, default=4)
    ap.add_argument("--work", type=Path)
    a = ap.parse_args()
    work = a.work or Path(tempfile.mkdtemp(prefix="kbench-gpus-"))
    make_copies(ROOT / "solutions" / "kbench", work / "solutions", a.copies)
    runs = [run(work, "cold-2gpu", "0,1"), run(work, "warm-1gpu", "0"), run(work, "warm-2gpu", "0,1")]
    print(f"{a.copies} copies of solutions/kbench x the shipped problems\n")
    print("| run | --gpus | wall s | build s | tasks per GPU | statuses |")
    print("|---|---|---|---|---|---|")
    for r in runs:
        per = {}
        for t in r["results"]:
            per[t["gpu"]] = per.get(t["gpu"], 0) + 1
        statuses = sorted({t["status"] for t in r["results"]})
        print(f"| {r['name']} | {r['gpus']} | {r['wall']:.1f} | {r['build']:.1f} | "
              f"{', '.join(f'GPU {g}: {n}' for g, n in sorted(per.items()))} | {statuses} |")
    one, two = runs[1]["wall"] - runs[1]["build"], runs[2]["wall"] - runs[2]["build"]
    print(f"\nwarm, after the build stage: one GPU {one:.1f} s, two GPUs {two:.1f} s: {one / two:.2f}x")
    print("\n| problem | median speedup on GPU 0 | on GPU 1 |")
    print("|---|---|---|")
    by: dict[str, dict[int, list[float]]] = {}
    for r in runs:
        for t in r["results"]:
            if t["speedup"] is not None:
                by.setdefault(t["problem"], {}).setdefault(t["gpu"], []).append(t["speedup"])
    for problem, gpus in by.items():
        cells = [f"{statistics.median(gpus[g]):.3f} (n={len(gpus[g])})" if g in gpus else "-" for g in (0, 1)]
        print(f"| {problem} | {cells[0]} | {cells[1]} |")


if __name__ == "__main__":
    main()
