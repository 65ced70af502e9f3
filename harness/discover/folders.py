"""Find problems and solution sets on disk and pair them into tasks.

Layouts understood:
  problems:   <root>/<level>/<name>.py            (a KernelBench checkout's KernelBench/ folder as it is)
              <root>/<name>.py                    (a single level folder; the folder's name is the level)
  solutions:  <root>/<set>/<level>/<name>.py      one candidate
              <root>/<set>/<level>/<name>/*.py    several candidates for one problem
              <root>/<set>/**/level_<L>_problem_<N>_sample_<S>_kernel.py   KernelBench generations
              <root>/level_<L>_problem_<N>_sample_<S>_kernel.py            (root itself is the set)
A solution file that maps to no problem is reported, never dropped.
"""
from __future__ import annotations

import difflib
import fnmatch
import re
from dataclasses import dataclass
from pathlib import Path

from ..records import Problem, Task, UserError

KERNELBENCH_SAMPLE = re.compile(r"level_(\d+)_problem_(\d+)_sample_(\d+)_kernel\.py$")
LEVEL_DIR = re.compile(r"level\d+$")


@dataclass(frozen=True)
class Unmatched:
    path: str
    reason: str


@dataclass(frozen=True)
class Discovery:
    problems: tuple[Problem, ...]
    sets: tuple[str, ...]
    tasks: tuple[Task, ...]
    unmatched: tuple[Unmatched, ...]
    # Everything there was to choose from, before -p and -s: named when a filter matches nothing.
    all_problems: tuple[str, ...] = ()
    all_sets: tuple[str, ...] = ()


def _is_source(path: Path) -> bool:
    return path.suffix == ".py" and not path.name.startswith(("_", "."))


def _missing_folder(path: Path, option: str) -> UserError:
    if path.is_file():
        return UserError(f"{option} '{path}' is a file, not a folder; pass the folder that holds "
                         + ("<level>/<name>.py" if option == "--problems" else "<set>/<level>/<problem>.py")
                         + (" (to run one solution file, pass it to --solution)" if option == "--solutions" else ""))
    parent = path.parent if str(path.parent) else Path(".")
    hint = ""
    if parent.is_dir():
        siblings = [p.name for p in parent.iterdir() if p.is_dir()]
        close = difflib.get_close_matches(path.name, siblings, n=1)
        if close:
            hint = f" (did you mean '{parent / close[0]}'?)"
    return UserError(f"{option} folder '{path}' does not exist{hint}; pass {option} DIR")


def find_problems(root: Path) -> list[Problem]:
    if not root.is_dir():
        raise _missing_folder(root, "--problems")
    level_dirs = sorted(p for p in root.iterdir() if p.is_dir() and LEVEL_DIR.match(p.name))
    problems = []
    if level_dirs:
        for level in level_dirs:
            for f in sorted(level.iterdir()):
                if f.is_file() and _is_source(f):
                    problems.append(Problem(name=f"{level.name}/{f.stem}", path=str(f)))
    else:  # a single level folder, e.g. KernelBench/level1
        for f in sorted(root.iterdir()):
            if f.is_file() and _is_source(f):
                problems.append(Problem(name=f"{root.resolve().name}/{f.stem}", path=str(f)))
    return sorted(problems, key=_natural_key)


def _natural_key(p: Problem) -> tuple:
    # level1/2_X before level1/10_Y, as KernelBench numbers them
    return tuple(int(t) if t.isdigit() else t for t in re.split(r"(\d+)", p.name))


def _problem_by_number(problems: dict[str, Problem]) -> dict[tuple[str, int], Problem]:
    out = {}
    for name in problems:
        level, stem = name.split("/", 1)
        m = re.match(r"(\d+)_", stem)
        if m:
            out[(level, int(m.group(1)))] = problems[name]
    return out


def _candidates(set_dir: Path) -> list[tuple[Path, str | None, str]]:
    """(file, problem name or None, reason if None) for every solution file in a set."""
    out = []
    for f in sorted(set_dir.rglob("*.py")):
        if not _is_source(f) or "__pycache__" in f.parts:
            continue
        rel = f.relative_to(set_dir)
        m = KERNELBENCH_SAMPLE.search(f.name)
        if m:
            out.append((f, f"kb:level{m.group(1)}:{m.group(2)}", ""))
        elif len(rel.parts) == 2:
            out.append((f, f"{rel.parts[0]}/{f.stem}", ""))
        elif len(rel.parts) == 3:
            out.append((f, f"{rel.parts[0]}/{rel.parts[1]}", ""))
        else:
            out.append((f, None, "not at <set>/<level>/<problem>.py or <set>/<level>/<problem>/<candidate>.py"))
    return out


