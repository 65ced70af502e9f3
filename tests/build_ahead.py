"""Build a solution set into the build cache ($KBENCH_CACHE) as `kbench run --device cpu`
would at its start, so that a later run of the same set finds its builds cached:
python tests/build_ahead.py PROBLEMS SOLUTIONS

The same discovery, build keys, build processes and sandbox as the run's own build stage
(harness/build: build_all with the run's BuildConfig), the same cache; what the run
then judges is unchanged. Solutions that carry an escape fixture's marker
(conftest.ESCAPE_MARKER, kbench-pwned-*) are left to the run itself, whose build stage
is watched for what they leave behind. Prints one line per build and a summary; exits 1
if kbench itself failed a build (a solution's own build error is a result, not a failure).
"""
import os
import sys
import time
from pathlib import Path

from harness.build import stage
from harness.discover.folders import discover
from harness.records import Status
from harness.run.pipeline import default_build_jobs

WATCHED = (b"kbench-escape-marker", b"kbench-pwned")


def main(problems: Path, solutions: Path) -> int:
    cache = Path(os.environ["KBENCH_CACHE"])
    tasks = [t for t in discover(problems, solutions).tasks
             if not any(mark in Path(t.solution_path).read_bytes() for mark in WATCHED)]
    ci = os.environ.get("CI", "").strip().lower() in ("true", "1", "yes")  # as cli._in_ci: --require-sandbox
    cfg = stage.BuildConfig("cpu", "", cache / "builds", default_build_jobs(), 600.0, require_sandbox=ci)
    t0 = time.monotonic()
    results = stage.build_all(tasks, cfg)
    crashed = [key for key, r in results.items() if r.status is Status.CRASHED]
    for key, r in sorted(results.items()):
        print(f"{r.status.value if r.status else 'ok':12s} {'cached' if r.cached else f'{r.seconds:5.1f}s'} {key}")
    print(f"{len(results)} tasks, {len(crashed)} kbench errors, {time.monotonic() - t0:.0f} s")
    return 1 if crashed else 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]), Path(sys.argv[2])))
