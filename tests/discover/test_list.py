"""`kbench list`: per-problem facts computed in parallel once and cached by the file's
hash; a problem that needs a missing optional package says which."""
import contextlib
import json
import os
import subprocess
import sys
import time

import pytest
import torch

from conftest import ROOT

from harness.discover import facts as facts_cache

PROBLEMS = ROOT / "tests" / "fixtures" / "list"


def list_problems(tmp_path, cache):
    """`python cli.py list` as a user runs it, with a cache of the test's own."""
    empty = tmp_path / "no-solutions"
    empty.mkdir(exist_ok=True)
    proc = subprocess.run(
        [sys.executable, str(ROOT / "cli.py"), "list", "--problems", str(PROBLEMS), "--solutions", str(empty)],
        env=dict(os.environ, KBENCH_CACHE=str(cache)), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return proc


def test_missing_package_is_named_and_facts_are_cached(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    facts, cached = facts_cache.facts_of_files(sorted(str(p) for p in (PROBLEMS / "level1").glob("*.py")), cache,
                                               processes=2)
    by_name = {p.rsplit("/", 1)[1]: f for p, f in facts.items()}
    assert by_name["3_NeedsPackage.py"] == "needs kbench_missing_pkg"
    assert by_name["4_Broken.py"] == "ValueError: this problem is broken"
    assert by_name["1_AddReLU.py"].inputs == ("float32[256, 1024]", "float32[256, 1024]")
    assert by_name["1_AddReLU.py"].input_bytes == 2 * 256 * 1024 * 4
    assert cached == 0
    assert len(list((cache / "problem-facts").glob("*.json"))) == 4

    # A warm listing computes nothing, "needs" included (the package is still missing).
    computed, original = [], facts_cache.facts_of_file
    monkeypatch.setattr(facts_cache, "facts_of_file", lambda p: computed.append(p) or original(p))
    again, cached = facts_cache.facts_of_files(sorted(facts), cache, processes=1)
    assert again == facts and cached == 4 and computed == []

    # Once the package is installed, the cached "needs" is computed again.
    package = tmp_path / "site" / "kbench_missing_pkg"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "layers.py").write_text("")
    monkeypatch.syspath_prepend(str(package.parent))
    installed, cached = facts_cache.facts_of_files(sorted(facts), cache, processes=1)
    assert cached == 3 and [p.rsplit("/", 1)[1] for p in computed] == ["3_NeedsPackage.py"]
    assert installed[next(p for p in facts if p.endswith("3_NeedsPackage.py"))].inputs == ("float32[8]",)


def test_cli_list_says_needs_and_reuses_the_cache(tmp_path):
    cache = tmp_path / "cache"
    first = list_problems(tmp_path, cache)
    out = " ".join(first.stdout.split())  # rich may wrap a cell
    assert "needs kbench_missing_pkg" in out and "No module named" not in out
    assert "level1/3_NeedsPackage" in out and "problem facts: 0 of 4 from the cache" in first.stderr
    # The second listing reads the cache: shown by an entry edited in between.
    entries = list((cache / "problem-facts").glob("*.json"))
    edited = next(e for e in entries if "1024" in e.read_text())
    data = json.loads(edited.read_text())
    data["shape"]["inputs"] = ["FROM_THE_CACHE"]
    edited.write_text(json.dumps(data))
    second = list_problems(tmp_path, cache)
    assert "FROM_THE_CACHE" in second.stdout
    assert "problem facts: 4 of 4 from the cache" in second.stderr
    assert "needs kbench_missing_pkg" in " ".join(second.stdout.split())  # also when read from the cache


def test_changed_file_is_computed_again(tmp_path):
    problem = tmp_path / "level1" / "1_AddReLU.py"
    problem.parent.mkdir()
    problem.write_text((PROBLEMS / "level1" / "1_AddReLU.py").read_text())
    facts, _ = facts_cache.facts_of_files([str(problem)], tmp_path / "cache")
    problem.write_text(problem.read_text().replace("torch.rand(256, 1024)", "torch.rand(8, 4)"))
    again, cached = facts_cache.facts_of_files([str(problem)], tmp_path / "cache")
    assert cached == 0 and again[str(problem)].inputs == ("float32[8, 4]", "float32[8, 4]")


# Recurrent layers on the meta device: shapes and FLOPs without the step-by-step decomposition.
RECURRENT = [
    (lambda: torch.nn.LSTM(5, 7, 2, batch_first=True, bidirectional=True), (3, 4, 5), None),
    (lambda: torch.nn.LSTM(5, 7, 3, proj_size=3), (4, 3, 5), ((3, 3, 3), (3, 3, 7))),
    (lambda: torch.nn.LSTM(5, 7, 1), (4, 5), None),  # unbatched
    (lambda: torch.nn.GRU(5, 7, 2, bidirectional=True), (4, 3, 5), (4, 3, 7)),
    (lambda: torch.nn.RNN(5, 7, 2, nonlinearity="relu", bias=False, batch_first=True), (3, 4, 5), None),
]


def _run_on_meta(make, x_shape, hx_shapes, by_shape: bool):
    from torch.utils.flop_counter import FlopCounterMode

    from harness.discover.meta_rnn import RecurrentByShape

    with torch.device("meta"), torch.no_grad():
        layer, x = make(), torch.rand(x_shape)
        args = [x]
        if hx_shapes is not None:
            args.append(tuple(torch.rand(s) for s in hx_shapes) if isinstance(hx_shapes[0], tuple)
                        else torch.rand(hx_shapes))
        counter, recurrent = FlopCounterMode(display=False), RecurrentByShape()
        with counter, (recurrent if by_shape else contextlib.nullcontext()):
            out, state = layer(*args)
    tensors = [out, *(state if isinstance(state, tuple) else [state])]
    return [(tuple(t.shape), t.dtype) for t in tensors], counter.get_total_flops(), recurrent.flops


@pytest.mark.parametrize("make,x_shape,hx_shapes", RECURRENT)
def test_recurrent_layers_answered_by_shape_match_the_decomposition(make, x_shape, hx_shapes):
    """KernelBench's LSTM/GRU problems took 82 of the 86 s of a cold `kbench list`:
    the answer by shape must equal what the decomposition gives, and must be used."""
    shapes, counted, _ = _run_on_meta(make, x_shape, hx_shapes, by_shape=False)
    fast_shapes, fast_counted, by_shape = _run_on_meta(make, x_shape, hx_shapes, by_shape=True)
    assert fast_shapes == shapes
    assert fast_counted == 0 and by_shape == counted > 0  # answered without running the steps


def test_kernelbench_sized_lstm_is_described_at_once(tmp_path):
    """level3/38_LSTMBidirectional's sizes: 92,000 meta ops (16 s) before the shortcut."""
    problem = tmp_path / "level3" / "38_LSTM.py"
    problem.parent.mkdir()
    problem.write_text(
        "import torch\n"
        "class Model(torch.nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.lstm = torch.nn.LSTM(128, 256, 6, batch_first=True, bidirectional=True)\n"
        "    def forward(self, x, h0, c0):\n"
        "        return self.lstm(x, (h0, c0))[0][:, -1, :]\n"
        "def get_inputs():\n"
        "    return [torch.rand(10, 512, 128), torch.rand(12, 10, 256), torch.rand(12, 10, 256)]\n"
        "def get_init_inputs():\n"
        "    return []\n")
    start = time.perf_counter()
    facts, _ = facts_cache.facts_of_files([str(problem)], tmp_path / "cache", processes=1)
    assert time.perf_counter() - start < 8  # the first meta call in a process imports torch._dynamo (~2 s)
    shape = facts[str(problem)]
    assert shape.outputs == ("float32[10, 512]",)
    weights = 4 * 256 * (128 + 256) * 2 + 5 * 4 * 256 * (512 + 256) * 2  # layer 0, layers 1-5; both directions
    assert shape.flops == 2 * 10 * 512 * weights
