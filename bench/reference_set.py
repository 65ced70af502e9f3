"""Write a trivial solution set: every problem's own Model as its ModelNew.

Running kbench over it checks the suite itself (every problem builds inputs,
passes its own checks, fits in memory, times repeatably) and the harness's
timing (speedups should come out at 1.00 within their intervals):

    python bench/reference_set.py /tmp/refset && python cli.py run --solutions /tmp/refset
"""
import sys
from pathlib import Path

PROBLEMS = Path(__file__).resolve().parent.parent / "problems"


def main(out: Path) -> None:
    count = 0
    for problem in sorted(PROBLEMS.glob("level*/*.py")):
        target = out / "reference" / problem.parent.name / problem.name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(problem.read_text() + "\n\n# kbench reference set: the reference is its own solution\nModelNew = Model\n")
        count += 1
    print(f"wrote {count} solutions to {out / 'reference'}")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path("/tmp/refset"))
