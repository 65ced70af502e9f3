"""report.html: one self-contained page. Parsed as XML (well-formed, nothing fetched
from elsewhere, every string from results escaped), compared with a golden file,
and rendered by a real headless Chromium where one is installed."""
import dataclasses
import os
import shutil
import subprocess
import xml.etree.ElementTree as ET
from html.parser import HTMLParser

import pytest
from click.testing import CliRunner

import cli
from harness.report import html, write as report
from harness.report.gate import GatePolicy
from harness.records import RunInfo, RunResults, Status, TaskResult
from test_report import check_golden, golden_run

SVG = "{http://www.w3.org/2000/svg}"
EVIL = """<script>alert("pwned")</script> & 'quoted' <img src="http://example.com/x.png"> \x1b[31mred\x1b[0m </pre>"""


def with_roofline(r: TaskResult, floor_ms: float, gbytes: float) -> TaskResult:
    return dataclasses.replace(r, timing=dataclasses.replace(r.timing, floor_ms=floor_ms, bytes_moved=int(gbytes * 1e9)))


def html_run() -> RunResults:
    """The report's golden run, two tasks with roofline fields (one under the floor),
    and a solution whose set name and message are markup."""
    base = golden_run()
    # only the two tasks below carry roofline fields here
    results = [r if r.timing is None else dataclasses.replace(
        r, timing=dataclasses.replace(r.timing, floor_ms=None, bytes_moved=None)) for r in base.results]
    results[0] = with_roofline(results[0], 4.27, 12.9)  # softmax: 2688 GB/s of 3021
    results[2] = with_roofline(results[2], 0.178, 0.5375)  # cross entropy below_roofline: 3402 GB/s of 3020
    results.append(TaskResult(
        problem="level1/23_Softmax", solution_set='x"><b>set', solution_path='solutions/x"><b>set/level1/23_Softmax.py',
        status=Status.RUNTIME_ERROR, message=EVIL, phase="check", seconds=1.0,
    ))
    return RunResults(base.run, tuple(results))


def parse(text: str) -> ET.Element:
    assert text.startswith("<!DOCTYPE html>\n")
    return ET.fromstring(text.split("\n", 1)[1])  # XML-parsable: well-formed, all tags closed


@pytest.fixture(scope="module")
def page() -> str:
    return html.render(html_run(), GatePolicy())


def test_golden(page):
    check_golden("report.html", page)


def test_is_well_formed_with_both_charts_and_a_row_per_task(page):
    root = parse(page)
    assert root.tag == "html"
    charts = {el.get("id"): el for el in root.iter(f"{SVG}svg")}
    assert set(charts) == {"speedup-chart", "roofline-chart"}
    # a dot per task with a speedup (4 ok and timed in the golden run), a bar per task with roofline fields
    assert len(list(charts["speedup-chart"].iter(f"{SVG}circle"))) == 4
    assert len(list(charts["roofline-chart"].iter(f"{SVG}rect"))) == 2
    rows = root.find(".//table[@id='tasks']/tbody").findall("tr")
    assert len(rows) == len(html_run().results) == 9
    assert [r.get("class") for r in rows].count("task pass") == 3
    assert "7 of 9 tasks not shown" in page  # the roofline says what it left out


def test_nothing_is_fetched_from_elsewhere(page):
    root = parse(page)
    tags = {el.tag.replace(SVG, "") for el in root.iter()}
    assert not tags & {"script", "link", "img", "iframe", "object", "embed", "image", "use", "foreignObject"}
    for el in root.iter():
        assert not set(el.attrib) & {"src", "href", "{http://www.w3.org/1999/xlink}href"}, el.tag
    style = root.find("head/style").text
    assert "url(" not in style and "@import" not in style and "@font-face" not in style


def test_strings_from_results_show_as_text(page):
    root = parse(page)  # an unescaped message would add a script element or break the parse
    texts = [el.text for el in root.iter("pre")]
    assert EVIL.replace("\x1b", "\\x1b") in texts  # whole, with the control characters XML cannot hold shown as codes
    assert any(el.text == 'runtime_error: level1/23_Softmax (x"><b>set)' for el in root.iter("h3"))
    assert not list(root.iter("b"))
    assert "<script>" not in page and "&lt;script&gt;" in page


def test_charts_say_so_when_there_is_nothing_to_draw():
    run = golden_run()
    untimed = RunResults(run.run, tuple(dataclasses.replace(r, speedup=None, timing=None) for r in run.results))
    root = parse(html.render(untimed, GatePolicy()))
    assert not list(root.iter(f"{SVG}svg"))
    text = "".join(root.itertext())
    assert "No task has a speedup" in text and "No task has bytes_moved and floor_ms" in text


