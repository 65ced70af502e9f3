"""The package's layout holds: stage folders import only folders below them, nothing
imports in a circle, the build stage is entered by one door, and every folder says
which process runs it. Read from the source (every import, a function's too), so a
new module that breaks the order fails here before anyone draws the graph."""
from __future__ import annotations

import ast
from pathlib import Path

from conftest import ROOT

# Lower imports nothing higher; equal ranks in different folders do not import each
# other (the judge and the candidate share only shared/channel.py).
RANK = {"records": 0, "shared": 1, "build": 2, "discover": 3, "judge": 4, "candidate": 4,
        "report": 5, "run": 6, "": 7}
STAGES = ["shared", "build", "discover", "judge", "candidate", "report", "run"]
# What other folders may import of build/: its package (the entrance) and its loader.
BUILD_DOORS = {"harness.build", "harness.build.load"}


def modules(root: Path) -> dict[str, Path]:
    out = {}
    for p in root.rglob("*.py"):
        name = ".".join(p.relative_to(root.parent).with_suffix("").parts)
        out[name.removesuffix(".__init__")] = p
    return out


def imports(root: Path) -> dict[str, set[str]]:
    """Each module's imports of the package's own modules (a name imported from a
    package that is one of its modules counts as that module)."""
    mods = modules(root)
    graph = {}
    for name, path in mods.items():
        pkg = name if path.name == "__init__.py" else name.rpartition(".")[0]
        deps = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = pkg.split(".")[: len(pkg.split(".")) - (node.level - 1)]
                    m = ".".join(base) + (f".{node.module}" if node.module else "")
                else:
                    m = node.module or ""
                if m in mods:
                    deps |= {f"{m}.{a.name}" if f"{m}.{a.name}" in mods else m for a in node.names}
            elif isinstance(node, ast.Import):
                deps |= {a.name for a in node.names if a.name in mods}
        graph[name] = deps - {name}
    return graph


def folder(module: str) -> str:
    """records, '' (the package's top: __init__ and api.py, the library's entrance), or
    the stage folder a module is in (a loose module: its own name, which has no rank)."""
    parts = module.split(".")[1:]
    return "" if not parts or parts[0] == "api" else parts[0]


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan)."""
    index, low, stack, on, found, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def wrong_way(graph: dict[str, set[str]]) -> list[str]:
    """Imports that go up, or across between folders of one rank, or into build/ by a side door."""
    bad = []
    for a, deps in graph.items():
        fa = folder(a)
        for b in deps:
            fb = folder(b)
            if fb == fa:
                continue
            if RANK.get(fa, -1) <= RANK.get(fb, -1):
                bad.append(f"{a} ({fa or 'top'}) imports {b} ({fb or 'top'})")
            elif fb == "build" and b not in BUILD_DOORS:
                bad.append(f"{a} imports {b}: other stages enter build/ by its package (or build.load)")
    return sorted(bad)


GRAPH = imports(ROOT / "harness")


def test_every_module_is_in_a_stage_folder_or_at_the_bottom_or_top():
    loose = [m for m in GRAPH if folder(m) not in RANK]
    assert not loose, f"modules outside the stage folders: {loose}"


def test_no_module_imports_in_a_circle():
    assert circles(GRAPH) == []


def test_no_import_goes_up_or_across():
    assert wrong_way(GRAPH) == []


def test_the_checks_catch_what_they_are_for(tmp_path):
    """The same checks on a made-up package whose judge imports the candidate and whose
    build imports the run stage in a circle: both are named."""
    pkg = tmp_path / "harness"
    for f, text in {"__init__.py": "", "records.py": "",
                    "judge/__init__.py": "", "judge/main.py": "from ..candidate import serve\n",
                    "candidate/__init__.py": "", "candidate/serve.py": "",
                    "build/__init__.py": "", "build/stage.py": "from ..run import work\n",
                    "run/__init__.py": "", "run/work.py": "from ..build import stage\n"}.items():
        (pkg / f).parent.mkdir(parents=True, exist_ok=True)
        (pkg / f).write_text(text)
    graph = imports(pkg)
    assert circles(graph) == [["harness.build.stage", "harness.run.work"]]
    assert wrong_way(graph) == [
        "harness.build.stage (build) imports harness.run.work (run)",
        "harness.judge.main (judge) imports harness.candidate.serve (candidate)",
        "harness.run.work imports harness.build.stage: other stages enter build/ by its package (or build.load)",
    ]


def test_every_stage_folder_says_what_runs_it_and_what_it_may_import():
    for stage in STAGES:
        doc = ast.get_docstring(ast.parse((ROOT / "harness" / stage / "__init__.py").read_text())) or ""
        assert "Runs in" in doc, f"harness/{stage}/__init__.py says nothing of which process runs it"
        assert "May import" in doc, f"harness/{stage}/__init__.py says nothing of what it may import"


def test_the_processes_entry_points_are_where_commands_name_them():
    """python -m harness.judge / harness.candidate / harness.build / harness.build.pch /
    harness.run.roofline: the commands kbench starts its children with."""
    for mod in ("judge/__main__.py", "candidate/__main__.py", "build/__main__.py"):
        assert (ROOT / "harness" / mod).is_file(), mod
    for mod in ("build/pch.py", "run/roofline.py"):
        assert 'if __name__ == "__main__":' in (ROOT / "harness" / mod).read_text(), mod
