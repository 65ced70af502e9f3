"""The timing benchmarks' task files, checked on the CPU through their --dry-run: every
problem imports, draws inputs and runs its reference (small sizes), every solution
parses and matches its problem's forward. No builds, no GPU."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("script", ["timing_accuracy.py", "timing_repro.py"])
def test_dry_run_writes_and_checks_the_task_files(script, tmp_path):
    done = subprocess.run([sys.executable, str(ROOT / "bench" / script), "--dry-run", "--work", str(tmp_path)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "dry run ok" in done.stdout
    solutions = tmp_path / "solutions" / "models"
    # 12 problems; the wait problem has its plain solution and three with injected waits.
    assert len(list((tmp_path / "problems").rglob("*.py"))) == 12
    waits = sorted(p.name for p in (solutions / "level1" / "12_Tanh").glob("*.py"))
    assert waits == ["wait_0us.py", "wait_10us.py", "wait_2000us.py", "wait_50us.py"]
    assert "WAIT_US = 2000\n" in (solutions / "level1" / "12_Tanh" / "wait_2000us.py").read_text()
    assert done.stdout.count("  solution ") == 15


def test_cold_set_has_twenty_candidates_each_declaring_its_verdict(tmp_path):
    """bench/cold_set.py: the 15 model-style candidates plus the 5 extras, whose first line
    declares what kbench must make of them (a hang, a crash, a build error, a wrong answer)."""
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "cold_set.py"), "--dry-run", "--work", str(tmp_path)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "20 candidates; dry run ok" in done.stdout
    declared = sorted(line.rsplit("declared ", 1)[1] for line in done.stdout.splitlines() if line.startswith("  extra "))
    assert declared == ["build_error", "crashed or runtime_error", "incorrect", "ok", "timeout"]


def test_dry_run_refuses_a_solution_whose_forward_does_not_match(tmp_path):
    sys.path.insert(0, str(ROOT / "bench"))
    import timing_tasks

    problems, solutions = timing_tasks.write_work(tmp_path)
    bad = solutions / "models" / "level1" / "4_Softmax.py"
    bad.write_text(bad.read_text().replace("def forward(self, x: torch.Tensor)", "def forward(self, x, y)"))
    with pytest.raises(AssertionError, match="ModelNew.forward takes 2 inputs"):
        timing_tasks.validate(problems, solutions)


def _row(problem: str, solution: str, ref_ms: float, sol_ms: float) -> dict:
    side = {"median_ms": 0, "iqr_ms": 0.0, "n": 10, "clock": "cuda_events", "host_ms": 0.01}
    return {"problem": problem, "solution_path": solution, "status": "ok", "message": "", "flags": [],
            "ref_ms": ref_ms, "sol_ms": sol_ms, "speedup": ref_ms / sol_ms, "timing": {"ref": side, "sol": side}}


def test_accuracy_targets_from_synthetic_results():
    """The report's arithmetic: 5% + 1 us per launch per side; a wait recovered within 3% or 1 us."""
    sys.path.insert(0, str(ROOT / "bench"))
    import timing_accuracy as acc

    wait = "level1/12_Tanh"
    results = {"run": {"device": "test"}, "results": [
        _row("level1/4_Softmax", "/w/4_Softmax.py", 0.100, 0.0546),  # sol: 2 launches of 50 us -> 4.5 us allowed
        _row(wait, "/w/wait_0us.py", 0.005, 0.006),
        _row(wait, "/w/wait_10us.py", 0.005, 0.0165),  # recovered 10.5 us: within 1 us
        _row(wait, "/w/wait_50us.py", 0.005, 0.058),  # recovered 52 us: beyond 1.5 us
        _row(wait, "/w/wait_2000us.py", 0.005, 2.050),  # recovered 2044 us: within 60 us
    ]}

    def prof(sum_us: float, launches: int, b2b_us: float | None = None) -> dict:
        b2b = {"sum_us": b2b_us or sum_us, "launches": launches, "span_us": (b2b_us or sum_us) + launches}
        return {"sum_us": sum_us, "launches": launches, "ops_us": {"spin_wait_kernel(long long)": sum_us - 5},
                "b2b": b2b}

    # Softmax's solution: 4.6 us over its cold sum (4.5 allowed), 2.6 us over its back-to-back sum.
    profiled = {"ref": {"tasks": {"/w/4_Softmax.py": prof(95.0, 1)}},
                "sol": {"tasks": {"/w/4_Softmax.py": prof(50.0, 2, b2b_us=52.0), "/w/wait_0us.py": prof(5.0, 1)}}}
    for p in ("/w/wait_0us.py", "/w/wait_10us.py", "/w/wait_50us.py", "/w/wait_2000us.py"):
        profiled["ref"]["tasks"][p] = prof(4.0, 1)
    rows = acc.build_rows(results, profiled)
    softmax = rows[0]
    assert softmax["ref"]["met"] and softmax["ref"]["allowed_us"] == 95.0 * 0.05 + 1.0
    assert not softmax["sol"]["met"] and round(softmax["sol"]["error_us"], 6) == 4.6
    assert softmax["sol"]["b2b"]["met"] and round(softmax["sol"]["b2b"]["error_us"], 6) == 2.6
    assert rows[2]["sol"]["profiler"] == {"error": "not profiled"} and not rows[2]["sol"]["met"]
    waits = {w["wait_us"]: w for w in acc.wait_rows(rows)}
    assert waits[10]["met"] and not waits[50]["met"] and waits[2000]["met"]
    assert round(waits[2000]["recovered_us"], 6) == 2044.0
    text = acc.render(rows, list(waits.values()), results["run"], "cmd", 1.0)
    assert "**6 of 10 sides within 5% + 1 us per launch (cold, one call after a flush).**" in text
    assert "**7 of 10 sides within 5% + 1 us per launch (back to back, as kbench times them).**" in text
    assert "| NO | 95.00 | 96.00 | 52.00 | 54.00 | yes |" in text  # Softmax: cold verdict, b2b and span, b2b verdict
    assert "**2 of 3 waits" in text


