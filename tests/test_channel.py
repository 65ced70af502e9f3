"""The wire between judge and candidate: what crosses, and what a hostile peer cannot do."""
import socket

import pytest
import torch

from harness import channel, fingerprint
from harness.judge.timing import Side, bound_violation


def _pair():
    return socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)


def test_lent_cpu_tensors_share_memory_with_the_judge():
    """The candidate's write into a lent input is seen by the judge (input_mutation)."""
    a, b = _pair()
    shared = channel.Shared(torch.device("cpu"))
    x = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    lent = shared.lend([x, 3])
    fds: list[int] = []
    channel.send(a, {"inputs": channel.encode(lent, fds, [], by_copy=False)}, fds=fds)
    msg, blobs, got_fds = channel.recv(b)
    keep: list = []
    theirs = channel.decode(msg["inputs"], got_fds, blobs, keep)
    assert torch.equal(theirs[0], x) and theirs[1] == 3
    theirs[0][0, 0] = 100.0  # the candidate writes into its input
    assert lent[0][0, 0].item() == 100.0 and x[0, 0].item() == 0.0
    shared.close()


def test_returned_outputs_are_copies_with_their_kind():
    a, b = _pair()
    blobs: list[bytes] = []

    class Sub(torch.Tensor):
        pass

    out = (torch.ones(2, dtype=torch.bfloat16), torch.tensor(2.5).as_subclass(Sub), 7, "x")
    channel.send(a, {"o": channel.encode(out, [], blobs, by_copy=True)}, blobs)
    msg, got, _ = channel.recv(b)
    back = channel.decode(msg["o"], [], got, [])
    assert isinstance(back, tuple) and type(back[0]) is torch.Tensor and back[0].dtype == torch.bfloat16
    assert isinstance(back[1], channel.Returned) and back[1].kind == "Sub" and back[1].tensor.item() == 2.5
    assert back[2] == 7 and back[3] == "x"


@pytest.mark.parametrize("desc", [
    {"t": "Tensor", "dtype": "float32", "shape": [4], "blob": 0},  # blob has 3 bytes, not 16
    {"t": "Tensor", "dtype": "evil", "shape": [1], "blob": 0},
    {"t": "Tensor", "dtype": "float32", "shape": [-1], "blob": 0},
    {"t": "Tensor", "dtype": "float32", "shape": [1], "fd": 5},
    {"seq": "list", "items": "nope"},
    "not a dict",
])
def test_hostile_descriptors_are_refused(desc):
    with pytest.raises(channel.ChannelError):
        channel.decode(desc, [], [b"abc"], [])


def test_a_peer_that_closes_mid_message_is_a_channel_error():
    a, b = _pair()
    a.sendall(b"\x00\x00")
    a.close()
    with pytest.raises(channel.ChannelError):
        channel.recv(b)


def test_fingerprint_tells_a_stale_output_from_a_rounded_one():
    torch.manual_seed(0)
    ref = torch.randn(1000)
    fp_ref = fingerprint.project(ref, 11)
    rounded = ref * (1 + 1e-6 * torch.randn(1000))
    assert fingerprint.mismatch(fingerprint.project(rounded, 11), fp_ref, 1e-5) is None
    stale = torch.randn(1000)  # another input's answer, as a memo would return
    assert fingerprint.mismatch(fingerprint.project(stale, 11), fp_ref, 1e-5)
    assert fingerprint.mismatch([[float("nan"), 1.0]], fp_ref, 1e-5)


def _side(ms, outside, queue_outside=None, host=None, project=None):
    s = Side()
    s.ms, s.wall_ms, s.outside_ms = list(ms), list(ms), list(outside)
    s.queue_outside_ms = list(queue_outside or [0.2] * len(s.ms))
    s.host_ms = list(host or [0.01] * len(s.ms))
    s.project_ms = list(project or [0.3] * len(s.ms))
    return s


def test_samples_that_do_not_fit_the_measured_wall_time_are_refused():
    ref = _side([1.0] * 20, [0.1] * 20)
    honest = _side([0.5] * 20, [0.11] * 20)
    assert bound_violation(ref, honest) is None
    forged = _side([0.05] * 20, [1.16] * 20)  # claims 0.05 ms for calls that took 1.1 ms
    assert "too short" in bound_violation(ref, forged)
    assert "negative" in bound_violation(ref, _side([-1.0] * 20, [0.1] * 20))
    assert "no time" in bound_violation(ref, _side([0.0] * 20, [0.1] * 20), fraction=3.0)


