"""False alarms on honest kernels: `kbench run` K times over kernels written the way models write them, one table.

Issue 24's acceptance: zero false timing_mismatch (and no other flag that fails the gate) in three runs on the H100
over honest kernels from ~3 us to ~30 ms. The set is bench/timing_tasks.py's (bench/accuracy: ReLU over 16 x 16384,
the 12_Tanh copies with injected device waits of 0, 10, 50 and 2000 us (a clock64/globaltimer spin after a tanh of
random inputs), two Triton kernels, a 4096 x 2048 x 4096 tiled matmul, ...) and this folder's additions:
13_Softmax_Small (64 x 4096: a few us; and `in_place.py`, the same kernel writing into its input, whose verdict
must be ok with input_mutation, never runtime_error), 14_RowSum_Small (64 x 4096, in Triton: a few us) and
15_Matmul_Square (a naive 4096 x 4096 kernel, one thread per output, torch::zeros_like output: ~25 ms).

Every candidate is honest: any status but ok, or any flag that fails the default gate, is an alarm (in_place.py:
exactly input_mutation). Per task and run: status, flags, speedup, reference and solution ms; then each task's
speedup spread over the runs (max/min - 1).

    python bench/evidence/run.py --work DIR --runs 3 --md bench/evidence/record.md --json OUT.json
    python bench/evidence/run.py --dry-run --work DIR          # write the files and check them on the CPU
"""
from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # bench/: timing_tasks
import timing_tasks as tt  # noqa: E402

KBENCH_ARGS = ("--time-budget", "4", "--timeout", "300")
GATE_FLAGS = ("below_roofline", "input_mutation", "tampering", "timing_mismatch", "untimed_work", "contended")
# Candidates whose honest verdict carries a flag: the flags they must get, exactly.
EXPECTED_FLAGS = {"13_Softmax_Small/in_place.py": {"input_mutation"}}


def write_work(work: Path) -> tuple[Path, Path]:
    """bench/accuracy's set (with its injected waits) and this folder's problems and solutions, under `work`."""
    problems, solutions = tt.write_work(work)
    shutil.copytree(HERE / "problems", problems, dirs_exist_ok=True)
    shutil.copytree(HERE / "solutions", solutions, dirs_exist_ok=True)
    return problems, solutions


def label(row: dict) -> str:
    path = Path(row["solution_path"])
    name = row["problem"]
    return f"{name} [{path.stem}]" if path.parent.name == name.split("/")[-1] else name


def expected_flags(row: dict) -> set[str]:
    path = Path(row["solution_path"])
    return EXPECTED_FLAGS.get(f"{path.parent.name}/{path.name}", set())


def alarms(row: dict) -> list[str]:
    """Why an honest candidate's verdict is wrong, or []."""
    out = []
    if row["status"] != "ok":
        out.append(f"{row['status']}: {row.get('message', '')[:200]}")
    want = expected_flags(row)
    gate = {f for f in row.get("flags") or [] if f in GATE_FLAGS}
    if gate - want:
        out.append(f"flagged {', '.join(sorted(gate - want))}: {row.get('message', '')[:300]}")
    if want - gate:
        out.append(f"lacks {', '.join(sorted(want - gate))}")
    return out


def summarize(runs: list[dict]) -> list[dict]:
    """One row per task: each run's verdict and times, the alarms, the speedup spread."""
    tasks: dict[str, dict] = {}
    for k, results in enumerate(runs):
        for r in results["results"]:
            t = tasks.setdefault(label(r), {"task": label(r), "runs": [None] * len(runs), "alarms": []})
            ref, sol = tt.side(r, "ref"), tt.side(r, "sol")
            t["runs"][k] = {"status": r["status"], "flags": r.get("flags") or [], "speedup": r.get("speedup"),
                            "ref_us": ref["us"], "sol_us": sol["us"], "clock": sol["clock"],
                            "message": (r.get("message") or "")[:300]}
            t["alarms"] += [f"run {k + 1}: {a}" for a in alarms(r)]
    for t in tasks.values():
        speedups = [r["speedup"] for r in t["runs"] if r and r["speedup"]]
        t["spread_pct"] = 100 * (max(speedups) / min(speedups) - 1) if len(speedups) > 1 else None
        t["ref_us"] = statistics.median([r["ref_us"] for r in t["runs"] if r and r["ref_us"]] or [0]) or None
    return sorted(tasks.values(), key=lambda t: t["ref_us"] or 0)


def _ms(us: float | None) -> str:
    return "-" if us is None else f"{us / 1e3:.4f}"


def render(rows: list[dict], device: str, command: str, wall_s: float, n_runs: int) -> str:
    header = ["task"] + [f"run {k + 1}: status, flags, speedup, ref/sol ms" for k in range(n_runs)] + ["spread"]
    table = []
    for t in rows:
        cells = []
        for r in t["runs"]:
            if r is None:
                cells.append("missing")
                continue
            flags = ",".join(r["flags"]) or "-"
            speed = "-" if r["speedup"] is None else f"{r['speedup']:.3f}x"
            cells.append(f"{r['status']}, {flags}, {speed}, {_ms(r['ref_us'])}/{_ms(r['sol_us'])}")
        spread = "-" if t["spread_pct"] is None else f"{t['spread_pct']:.1f}%"
        table.append([t["task"], *cells, spread])
    found = [f"- {t['task']}: {a}" for t in rows for a in t["alarms"]]
    return "\n".join([
        "# Judge-owned evidence: false alarms on honest kernels",
        "",
        f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC, {device}; `{command}` ({wall_s:.0f} s, {n_runs} runs, "
        f"kbench {' '.join(KBENCH_ARGS)}).",
        "",
        f"**{len(found)} alarms over {len(rows)} honest tasks x {n_runs} runs** (an alarm: a status other than ok, or "
        f"a flag of {', '.join(GATE_FLAGS)}; `13_Softmax_Small [in_place]` must get exactly input_mutation).",
        "",
        tt.md_table(header, table),
        *(["", "Alarms:", *found] if found else []),
    ])


def _device() -> str:
    import torch

    if not torch.cuda.is_available():
        return f"no GPU, torch {torch.__version__}"
    return f"{torch.cuda.get_device_name(0)}, torch {torch.__version__}, CUDA {torch.version.cuda}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", type=Path, help="work folder: the task files, kbench's runs and build cache "
                                              "[default: a new temporary one]")
    ap.add_argument("--runs", type=int, default=3, help="kbench runs over the set [3]")
    ap.add_argument("--md", type=Path, help="also write the Markdown record here")
    ap.add_argument("--json", type=Path, help="write the raw numbers here")
    ap.add_argument("--dry-run", action="store_true", help="write the task files and check them on the CPU; no GPU")
    a = ap.parse_args()
    work = (a.work or Path(tempfile.mkdtemp(prefix="kbench-evidence-"))).resolve()
    problems, solutions = write_work(work)
    if a.dry_run:
        print("\n".join(tt.validate(problems, solutions)))
        print(f"dry run ok: files in {work}")
        return
    started = time.monotonic()
    runs = [tt.run_kbench(problems, solutions, work / f"run{k + 1}", work / "cache", *KBENCH_ARGS)
            for k in range(a.runs)]
    rows = summarize(runs)
    command = "python bench/evidence/run.py " + " ".join(sys.argv[1:])
    tt.write_outputs(render(rows, _device(), command, time.monotonic() - started, a.runs),
                     {"kbench_args": KBENCH_ARGS, "runs": [r.get("run", {}) for r in runs], "tasks": rows},
                     a.md, a.json)


if __name__ == "__main__":
    main()