def test_repro_spread_and_targets():
    sys.path.insert(0, str(ROOT / "bench"))
    import timing_repro as repro

    def run(speedup: float, ref_us: float, sol_us: float) -> dict:
        side = lambda x: {"us": x, "clock": "cuda_events"}  # noqa: E731
        return {"tasks": {"t": {"status": "ok", "speedup": speedup, "ref": side(ref_us), "sol": side(sol_us)}}}

    big = repro.summarize([run(2.00, 400, 200), run(2.01, 400, 199), run(2.005, 401, 199)], "t")
    assert big["target"] == 0.01 and round(big["spread"], 4) == 0.005 and big["met"]
    wide = repro.summarize([run(2.00, 400, 200), run(2.03, 400, 197), run(2.01, 401, 199)], "t")
    assert wide["target"] == 0.01 and not wide["met"]  # 1.5% above 100 us
    small = repro.summarize([run(1.0, 5, 5), run(1.02, 5, 4.9), run(1.0, 5, 5)], "t")
    assert small["target"] == 0.03 and small["met"]  # 2% at 3-100 us
    tiny = repro.summarize([run(1.0, 2, 2)] * 3, "t")
    assert tiny["target"] is None and not tiny["met"]  # under 3 us: no target
    assert "level1/12_Tanh [wait_50us]" in repro.TASKS and "level1/10_Matmul" not in repro.TASKS
    table = {c: {t: big for t in repro.TASKS} for c in ("quiet", "loaded")}
    text = repro.render(table, {"compiles": 40, "loadavg_before": 0.5, "loadavg_after": 17.0}, "cmd", "test", 1.0)
    assert f"**{2 * len(repro.TASKS)} of {2 * len(repro.TASKS)} within target**" in text


def test_profiled_ops_split_into_calls_between_markers_around_each_flush():
    sys.path.insert(0, str(ROOT / "bench"))
    import timing_accuracy as acc

    # Each call is queued as marker M, flush (here a memset and a reduction), M, the call. The
    # calls here launch a memset of their own, as MSELoss's mean does: it must not split a call.
    flush = ["memset", "sum"]
    names = ["x", "M", *flush, "M", "a", "memset", "b", "M", *flush, "M", "a", "M", *flush, "M", "memset", "c"]
    ops = [{"name": n, "ts": i, "dur": 1.0} for i, n in enumerate(names)]  # "x": before any marker
    calls = acc.split_calls(ops, {"M"}, flush)
    assert [[op["name"] for op in call] for call in calls] == [["a", "memset", "b"], ["a"], ["memset", "c"]]
    # A trace that lost its first records (the first flush cut short) loses that call only.
    assert len(acc.split_calls(ops[3:], {"M"}, flush)) == 2