def test_empty_run_renders():
    root = parse(html.render(RunResults(golden_run().run, ()), GatePolicy()))
    assert root.find(".//table[@id='tasks']/tbody").findall("tr") == []


def test_cli_writes_html_to_out_or_stdout(tmp_path):
    src = tmp_path / "results.json"
    report.write_json(html_run(), src)
    out = tmp_path / "page" / "report.html"
    out.parent.mkdir()  # --out creates no folder (tests/cli/test_cli_options.py)
    res = CliRunner().invoke(cli.main, ["report", str(src), "--format", "html", "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert res.stdout == "" and str(out) in res.stderr
    assert out.read_text() == html.render(html_run(), GatePolicy())
    res = CliRunner().invoke(cli.main, ["report", str(src), "--format", "html"])
    assert res.exit_code == 0 and res.stdout == out.read_text()


# ---- a real browser -------------------------------------------------------------

def find_chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        if shutil.which(name):
            return shutil.which(name)
    return None


class DomSummary(HTMLParser):
    """What the browser built: element ids, task-table rows, shapes in each chart."""

    def __init__(self):
        super().__init__()
        self.ids, self.task_rows, self.shapes, self.stack = [], 0, {}, []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if a.get("id"):
            self.ids.append(a["id"])
        if tag == "tr" and "task" in (a.get("class") or "").split():
            self.task_rows += 1
        if tag == "svg":
            self.stack.append(a.get("id"))
        elif tag in ("circle", "rect") and self.stack:
            self.shapes[self.stack[-1]] = self.shapes.get(self.stack[-1], 0) + 1

    def handle_endtag(self, tag):
        if tag == "svg" and self.stack:
            self.stack.pop()


def test_renders_in_headless_chromium(tmp_path, page):
    browser = find_chromium()
    if browser is None:
        pytest.skip("chromium is not installed (apt-get install -y chromium; .ci/run installs it)")
    path = tmp_path / "report.html"
    path.write_text(page)
    cmd = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
           "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-dev-shm-usage",
           f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom", path.as_uri()]
    try:  # a page that runs a script (an unescaped alert()) hangs headless Chromium: fail, do not wait forever
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=dict(os.environ, HOME=str(tmp_path)))
    except subprocess.TimeoutExpired:
        pytest.fail("chromium --dump-dom did not finish in 60 s")
    assert proc.returncode == 0, proc.stderr[-2000:]
    dom = DomSummary()
    dom.feed(proc.stdout)
    assert dom.task_rows == 9
    assert {"speedup-chart", "roofline-chart", "tasks", "failures"} <= set(dom.ids)
    assert dom.shapes == {"speedup-chart": 4, "roofline-chart": 2}
    assert "<script>" not in proc.stdout  # the browser, too, saw the message as text


def test_infinite_speedup_renders_and_says_it_is_left_out_of_the_chart(tmp_path):
    """A solution timed at 0 (a clock too coarse for it) has an infinite speedup: the page
    must still render (it raised OverflowError on the log axis), from the CLI too."""
    run = golden_run()
    first = run.results[0]
    zero = dataclasses.replace(
        first, sol_ms=0.0, speedup=float("inf"),
        timing=dataclasses.replace(first.timing, sol=dataclasses.replace(first.timing.sol, median_ms=0.0),
                                   speedup=float("inf"), speedup_ci=(float("inf"), float("inf"))))
    run = RunResults(run.run, (zero,) + run.results[1:])
    src = tmp_path / "results.json"
    report.write_json(run, src)
    res = CliRunner().invoke(cli.main, ["report", str(src), "--format", "html"])
    assert res.exit_code == 0, res.output
    root = parse(res.stdout)
    text = "".join(root.itertext())
    assert "1 task with an infinite speedup (a solution time of 0) not shown." in text
    assert len(list(root.find(f".//{SVG}svg[@id='speedup-chart']").iter(f"{SVG}circle"))) == 3  # the finite ones


def test_a_problem_that_failed_is_named_as_the_problems():
    from test_report import problem_error

    run = RunResults(html_run().run, html_run().results + (problem_error("solutions/m/level1/98_KLDivLoss.py"),))
    root = parse(html.render(run, GatePolicy()))
    table = root.find(".//table[@id='problem-errors']")
    cells = [td.text for td in table.iter("td")]
    assert cells[:2] == ["level1/98_KLDivLoss", "1"] and "fix the problem file" in cells[2]
    assert parse(html.render(html_run(), GatePolicy())).find(".//table[@id='problem-errors']") is None
