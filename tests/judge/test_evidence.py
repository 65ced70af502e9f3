"""The judge's own evidence: it stops the candidate, reads its outputs from its memory,
and measures its CPU time from outside (judge/freeze.py, judge/read.py, batches.py)."""
import os
import signal
import subprocess
import sys
import time

import pytest
import torch

from harness.shared import batches, channel
from harness.shared.locate import Locator
from harness.judge.freeze import Freezer, _stopped, process_cpu_seconds
from harness.judge.read import OutputUnreadable, Reader, span_bytes

# A child that prints the address of a float32 tensor's data and its values, then spins.
_CHILD = """
import sys, torch
x = torch.arange(12, dtype=torch.float32).reshape(3, 4).t()  # a transposed view: strides (1, 4)
print(x.data_ptr(), flush=True)
while True:
    x.add_(0)
"""


def _spawn(code: str, session: bool = True) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                            start_new_session=session)


def test_the_judge_reads_an_output_in_the_candidates_memory():
    """On the CPU an output is read through /proc/<pid>/mem at the address the
    candidate names, with its strides: a view, a transpose, a tuple, a number."""
    child = _spawn(_CHILD)
    try:
        address = int(child.stdout.readline())
        reader = Reader(torch.device("cpu"), child.pid, lambda i: None)
        layout = {"t": "Tensor", "dtype": "float32", "shape": [4, 3], "stride": [1, 4], "device": "cpu"}
        out = reader.read({"seq": "tuple", "items": [{**layout, "at": ["addr", address]}, {"v": 7}]})
        assert torch.equal(out[0], torch.arange(12, dtype=torch.float32).reshape(3, 4).t()) and out[1] == 7
        with pytest.raises(OutputUnreadable, match="cannot read"):
            reader.read({**layout, "at": ["addr", 8]})  # nothing is mapped at address 8
        reader.close()
    finally:
        child.kill()
        child.wait()


@pytest.mark.parametrize("desc", [
    {"t": "Tensor", "dtype": "float32", "shape": [2], "stride": [1], "device": "cpu", "at": ["seg", 0, 0]},
    {"t": "Tensor", "dtype": "float32", "shape": [2], "stride": [-1], "device": "cpu", "at": ["addr", 4096]},
    {"t": "Tensor", "dtype": "evil", "shape": [2], "stride": [1], "device": "cpu", "at": ["addr", 4096]},
    {"t": "Tensor", "dtype": "float32", "shape": [2], "stride": [1], "device": "cpu"},
    {"seq": "list", "items": 3},
    {"v": {"a": 1}},
    "not a dict",
])
def test_hostile_output_descriptions_are_refused(desc):
    with pytest.raises(channel.ChannelError):
        Reader(torch.device("cpu"), os.getpid(), lambda i: None).read(desc)


def test_a_subclass_is_refused_on_its_type_without_reading_its_memory():
    out = Reader(torch.device("cpu"), os.getpid(), lambda i: None).read(
        {"t": "LazyTensor", "dtype": "float32", "shape": [2, 3], "stride": [3, 1], "device": "cpu", "at": ["none"]})
    assert isinstance(out, channel.Returned) and out.kind == "LazyTensor" and list(out.tensor.shape) == [2, 3]


def test_spans_cover_strided_and_expanded_tensors():
    assert span_bytes([3, 4], [4, 1], 4) == 48
    assert span_bytes([4, 3], [1, 4], 4) == 48  # a transpose covers the same bytes
    assert span_bytes([5, 1000], [1, 0], 2) == 10  # expanded along a stride-0 dimension
    assert span_bytes([0, 7], [7, 1], 4) == 0


def test_a_batch_log_names_each_calls_outputs_compactly():
    """Call 0 is described whole; the others by location only, unless their layout
    differs (then whole): what the judge needs to read every call, and no more."""
    loc = Locator(torch.device("cpu"))
    log = batches.Log(loc.at, loc.describe)
    a, b = torch.zeros(2, 3), torch.zeros(2, 3)
    log.note((a, 1))
    log.note((b, 1))
    log.note((torch.zeros(3, 2).t(), 1))  # another layout: described whole
    assert log.first["items"][0]["at"] == ["addr", a.data_ptr()] and log.ats[1] == [["addr", b.data_ptr()]]
    assert 2 in log.odd and log.odd[2]["items"][0]["stride"] == [1, 2]


def test_an_eager_batch_keeps_every_calls_output_until_the_next():
    copies = [[torch.full((2,), float(i))] for i in range(4)]
    batch = batches.Eager(lambda xs: xs[0] * 2, copies)
    assert batches.run_timed(batch, 4, torch.device("cpu")) == (None, None)
    assert [float(o[0]) for o in batch.outs] == [0.0, 2.0, 4.0, 6.0]


# A child in a session of its own that starts a grandchild in yet another session
# (setsid, as a daemon would); both spin. Prints both pids.
_TREE = """
import os, subprocess, sys
g = subprocess.Popen([sys.executable, "-c", "import os; os.setsid(); print(os.getpid(), flush=True)\\nwhile True: pass"],
                     stdout=subprocess.PIPE, text=True)
print(os.getpid(), g.stdout.readline().strip(), flush=True)
while True:
    pass
"""