def test_gpu_scaling_set_has_twenty_candidates_one_exiting_after_its_build(tmp_path):
    """bench/gpu_scaling.py: the cold set less one wait copy, plus a kernel that exits at
    import after its build (a rerun must not build it again)."""
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "gpu_scaling.py"), "--dry-run", "--work", str(tmp_path)],
                          capture_output=True, text=True, timeout=300, cwd=ROOT / "bench")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "20 candidates; dry run ok" in done.stdout
    exits = tmp_path / "solutions" / "extra" / "level1" / "11_MSELoss.py"
    text = exits.read_text()
    assert text.index("load_inline(") < text.index("os._exit(3)")
    assert not (tmp_path / "solutions" / "models" / "level1" / "12_Tanh" / "wait_10us.py").exists()


def test_gpu_scaling_reads_each_judges_start_from_its_task_log(tmp_path):
    """bench/gpu_scaling.py reads the line the judge writes (judge/main.py) back into
    seconds, both for a judge told it was next and for one that was not, exec'd or forked
    from a template, and names the tasks that waited for their judges."""
    sys.path.insert(0, str(ROOT / "bench"))
    import gpu_scaling
    from harness.judge.main import _ages_line

    told, untold = tmp_path / "told.log", tmp_path / "untold.log"
    told.write_text("[kbench] build log\n[kbench] this judge's start: " +
                    _ages_line({"imported": 5.38, "told_next": 14.48, "prepared": 17.82, "spec": 17.9}) + "\nmore\n")
    untold.write_text("[kbench] this judge's start: " + _ages_line({"imported": 0.01, "spec": 0.02, "forked": True}) + "\n")
    assert gpu_scaling.judge_start(str(told)) == {"imported": 5.38, "told_next": 14.48, "prepared": 17.82, "spec": 17.9,
                                                  "forked": False}
    assert gpu_scaling.judge_start(str(untold)) == {"imported": 0.01, "spec": 0.02, "forked": True}
    assert gpu_scaling.judge_start(str(tmp_path / "none.log")) is None  # a build error: no judge, no log line
    run = {"name": "4gpu-1", "tasks": {
        "a.py": {"phases": {"judge_wait": 3.9}, "judge": gpu_scaling.judge_start(str(told))},
        "b.py": {"phases": {"judge_wait": 0.2}, "judge": gpu_scaling.judge_start(str(untold))},
        "c.py": {"phases": {}, "judge": None}}}
    assert gpu_scaling.judge_waits(run) == ("- 4gpu-1: 1 tasks waited more than 1 s for their judge, 3.9 s in all; "
                                            "their judges' imports done at 5.4-5.4 s and ready at 17.8-17.8 s from "
                                            "their start")
    run["tasks"]["a.py"]["phases"]["judge_wait"] = 0.5
    assert gpu_scaling.judge_waits(run) == "- 4gpu-1: no task waited more than 1 s for its judge"


def test_run_phases_reads_a_results_file(tmp_path):
    """bench/run_phases.py: the run's phases, the tasks' phases summed, what came after the reports."""
    sys.path.insert(0, str(ROOT / "bench"))
    import run_phases

    data = {"run": {"phase_seconds": {"start": 1.0, "tasks": 5.0, "until_reports": 7.0}},
            "results": [{"phase_seconds": {"check": 1.5, "time": 1.0}, "spent_seconds": {"timing": 0.8}},
                        {"phase_seconds": {"check": 0.5}, "spent_seconds": {}}]}
    summary = run_phases.summarize(data, wall=8.5)
    assert summary["tasks"] == {"check": 2.0, "time": 1.0} and summary["after_reports"] == 1.5
    table = run_phases.render({"r": summary})
    assert "| start | 1.00 |" in table and "| check | 2.00 |" in table and "| **wall** | 8.50 |" in table