def test_work_moved_into_the_queuing_half_is_refused_unless_reported_as_host_time():
    """A forger that runs its kernels before the held stream is released (on a
    stream it never held, or by synchronizing while queuing) leaves the release's
    wall honest; the queuing's wall, measured by the judge, must then be covered
    by the host time it reports, which the report shows."""
    ref = _side([1.0] * 20, [0.1] * 20, [0.2] * 20, [0.02] * 20)
    hidden = _side([0.05] * 20, [0.11] * 20, [1.2] * 20, [0.02] * 20)  # 1 ms of work while "queuing"
    assert "queuing" in bound_violation(ref, hidden)
    declared = _side([0.05] * 20, [0.11] * 20, [0.21] * 20, [1.0] * 20)  # the same work, declared as host time
    assert bound_violation(ref, declared) is None


def test_the_cpu_release_is_bounded_apart_from_the_flush_and_the_projection():
    """On the CPU clock the judge's own overhead is mostly the flush (queuing) and
    the projection, and three times it once bounded the release too: a forger
    could hide several milliseconds per call there. The release holds only the
    call, so its bound is its own (CPU: 1 ms); a projection that costs more for
    an honest reason (a transposed output's copy) stays within its looser one."""
    ref = _side([1.5] * 20, [0.01] * 20, [1.6] * 20, [0.0] * 20, [0.9] * 20)
    shrunk = _side([0.0015] * 20, [1.51] * 20, [1.6] * 20, [0.0] * 20, [0.9] * 20)  # a 1.5 ms call claimed as 1.5 us
    assert bound_violation(ref, shrunk, fraction=3.0) is None  # the old bound: 3x the judge's whole overhead
    assert "around the calls" in bound_violation(ref, shrunk, fraction=3.0, tight_calls_ms=1.0)
    woken_late = _side([1.5] * 20, [0.42] * 20, [1.9] * 20, [0.0] * 20, [3.5] * 20)  # honest, transposed output
    assert bound_violation(ref, woken_late, fraction=3.0, tight_calls_ms=1.0) is None
    deferred = _side([0.0015] * 20, [0.05] * 20, [1.6] * 20, [0.0] * 20, [9.0] * 20)  # the work done while projecting
    assert "projection" in bound_violation(ref, deferred, fraction=3.0, tight_calls_ms=1.0)


def test_a_cpu_candidate_that_skips_the_cache_flush_is_refused():
    """The CPU clock's queuing is the flush; a candidate that swapped its flush
    buffer for one element queues in a fifth of the judge's time, and its calls
    then run on warm caches. The GPU clock has no such floor (not measured yet)."""
    ref = _side([1.5] * 20, [0.01] * 20, [1.9] * 20, [0.0] * 20, [0.9] * 20)
    honest = _side([1.5] * 20, [0.2] * 20, [1.6] * 20, [0.0] * 20, [0.9] * 20)
    assert bound_violation(ref, honest, 3.0, 1, 1.0, 0.5) is None
    unflushed = _side([1.3] * 20, [0.2] * 20, [0.37] * 20, [0.0] * 20, [0.9] * 20)
    assert "did not flush" in bound_violation(ref, unflushed, 3.0, 1, 1.0, 0.5)
    assert bound_violation(ref, unflushed, 3.0, 1, 1.0) is None


def test_a_prepared_candidate_echoes_a_lent_tensor_before_any_solution_is_loaded():
    """A judge started ahead sends one tensor each way before its task (on a GPU, over
    CUDA IPC, so that the first export and open happen while it waits); the candidate
    answers with its own tensor, computed from the lent one, and stays ready for the task."""
    from harness.judge.remote import Remote

    remote = Remote()
    shared = channel.Shared(torch.device("cpu"))
    try:
        remote.request({"op": "ping"}, limit_s=120)
        fds: list[int] = []
        echo = channel.encode(shared.lend([torch.arange(4.0)]), fds, [], by_copy=False)
        reply, blobs = remote.request({"op": "prepare", "device": "cpu", "echo": echo}, fds, limit_s=60)
        out = remote.output(reply, blobs, torch.device("cpu"))
        assert isinstance(out, list) and torch.equal(out[0], torch.arange(4.0) + 1)
        reply, _ = remote.request({"op": "ping"}, limit_s=60)  # still serving
        assert reply == {}
    finally:
        shared.close()
        remote.close()
