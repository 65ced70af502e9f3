"""The library API a training loop calls: the same verdicts as `kbench run`, from
source text, with no folders; a Session takes batches from several threads."""
import threading
from pathlib import Path

import pytest

import harness
from harness.records import Status
from conftest import ROOT

F = ROOT / "tests" / "fixtures" / "cpu"
PROBLEM = (F / "problems" / "level1" / "2_Hinge.py").read_text()
GOOD = (F / "solutions" / "basic" / "level1" / "2_Hinge" / "torch_ok.py").read_text()
WRONG = (F / "solutions" / "basic" / "level1" / "2_Hinge" / "wrong_axis.py").read_text()
QUICK = dict(device="cpu", time_budget=0.2, trials=2)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("KBENCH_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_evaluate_gives_the_cli_verdicts(cache):
    ok = harness.evaluate(PROBLEM, GOOD, **QUICK)
    assert ok.status is Status.OK and ok.speedup is not None and ok.check.passed
    broken = harness.evaluate(PROBLEM, "class ModelNew(:\n", **QUICK)
    assert broken.status is Status.LOAD_ERROR and "SyntaxError" in broken.message
    assert "<task0>/solution_0.py" in broken.solution_path  # named for the caller, not a cache path


def test_session_takes_batches_from_threads(cache, tmp_path):
    with harness.Session(log_dir=tmp_path / "logs", **QUICK) as session:
        futures: list = []
        lock = threading.Lock()

        def feed(src: str) -> None:
            got = session.evaluate_many([(PROBLEM, src)])
            with lock:
                futures.extend((src, f) for f in got)

        threads = [threading.Thread(target=feed, args=(s,)) for s in (GOOD, WRONG, GOOD, WRONG)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        results = [(src, f.result(timeout=300)) for src, f in futures]
    assert sorted(r.status.value for _, r in results) == ["incorrect", "incorrect", "ok", "ok"]
    for src, r in results:
        assert r.status is (Status.OK if src is GOOD else Status.INCORRECT)
        assert Path(r.log_path).is_file() and "[kbench] worker log" in Path(r.log_path).read_text()
    assert len({r.solution_path for _, r in results}) == 4  # each submission its own task


def test_evaluate_takes_a_precision(cache):
    """precision= as --precision: the honest fixture asserts it was given bf16 inputs."""
    P = ROOT / "tests" / "fixtures" / "precision"
    problem = (P / "problems" / "level1" / "1_Affine.py").read_text()
    honest = (P / "solutions" / "torch" / "level1" / "1_Affine" / "fp32_math.py").read_text()
    r = harness.evaluate(problem, honest, precision="bf16", **QUICK)
    assert r.status is Status.OK, r.message
    assert r.check.ref_rel_l2_err_fp64 > 5e-4  # the reference ran in bf16
    with pytest.raises(ValueError, match="precision must be one of fp32, fp16, bf16, not 'fp64'"):
        harness.evaluate(problem, honest, device="cpu", precision="fp64")


def test_unknown_option_is_refused_by_name():
    with pytest.raises(TypeError, match="time_budjet"):
        harness.evaluate(PROBLEM, GOOD, device="cpu", time_budjet=1.0)
    with pytest.raises(ValueError, match="device"):
        harness.evaluate(PROBLEM, GOOD, device="tpu")


def test_threads_writing_the_same_source_do_not_collide(tmp_path):
    """A Session's threads materialize the same problem at once: each must get the file
    (a shared temporary name once made all but one fail as `crashed`)."""
    from harness.run import work
    from harness.records import Source

    src = Source("<x>/problem.py", "print(1)\n" * 1000)
    errors: list = []

    def go():
        try:
            for _ in range(50):
                assert Path(work.materialize(src, tmp_path)).read_text() == src.text
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=go) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