def test_evidence_bench_adds_its_honest_kernels_to_the_accuracy_set(tmp_path):
    """bench/evidence/run.py: the accuracy set plus problems 13-35 and their 33 candidates (a microsecond softmax and
    its in-place copy, Triton pipelines, cuBLAS with an epilogue, a bf16 norm, a tuple output, a build in
    ModelNew.__init__, ...); all written the way models write them, checked on the CPU."""
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "evidence" / "run.py"), "--dry-run", "--work",
                           str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "dry run ok" in done.stdout
    assert len(list((tmp_path / "problems").rglob("*.py"))) == 35
    assert done.stdout.count("  solution ") == 48
    assert "13_Softmax_Small/in_place.py: load_inline, legacy default stream" in done.stdout
    assert "14_RowSum_Small.py: Triton" in done.stdout
    assert "33_L2Norm.py: Triton, autotuned" in done.stdout
    assert "level1/30_VarMean: inputs [[16384, 4096]] (0.268 GB) -> [[16384], [16384]] float32" in done.stdout
    assert "-> [16384, 4096] bfloat16" in done.stdout


def test_evidence_cpu_shim_rewrites_launches():
    """cpu_kernels.py turns a CUDA source into C++ for its thread-per-CUDA-thread shim: launches become calls, extern
    shared arrays point at the dynamic buffer, CUDA headers go."""
    sys.path.insert(0, str(ROOT / "bench" / "evidence"))
    import cpu_kernels

    src = ("#include <cuda_runtime.h>\n__global__ void k(float* x) { extern __shared__ float s[]; }\n"
           "void f(torch::Tensor x) { k<scalar_t><<<dim3(2, 3), 256, 256 * sizeof(float)>>>(x.data_ptr<float>()); "
           "g<<<n, 32>>>(a, (b + 1)); }")
    out = cpu_kernels.to_cpu_source(src)
    assert "cuda_runtime" not in out and "<<<" not in out
    assert "float* s = reinterpret_cast<float*>(emu::dyn_smem.data());" in out
    assert ("emu::launch(dim3(dim3(2, 3)), dim3(256), (size_t)(256 * sizeof(float)), "
            "[&] { k<scalar_t>(x.data_ptr<float>()); })") in out
    assert "emu::launch(dim3(n), dim3(32), (size_t)(0), [&] { g(a, (b + 1)); })" in out


def test_evidence_alarms_from_synthetic_results():
    """An honest task is an alarm if it is not ok or carries a gate-failing flag; the in-place softmax must carry
    exactly input_mutation."""
    sys.path.insert(0, str(ROOT / "bench" / "evidence"))
    import run as evidence

    row = _row("level1/15_Matmul_Square", "/w/solutions/models/level1/15_Matmul_Square.py", 2.6, 25.0)
    assert evidence.alarms(row) == []
    assert evidence.alarms({**row, "flags": ["noisy", "host_bound"]}) == []
    assert evidence.alarms({**row, "flags": ["timing_mismatch"], "message": "leaves 1.08 ms"}) == [
        "flagged timing_mismatch: leaves 1.08 ms"]
    assert evidence.alarms({**row, "status": "runtime_error", "message": "boom"}) == ["runtime_error: boom"]
    in_place = _row("level1/13_Softmax_Small", "/w/solutions/models/level1/13_Softmax_Small/in_place.py", 0.01, 0.01)
    assert evidence.label(in_place) == "level1/13_Softmax_Small [in_place]"
    assert evidence.alarms(in_place) == ["lacks input_mutation"]
    assert evidence.alarms({**in_place, "flags": ["input_mutation"]}) == []
    rows = evidence.summarize([{"results": [row]}, {"results": [{**row, "speedup": 0.1}]}])
    assert rows[0]["task"] == "level1/15_Matmul_Square" and abs(rows[0]["spread_pct"] - 4.0) < 1e-6


