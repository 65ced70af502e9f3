"""JUnit XML for CI dashboards (GitLab, Jenkins, GitHub test reporters): one
testsuite per solution set, one testcase per task, a failure or an error where the
gate's verdict fails, and <skipped> for a skipped task (a CUDA solution on a CPU run,
a lost GPU), counted in skipped=: JUnit's word for a test that did not run, which a
dashboard shows apart from failures. The gate still fails a skipped task, so the exit
code says the run was incomplete; the reason is in the element's message. An error is
a task whose problem file failed (problem_error): JUnit's word for a test that could
not run for a fault outside it, as opposed to one that ran and failed. Built with
ElementTree so that messages holding <, & or quotes (compiler output does) can
never break the file."""
from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path, PurePath

from .gate import GatePolicy, verdict
from ..records import RunResults, Status, TaskResult
from .write import atomic_write
from .units import duration

# Characters XML 1.0 cannot hold even escaped (NUL, ANSI colour escapes from a
# compiler, ...): ElementTree would write them and the file would not parse.
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def xml_safe(text: str) -> str:
    """text with each character XML cannot hold shown as its code, e.g. \\x1b."""
    return _NOT_XML.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def _testcase(r: TaskResult, policy: GatePolicy) -> tuple[ET.Element, str]:
    """The element and its outcome: "passed", "failed", "error" or "skipped"."""
    case = ET.Element("testcase", {
        "classname": xml_safe(r.solution_set),
        # the file name: candidates for one problem differ only in it
        "name": xml_safe(f"{r.problem}/{PurePath(r.solution_path).name}"),
        "file": xml_safe(r.solution_path),
        "time": f"{r.seconds:.3f}",
    })
    # A skipped task never ran: reporting it as a failure would count a CUDA solution on a
    # CPU run among the broken ones.
    v = verdict(r, policy)
    if r.status is Status.SKIPPED:
        ET.SubElement(case, "skipped", {"message": xml_safe(r.message.strip().splitlines()[0][:200]
                                                            if r.message.strip() else "skipped")})
        return case, "skipped"
    if not v.passed:
        # Dashboards show the message attribute in their lists: reasons and the first line, the rest in the text.
        first = r.message.strip().splitlines()[0][:200] if r.message.strip() else ""
        summary = "; ".join(v.reasons) + (f": {first}" if first else "")
        kind = r.status.value if r.status is not Status.OK else "gate"  # ok, but a flag or --min-speedup fails it
        outcome = "error" if r.status is Status.PROBLEM_ERROR else "failed"  # the solution never ran: not its failure
        failure = ET.SubElement(case, "error" if outcome == "error" else "failure",
                                {"message": xml_safe(summary), "type": kind})
        failure.text = xml_safe(r.message)
        return case, outcome
    if r.speedup is not None:
        out = ET.SubElement(case, "system-out")
        out.text = f"speedup {r.speedup:.3f}x (ref {duration(r.ref_ms)}, solution {duration(r.sol_ms)})"
    return case, "passed"


def build(run: RunResults, policy: GatePolicy) -> ET.Element:
    root = ET.Element("testsuites", {"name": xml_safe(f"kbench {run.run.run_id}")})
    sets = list(dict.fromkeys(r.solution_set for r in run.results))  # run order
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0, "time": 0.0}
    for name in sets:
        results = [r for r in run.results if r.solution_set == name]
        suite = ET.SubElement(root, "testsuite", {"name": xml_safe(name)})
        props = ET.SubElement(suite, "properties")
        for key, value in (("device", run.run.device), ("torch", run.run.torch_version), ("run_id", run.run.run_id)):
            ET.SubElement(props, "property", {"name": key, "value": xml_safe(value)})
        outcomes = []
        for r in results:
            case, outcome = _testcase(r, policy)
            suite.append(case)
            outcomes.append(outcome)
        counts = {"tests": len(results), "failures": outcomes.count("failed"), "errors": outcomes.count("error"),
                  "skipped": outcomes.count("skipped"), "time": sum(r.seconds for r in results)}
        _set_counts(suite, counts)
        for k in totals:
            totals[k] += counts[k]
    _set_counts(root, totals)
    return root


def _set_counts(el: ET.Element, counts: dict) -> None:
    el.set("tests", str(counts["tests"]))
    el.set("failures", str(counts["failures"]))
    el.set("errors", str(counts["errors"]))
    el.set("skipped", str(counts["skipped"]))
    el.set("time", f"{counts['time']:.3f}")


def render(run: RunResults, policy: GatePolicy) -> str:
    root = build(run, policy)
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def write(run: RunResults, path: Path, policy: GatePolicy) -> None:
    atomic_write(path, render(run, policy))
