"""Read the verdict a fixture solution declares it must get.

Each fixture solution carries `KBENCH_EXPECT = {"status": ..., "message": ...,
"flags": [...]}` at module level. Optional keys: "may_flag" (flags allowed but not
required; default ["noisy"]; host_bound is always allowed), "clock", "sol_clock" (the clock that timed the solution's side), "any_of" (alternative declarations) and
"max_speedup": the reported speedup must be None or at most that value (a cheat
whose defeat leaves an honest, correct, slow result), and "twin" with "max_ratio": where
the result is ok with no flag that fails the default gate, its speedup must be at most
max_ratio times that of the twin, an honest solution of the same kernel style in the same
folder, judged in the same run (an attack on the judge's measure that works shows as a
speedup its honest twin does not get; a twin that is not ok with a speedup is a mismatch).
It is read with ast, never imported: the fixtures are the hostile code the harness must
survive.
"""
from __future__ import annotations

import ast
import json
import warnings
from pathlib import Path

# The flags that fail kbench's default gate (harness/report/gate.py DEFAULT_FAIL_FLAGS): a result that
# carries one is not a clean ok, so the twin's ratio does not apply to it.
GATE_FLAGS = frozenset({"below_roofline", "input_mutation", "tampering", "timing_mismatch", "untimed_work"})


def expected(path: str | Path) -> dict:
    tree = ast.parse(Path(path).read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "KBENCH_EXPECT" for t in node.targets):
            return ast.literal_eval(node.value)
    raise AssertionError(f"{path} declares no KBENCH_EXPECT")


def twin_path(r: dict, want: dict) -> str:
    """Where the twin a declaration names lies: beside the fixture."""
    return str(Path(r["solution_path"]).with_name(want["twin"]))


def _twin_problems(r: dict, want: dict, by_path: dict[str, dict]) -> list[str]:
    if r["status"] != "ok" or GATE_FLAGS & set(r["flags"]):
        return []
    twin = by_path.get(twin_path(r, want))
    if twin is None:
        return [f"twin {want['twin']} was not judged in this run"]
    if twin["status"] != "ok" or not twin.get("speedup"):
        return [f"twin {want['twin']} got {twin['status']} with speedup {twin.get('speedup')}: nothing to compare with"]
    if r.get("speedup") is None:
        return []  # no figure, nothing gained
    limit = want.get("max_ratio", 1.0) * twin["speedup"]
    if r["speedup"] > limit:
        return [f"speedup {r['speedup']:.3g} > {want.get('max_ratio', 1.0)} x twin {want['twin']}'s "
                f"{twin['speedup']:.3g} ({r['speedup'] / twin['speedup']:.2f}x the twin)"]
    return []


def _problems(r: dict, want: dict, by_path: dict[str, dict] | None = None) -> list[str]:
    out = []
    if r["status"] != want["status"]:
        said = r["message"][:300].replace(" / ", ", ").replace(";", ",")  # timing_only() splits on these
        return [f"status {r['status']} != {want['status']} ({said})"]
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
    if want.get("twin"):
        out += _twin_problems(r, want, by_path or {})
    clock = (r.get("timing") or {}).get("clock")
    if want.get("clock") and clock != want["clock"]:
        out.append(f"timed by {clock}, not {want['clock']}")
    sol_clock = ((r.get("timing") or {}).get("sol") or {}).get("clock")
    if want.get("sol_clock") and sol_clock != want["sol_clock"]:
        out.append(f"solution timed by {sol_clock}, not {want['sol_clock']}")
    return out


def mismatches(results: list[dict], only: str | None = None) -> list[str]:
    """One line per result whose status, message or flags differ from its fixture's
    declaration. A declaration may list alternatives under "any_of" where the
    hostile behaviour is a race the harness may catch either way. Twins are looked
    up among `results` (the same run). `only`: the file name of the one fixture to report."""
    bad = []
    by_path = {str(Path(r["solution_path"])): r for r in results}
    for r in results:
        name = Path(r["solution_path"]).name
        if only is not None and name != only:
            continue
        want = expected(r["solution_path"])
        options = want.get("any_of", [want])
        found = [_problems(r, w, by_path) for w in options]
        if all(found):
            bad.append(f"{r['problem']} {name}: " + " / ".join("; ".join(f) for f in found))
    return bad


