"""A kbench run with a timeline of what its lanes do, or the summary of one.

    TRACE=/tmp/trace.jsonl python bench/lane_trace.py run ARGS...   # `python cli.py run ARGS...`, traced
    python bench/lane_trace.py --summary /tmp/trace.jsonl

The run is kbench's own (cli.main), with the lane's steps wrapped to write one
JSON line per call: thread, step, start and end in seconds from the process's
start. A run's phases (results.json) say what each task spent inside its judge;
this says what the lane did between them: choosing the next task, starting
judges ahead, the GPU health check after a failure, writing results. It found
the health checks of a warm 20-task rerun (0.7, 0.8 and 3.6 s, the last a probe
still importing torch) where no task's phases showed them (bench/lane_trace.md).
"""
from __future__ import annotations

import functools
import json
import os
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
T0 = time.monotonic()

# (module, class or None, function): the lane's steps (run/executors.py) and what they call.
STEPS = [
    ("executors", "LocalExecutor", "_take"), ("executors", "LocalExecutor", "_judge"),
    ("executors", None, "_start_ahead"), ("executors", None, "_finish"), ("launch", None, "evaluate"),
    ("launch", None, "start_worker"), ("health", None, "after"), ("health", None, "keep_ready"),
    ("pipeline", None, "probe_device"),
]


def _wrap(owner, name: str, out, lock) -> None:
    fn = getattr(owner, name)

    @functools.wraps(fn)
    def traced(*args, **kwargs):
        start = time.monotonic()
        try:
            return fn(*args, **kwargs)
        finally:
            end = time.monotonic()
            what = ""
            if name == "_judge" and len(args) > 2:
                what = args[2].spec.solution_source.path[-60:]
            with lock:
                out.write(json.dumps({"t": threading.current_thread().name, "f": name, "s": round(start - T0, 4),
                                      "e": round(end - T0, 4), "x": what}) + "\n")

    setattr(owner, name, traced)


def traced_run(argv: list[str]) -> None:
    sys.path.insert(0, str(ROOT))
    from harness.run import executors, health, launch, pipeline

    modules = {"executors": executors, "launch": launch, "health": health, "pipeline": pipeline}
    out, lock = open(os.environ.get("TRACE", "trace.jsonl"), "a", buffering=1), threading.Lock()
    for module, cls, name in STEPS:
        _wrap(getattr(modules[module], cls) if cls else modules[module], name, out, lock)
    import cli

    sys.argv = [str(ROOT / "cli.py"), *argv]
    cli.main()


def summary(path: Path) -> str:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    lane = [r for r in rows if r["t"].startswith("kbench-lane")]
    tasks = [r for r in lane if r["f"] == "_judge" and r["e"] - r["s"] > 0.01]
    probe = next((r for r in rows if r["f"] == "probe_device"), None)
    health = [round(r["e"] - r["s"], 2) for r in lane if r["f"] == "after" and r["e"] - r["s"] > 0.01]
    if not tasks:
        return "no task was judged"
    first, last = min(r["s"] for r in tasks), max(r["e"] for r in tasks)
    busy = sum(r["e"] - r["s"] for r in tasks)
    return (f"kbench's own device probe {probe['e'] - probe['s']:.2f} s; first task at {first:.2f} s, last ended at "
            f"{last:.2f} s; tasks {busy:.2f} s of the {last - first:.2f} s between (lane idle "
            f"{last - first - busy:.2f} s); health checks after failures: {health or 'none'} s")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--summary"]:
        print(summary(Path(sys.argv[2])))
    else:
        traced_run(sys.argv[1:])