def discover(
    problems_dir: Path,
    solutions_dir: Path | None,
    problem_filters: tuple[str, ...] = (),
    set_filters: tuple[str, ...] = (),
    solution_files: tuple[Path, ...] = (),
) -> Discovery:
    all_problems = find_problems(problems_dir)
    by_name = {p.name: p for p in all_problems}
    by_number = _problem_by_number(by_name)
    problems = [p for p in all_problems if _matches(p.name, problem_filters)]

    tasks: list[Task] = []
    unmatched: list[Unmatched] = []
    sets: list[str] = []
    all_sets: list[str] = []
    if solutions_dir is not None:
        if not solutions_dir.is_dir():
            raise _missing_folder(solutions_dir, "--solutions")
        if any(KERNELBENCH_SAMPLE.search(f.name) for f in solutions_dir.glob("*.py")):
            set_dirs = [solutions_dir]  # a KernelBench generation folder is one set
        else:
            set_dirs = sorted(p for p in solutions_dir.iterdir() if p.is_dir() and not p.name.startswith((".", "_")))
            for stray in sorted(solutions_dir.glob("*.py")):
                unmatched.append(Unmatched(str(stray), "a solution file must sit in a set folder: <set>/<level>/<problem>.py"))
        for set_dir in set_dirs:
            # resolve() names the root set even when given as '.' or '..'
            set_name = solutions_dir.resolve().name if set_dir == solutions_dir else set_dir.name
            all_sets.append(set_name)
            if not _matches(set_name, set_filters):
                continue
            sets.append(set_name)
            for f, key, reason in _candidates(set_dir):
                problem = _resolve(key, by_name, by_number) if key else None
                if problem is None:
                    why = reason or _no_problem_reason(key, problems_dir)
                    unmatched.append(Unmatched(str(f), why))
                    continue
                if not _matches(problem.name, problem_filters):
                    continue
                tasks.append(Task(problem.name, problem.path, set_name, str(f)))
    order = {p.name: i for i, p in enumerate(all_problems)}
    tasks.sort(key=lambda t: (order[t.problem], t.solution_set, t.solution_path))
    if solution_files:
        tasks = _only_files(tasks, unmatched, solution_files, solutions_dir)
    return Discovery(tuple(problems), tuple(sets), tuple(tasks), tuple(unmatched),
                     tuple(p.name for p in all_problems), tuple(all_sets))


def _only_files(tasks: list[Task], unmatched: list[Unmatched], files: tuple[Path, ...],
                solutions_dir: Path | None) -> list[Task]:
    """The tasks of the files given with --solution (one candidate among several in a
    set); a file that makes no task is named with the reason."""
    by_file = {Path(t.solution_path).resolve(): t for t in tasks}
    why_not = {Path(u.path).resolve(): u.reason for u in unmatched}
    chosen = []
    for f in files:
        path = f.resolve()
        if path in by_file:
            chosen.append(by_file[path])
        elif not path.is_file():
            raise UserError(f"--solution {f}: no such file")
        elif path in why_not:
            raise UserError(f"--solution {f} matches no problem: {why_not[path]}")
        elif solutions_dir is None or solutions_dir.resolve() not in path.parents:
            raise UserError(f"--solution {f} is not under --solutions {solutions_dir}; pass --solutions DIR, the "
                            "folder that holds its set")
        else:
            raise UserError(f"--solution {f} is left out by -p or -s; drop the filter that excludes it")
    return [t for t in tasks if t in chosen]  # the run's order; a file given twice runs once


def why_nothing_to_run(found: Discovery, problems_dir: Path, solutions_dir: Path,
                       problem_filters: tuple[str, ...], set_filters: tuple[str, ...]) -> UserError:
    """The error of a run with no task: a filter that matched nothing names what exists."""
    if problem_filters and not found.problems:
        flags = " ".join(f"-p {p}" for p in problem_filters)
        return UserError(f"{flags} matched none of the {len(found.all_problems)} problems under '{problems_dir}': "
                         f"{_some(found.all_problems)}")
    if set_filters and not found.sets:
        flags = " ".join(f"-s {p}" for p in set_filters)
        return UserError(f"{flags} matched none of the solution sets under '{solutions_dir}': {_some(found.all_sets)}")
    if problem_filters or set_filters:
        return UserError(f"no solution under '{solutions_dir}' for the problems and sets that match the filters "
                         f"(problems: {_some([p.name for p in found.problems])}; sets: {_some(found.sets)}); "
                         "see kbench list")
    where = f"{solutions_dir}/<set>/<level>/<problem>.py"
    extra = f" ({len(found.unmatched)} files match no problem; see kbench list)" if found.unmatched else ""
    return UserError(f"no solutions to run under '{solutions_dir}' for problems in '{problems_dir}'{extra}; "
                     f"add files as {where}")


def _some(names, shown: int = 12) -> str:
    names = list(names)
    if not names:
        return "none"
    more = f", ... ({len(names) - shown} more)" if len(names) > shown else ""
    return ", ".join(names[:shown]) + more


def _resolve(key: str, by_name: dict, by_number: dict) -> Problem | None:
    if key.startswith("kb:"):
        _, level, number = key.split(":")
        return by_number.get((level, int(number)))
    return by_name.get(key)


def _no_problem_reason(key: str | None, problems_dir: Path) -> str:
    if key and key.startswith("kb:"):
        _, level, number = key.split(":")
        return f"no problem numbered {number} in {problems_dir / level}"
    return f"no problem '{key}' under {problems_dir}"


def _matches(name: str, patterns: tuple[str, ...]) -> bool:
    """Glob patterns; one without wildcards matches as a substring ('Softmax')."""
    if not patterns:
        return True
    for pat in patterns:
        if any(c in pat for c in "*?["):
            if fnmatch.fnmatchcase(name, pat):
                return True
        elif pat in name:
            return True
    return False