# Flags only the CPU clock's disturbance can raise on honest code: on a loaded 2-core machine
# an honest candidate's time can read past a bound.
TIMING_FLAGS = {"timing_mismatch"}


def timing_only(line: str) -> bool:
    """Whether a mismatches() line misses only where the clock decides in at least one
    alternative that got the status: a speedup above its bound (max_speedup, or its twin's
    ratio), or an unexpected timing flag. Measured again, the fixture must then meet one of
    its alternatives (measure_again), so the one that missed by the clock alone may be met:
    inflated_fixed_cost.py declares "the twin's speed, or timing_mismatch", and its reference
    read 1.65 ms in a CI run's loaded minute against 1.08 in its twin's (1.38x the twin). A
    wrong status, message or a missing flag is never a matter of timing."""
    alternatives = [a for a in line.split(": ", 1)[1].split(" / ") if not a.strip().startswith("status ")]
    return any(all(_timing_part(part.strip()) for part in a.split(";")) for a in alternatives)


def _timing_part(part: str) -> bool:
    if part.startswith("speedup "):
        return True
    return part.startswith("unexpected flags ") and set(ast.literal_eval(part[len("unexpected flags "):])) <= TIMING_FLAGS


CONTROL = "same_as_reference.py"  # tests/fixtures/adversarial/cpu/00_legit/level1/<problem>/
SANE_SPEEDUP = (1 / 1.5, 1.5)  # the control is the reference's own code: outside this, the clock is off


def measure_again(run_cli, adversarial: Path, work: Path, line: str) -> list[str]:
    """The mismatches of the one CPU fixture that `line` names, judged again (--solution,
    in place: some fixtures look for files beside them) in one run with its problem's
    control, the reference's own code, where there is one, and its twin, where it declares
    one. On a loaded 2-core machine an honest copy of the reference has read 0.22x-3.37x
    against it (memory and caches are shared, whichever clock): the control, timed in the
    same run, says whether the clock can be trusted now. A timing-only miss (timing_only) of a fixture whose control was
    itself off is not judged: a warning names it; with a sane control, or none, the
    rerun must match its declaration."""
    problem, name = line.split(": ", 1)[0].split(" ", 1)  # "level1/2_Affine import_problem_file.py"
    stem = problem.split("/")[-1]
    path = next(p for p in (adversarial / "cpu").rglob(name) if p.parent.name == stem)
    control = adversarial / "cpu" / "00_legit" / "level1" / stem / CONTROL
    pair = ["--solution", str(control)] if control.is_file() and control != path else []
    twin_name = next((w.get("twin") for w in expected(path).get("any_of", [expected(path)]) if w.get("twin")), None)
    twin = ["--solution", str(path.parent / twin_name)] if twin_name and path.parent / twin_name != control else []
    proc = run_cli("run", "--problems", str(adversarial / "problems"), "--solutions", str(adversarial / "cpu"),
                   "--solution", str(path), *pair, *twin, "--out", str(work), "--device", "cpu",
                   "--time-budget", "2", "--exit-zero")
    results = json.loads((work / "results.json").read_text())["results"]
    mine = [r for r in results if Path(r["solution_path"]) == path]
    assert len(mine) == 1 and len(results) == 1 + bool(pair) + bool(twin), proc.stderr[-3000:]
    bad = mismatches(results, only=name)
    if bad and pair and all(timing_only(b) for b in bad):
        ref = next(r for r in results if Path(r["solution_path"]) == control)
        off = ref["status"] != "ok" or TIMING_FLAGS & set(ref["flags"]) or \
            not (SANE_SPEEDUP[0] <= (ref["speedup"] or 0) <= SANE_SPEEDUP[1])
        if off:
            warnings.warn(f"not judged, the CPU clock was off: {bad[0]} (the reference's own code read "
                          f"{ref['speedup']}x {ref['flags']} in the same run)", stacklevel=2)
            return []
    return bad


def verdict_mismatches(results: list[dict]) -> list[str]:
    """mismatches() for a test about verdicts, not time: a timing-only miss (timing_only)
    is a warning there, since on a loaded machine the CPU clock raises it on honest code
    (the adversarial set judges timing, beside controls: measure_again)."""
    bad = mismatches(results)
    for line in bad:
        if timing_only(line):
            warnings.warn(f"timing-only miss, not judged in a test about verdicts: {line}", stacklevel=2)
    return [line for line in bad if not timing_only(line)]
