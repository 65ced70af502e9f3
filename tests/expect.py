"""Read the verdict a fixture solution declares it must get.

Each fixture solution carries `KBENCH_EXPECT = {"status": ..., "message": ...,
"flags": [...]}` at module level. It is read with ast, never imported: the
fixtures are the hostile code the harness must survive.
"""
from __future__ import annotations

import ast
from pathlib import Path


def expected(path: str | Path) -> dict:
    tree = ast.parse(Path(path).read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "KBENCH_EXPECT" for t in node.targets):
            return ast.literal_eval(node.value)
    raise AssertionError(f"{path} declares no KBENCH_EXPECT")


def mismatches(results: list[dict]) -> list[str]:
    """One line per result whose status, message or flags differ from its fixture's declaration."""
    bad = []
    for r in results:
        want = expected(r["solution_path"])
        name = Path(r["solution_path"]).name
        if r["status"] != want["status"]:
            bad.append(f"{r['problem']} {name}: status {r['status']} != {want['status']} ({r['message'][:300]})")
            continue
        if want.get("message") and want["message"] not in r["message"]:
            bad.append(f"{r['problem']} {name}: message lacks {want['message']!r}: {r['message'][:300]}")
        missing = set(want.get("flags", [])) - set(r["flags"])
        if missing:
            bad.append(f"{r['problem']} {name}: flags {r['flags']} lack {sorted(missing)}")
        unexpected = set(r["flags"]) - set(want.get("flags", [])) - set(want.get("may_flag", ["noisy"]))
        if unexpected:
            bad.append(f"{r['problem']} {name}: unexpected flags {sorted(unexpected)}")
    return bad
