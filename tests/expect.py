"""Read the verdict a fixture solution declares it must get.

Each fixture solution carries `KBENCH_EXPECT = {"status": ..., "message": ...,
"flags": [...]}` at module level. Optional keys: "may_flag" (flags allowed but not
required; default ["noisy"]; host_bound is always allowed), "clock", "sol_clock" (the clock that timed the solution's side), "any_of" (alternative declarations) and
"max_speedup": the reported speedup must be None or at most that value (a cheat
whose defeat leaves an honest, correct, slow result). It is read with ast, never imported: the
fixtures are the hostile code the harness must survive.
"""
from __future__ import annotations

import ast
import json
from pathlib import Path


def expected(path: str | Path) -> dict:
    tree = ast.parse(Path(path).read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "KBENCH_EXPECT" for t in node.targets):
            return ast.literal_eval(node.value)
    raise AssertionError(f"{path} declares no KBENCH_EXPECT")


def _problems(r: dict, want: dict) -> list[str]:
    out = []
    if r["status"] != want["status"]:
        return [f"status {r['status']} != {want['status']} ({r['message'][:300]})"]
    if want.get("message") and want["message"] not in r["message"]:
        out.append(f"message lacks {want['message']!r}: {r['message'][:300]}")
    missing = set(want.get("flags", [])) - set(r["flags"])
    if missing:
        out.append(f"flags {r['flags']} lack {sorted(missing)}")
    # host_bound is information about microsecond calls (either side's), never a verdict on the fixture.
    unexpected = set(r["flags"]) - set(want.get("flags", [])) - set(want.get("may_flag", ["noisy"])) - {"host_bound"}
    if unexpected:
        out.append(f"unexpected flags {sorted(unexpected)}")
    if want.get("max_speedup") is not None and r.get("speedup") is not None and r["speedup"] > want["max_speedup"]:
        out.append(f"speedup {r['speedup']:.3g} > max_speedup {want['max_speedup']}")
    clock = (r.get("timing") or {}).get("clock")
    if want.get("clock") and clock != want["clock"]:
        out.append(f"timed by {clock}, not {want['clock']}")
    sol_clock = ((r.get("timing") or {}).get("sol") or {}).get("clock")
    if want.get("sol_clock") and sol_clock != want["sol_clock"]:
        out.append(f"solution timed by {sol_clock}, not {want['sol_clock']}")
    return out


def mismatches(results: list[dict]) -> list[str]:
    """One line per result whose status, message or flags differ from its fixture's
    declaration. A declaration may list alternatives under "any_of" where the
    hostile behaviour is a race the harness may catch either way."""
    bad = []
    for r in results:
        want = expected(r["solution_path"])
        name = Path(r["solution_path"]).name
        options = want.get("any_of", [want])
        found = [_problems(r, w) for w in options]
        if all(found):
            bad.append(f"{r['problem']} {name}: " + " / ".join("; ".join(f) for f in found))
    return bad


def speed_only(line: str) -> bool:
    """Whether a mismatches() line misses only on a speedup above its bound."""
    return all(part.strip().startswith("speedup ") for part in line.split(": ", 1)[1].split(";"))


def measure_again(run_cli, adversarial: Path, work: Path, line: str) -> list[str]:
    """The mismatches of the one CPU fixture that `line` names, judged again in a run
    of its set and problem only (in place: some fixtures look for files beside them).
    The CPU clock is the host's wall time, and on a shared 2-core CI machine an
    honest copy of the reference has read 1.53x and 3.29x against it: a cheat that
    really is faster is faster again, a noisy reading is not."""
    problem, name = line.split(": ", 1)[0].split(" ", 1)  # "level1/2_Affine import_problem_file.py"
    stem = problem.split("/")[-1]
    path = next(p for p in (adversarial / "cpu").rglob(name) if p.parent.name == stem)
    proc = run_cli("run", "--problems", str(adversarial / "problems"), "--solutions", str(adversarial / "cpu"),
                   "-s", path.parent.parent.parent.name, "-p", problem, "--out", str(work),
                   "--device", "cpu", "--time-budget", "2", "--exit-zero")
    results = [r for r in json.loads((work / "results.json").read_text())["results"]
               if Path(r["solution_path"]).name == name]
    assert len(results) == 1, proc.stderr[-3000:]
    return mismatches(results)