def test_the_freezer_stops_the_candidate_and_all_it_started_and_measures_their_cpu():
    """A process the candidate started in a new session is stopped with it (nothing of
    the solution's runs while the judge times the reference), their CPU clocks stand
    still while stopped and run again once continued; the judge's own helpers (its
    session) are left alone."""
    helper = _spawn("import time\nprint(1, flush=True)\ntime.sleep(60)", session=False)
    child = _spawn(_TREE)
    try:
        _pid, grandchild = map(int, child.stdout.readline().split())
        helper.stdout.readline()
        freezer = Freezer(child.pid)
        assert set(freezer.members()) >= {child.pid, grandchild} and helper.pid not in freezer.members()
        freezer.stop()
        freezer.wait_stopped()
        assert freezer.unstoppable == []
        assert _stopped(child.pid, own_child=True) and _stopped(grandchild, own_child=False)
        used, by_pid = freezer.cpu_seconds(), freezer.cpu_by_member()
        time.sleep(0.3)
        assert freezer.cpu_seconds() - used < 0.01  # nothing ran while stopped
        # Not a tick: held.release takes the judge's wait for a CPU out of a measure only
        # where no member's clock moved at all.
        assert freezer.cpu_by_member() == by_pid and set(by_pid) >= {child.pid, grandchild}
        freezer.thaw()
        time.sleep(0.3)
        assert process_cpu_seconds(grandchild) > 0 and freezer.cpu_seconds() - used > 0.05
        assert not _stopped(helper.pid, own_child=True)
    finally:
        for p in (child, helper):
            os.killpg(p.pid, signal.SIGKILL) if p is child else p.kill()
        try:
            os.kill(grandchild, signal.SIGKILL)
        except (ProcessLookupError, UnboundLocalError):
            pass
        child.wait(), helper.wait()


def test_outputs_of_two_calls_in_one_buffer_are_told_by_their_locations():
    """A batch whose calls return one buffer: on the CPU the judge reads copies, which
    never overlap, so the locations the candidate gave decide (the solution is then
    timed one call per batch, not failed)."""
    from harness.judge.timing import _SharedMemory, _refuse_shared_memory

    layout = {"t": "Tensor", "dtype": "float32", "shape": [4, 4], "stride": [4, 1], "device": "cpu"}
    apart = [{**layout, "at": ["addr", 4096 + 64 * i]} for i in range(3)]
    _refuse_shared_memory(apart, [])
    with pytest.raises(_SharedMemory, match="calls 1 and 2 share memory"):
        _refuse_shared_memory([{**layout, "at": ["addr", 4096]}, {**layout, "at": ["addr", 4096 + 32]}], [])
    in_segments = [{**layout, "at": ["seg", 0, 0]}, {**layout, "at": ["seg", 1, 0]}]  # two segments: no overlap
    _refuse_shared_memory(in_segments, ["aGFuZGxlMQ==", "aGFuZGxlMg=="])
    with pytest.raises(_SharedMemory):
        _refuse_shared_memory(in_segments, ["aGFuZGxlMQ==", "aGFuZGxlMQ=="])  # the same segment, the same offset


def _child_with_pages(protect_second: bool):
    """A child process holding two pages: the first reads b'A', the second b'B' (made
    unreadable to process_vm_readv with PROT_NONE when `protect_second`); its address."""
    import subprocess
    import sys

    code = ("import ctypes, mmap, sys, time\n"
            "m = mmap.mmap(-1, 2 * mmap.PAGESIZE)\n"
            "m[:mmap.PAGESIZE] = b'A' * mmap.PAGESIZE; m[mmap.PAGESIZE:] = b'B' * mmap.PAGESIZE\n"
            "addr = ctypes.addressof(ctypes.c_char.from_buffer(m))\n"
            "if sys.argv[1] == '1':\n"
            "    libc = ctypes.CDLL(None, use_errno=True)\n"
            "    assert libc.mprotect(ctypes.c_void_p(addr + mmap.PAGESIZE), mmap.PAGESIZE, 0) == 0\n"
            "print(addr, flush=True)\n"
            "time.sleep(60)\n")
    child = subprocess.Popen([sys.executable, "-c", code, "1" if protect_second else "0"], stdout=subprocess.PIPE,
                             text=True)
    return child, int(child.stdout.readline())


def test_the_cpu_read_is_one_copy_and_reads_what_proc_mem_reads(monkeypatch):
    """Outputs are read with process_vm_readv; memory it cannot read (a page the candidate
    made PROT_NONE) is read through /proc/<pid>/mem as before, whose forced read sees it."""
    import mmap

    from harness.judge import read

    page, real = mmap.PAGESIZE, read._vm_readv
    for protect in (False, True):
        child, addr = _child_with_pages(protect)
        calls = []
        monkeypatch.setattr(read, "_vm_readv", lambda *a: calls.append(a) or real(*a))
        try:
            reader = Reader(torch.device("cpu"), child.pid, lambda i: None)
            got = reader._read_host(addr, 2 * page)
            assert bytes(got.numpy()) == b"A" * page + b"B" * page
            rows = reader._read_host_many([addr, addr + page], page)
            assert bytes(rows.numpy()) == b"A" * page + b"B" * page
            assert len(calls) == 3 and reader._vm_read  # tried each time; a partial read is finished by /proc
            reader.close()
        finally:
            child.kill()
            child.wait()