def test_evidence_table_from_runs_of_separate_calls(tmp_path):
    """`run.py --from A B C`: the table of runs made apart (one device call each), one run per
    results.json in order, its card and kbench's arguments read from the files themselves."""
    row = _row("level1/15_Matmul_Square", "/w1/solutions/models/level1/15_Matmul_Square.py", 2.6, 25.0)
    info = {"device": "NVIDIA H200", "torch_version": "2.11.0+cu130", "cuda_version": "13.0",
            "started": "2026-11-29T06:00:00+00:00", "finished": "2026-11-29T06:04:00+00:00",
            "options": {"timeout": 300.0, "timing": {"budget_s": 4.0}}}
    paths = []
    for k, speedup in enumerate((0.104, 0.1, 0.102)):
        path = tmp_path / f"results{k + 1}.json"
        path.write_text(json.dumps({"run": info, "results": [{**row, "speedup": speedup,
                                                              "solution_path": row["solution_path"].replace(
                                                                  "/w1/", f"/w{k + 1}/")}]}))
        paths.append(str(path))
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "evidence" / "run.py"), "--from", *paths,
                           "--md", str(tmp_path / "t.md")], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    table = (tmp_path / "t.md").read_text()
    assert "NVIDIA H200, torch 2.11.0+cu130" in table and "(720 s, 3 runs, kbench --time-budget 4 --timeout 300)" in table
    assert "**0 alarms over 1 honest tasks x 3 runs**" in table and "| 4.0% |" in table


def test_calm_under_load_writes_its_copies_and_reads_results(tmp_path):
    """bench/calm_under_load.py: the accuracy set and two copies of it (sets copy2, copy3) that differ from it by one
    first line, each a build of its own; checked on the CPU. Then its table from synthetic results: a task's copies
    are one row, an honest task not ok or with a gate-failing flag is an alarm."""
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "calm_under_load.py"), "--dry-run", "--work",
                           str(tmp_path), "--copies", "3"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "dry run ok: 45 tasks per run" in done.stdout
    assert "set copy3: 15 copies of models, one distinct first line each" in done.stdout
    sys.path.insert(0, str(ROOT / "bench"))
    import calm_under_load as calm

    row = _row("level1/10_Matmul", "/w/solutions/models/level1/10_Matmul.py", 2.0, 1.0)
    copy = {**_row("level1/10_Matmul", "/w/solutions/copy2/level1/10_Matmul.py", 2.2, 1.0), "solution_set": "copy2"}
    flagged = {**copy, "flags": ["contended"], "message": "busy"}
    runs = [{"mode": "reserve", "run": 1, "results": [{**row, "solution_set": "models"}, copy]},
            {"mode": "no-reserve", "run": 1, "results": [{**row, "solution_set": "models"}, flagged]}]
    summary = calm.summarize(runs)
    calm_row = summary["reserve"]["level1/10_Matmul"]
    assert calm_row["alarms"] == [] and abs(calm_row["spread_pct"] - 10.0) < 1e-6
    assert summary["no-reserve"]["level1/10_Matmul"]["alarms"] == ["run 1 copy2: ok +contended: busy"]
    assert calm._role(b"/usr/bin/python3\0-m\0harness.candidate\0003\0/tmp/x\0") == "candidate"
    assert calm._role(b"/usr/lib/gcc/x86_64-linux-gnu/12/cc1plus\0-quiet\0") == "compiler"
    assert calm._role(b"bash\0-c\0python -m harness.build\0") is None


def test_cpu_read_bench_reads_through_both_paths():
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "cpu_read.py"), "--mb", "1", "--reads", "2",
                           "--calls", "2"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("[cpu_read]")]
    assert len(lines) == 2 and "process_vm_readv" in lines[0] and "/proc/<pid>/mem" in lines[1], done.stdout


def test_suite_cpu_sums_each_module_from_its_tests_lines(tmp_path):
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        import suite_cpu
    finally:
        sys.path.remove(str(ROOT / "bench"))
    rows = [{"id": "tests/a.py::t1", "cpu": 2.0, "wall": 3.0}, {"id": "tests/b.py::t", "cpu": 5.5, "wall": 1.0},
            {"id": "tests/a.py::t2[x]", "cpu": 1.5, "wall": 0.5}]
    (tmp_path / "1.jsonl").write_text("\n".join(json.dumps(r) for r in rows[:2]) + "\n")
    (tmp_path / "2.jsonl").write_text(json.dumps(rows[2]) + "\n")
    table = suite_cpu.summary(tmp_path).splitlines()
    assert table[0] == "9 CPU-s in 3 tests"
    assert table[3:] == ["| tests/b.py | 5.5 | 1.0 | 1 |", "| tests/a.py | 3.5 | 3.5 | 2 |"]
