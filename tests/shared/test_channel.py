"""The wire between judge and candidate: what crosses, and what a hostile peer cannot do."""
import socket

import pytest
import torch

from harness.shared import channel


def _pair():
    return socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)


def test_lent_cpu_tensors_share_memory_with_the_judge():
    """The candidate's write into a lent input is seen by the judge (input_mutation)."""
    a, b = _pair()
    shared = channel.Shared(torch.device("cpu"))
    x = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    lent = shared.lend([x, 3])
    fds: list[int] = []
    channel.send(a, {"inputs": channel.encode(lent, fds)}, fds=fds)
    msg, _blobs, got_fds = channel.recv(b)
    keep: list = []
    ids: list = []
    theirs = channel.decode(msg["inputs"], got_fds, keep, ids)
    assert torch.equal(theirs[0], x) and theirs[1] == 3
    # Each lent tensor has an id by which the candidate can say an output lies in it.
    assert len(ids) == 1 and ids[0][0] is theirs[0] and shared.by_id(ids[0][1]) is lent[0]
    theirs[0][0, 0] = 100.0  # the candidate writes into its input
    assert lent[0][0, 0].item() == 100.0 and x[0, 0].item() == 0.0
    shared.close()


@pytest.mark.parametrize("desc", [
    {"t": "Tensor", "dtype": "float32", "shape": [4], "blob": 0},  # values never cross as bytes
    {"t": "Tensor", "dtype": "evil", "shape": [1], "fd": 0},
    {"t": "Tensor", "dtype": "float32", "shape": [-1], "fd": 0},
    {"t": "Tensor", "dtype": "float32", "shape": [1], "fd": 5},
    {"seq": "list", "items": "nope"},
    "not a dict",
])
def test_hostile_descriptors_are_refused(desc):
    with pytest.raises(channel.ChannelError):
        channel.decode(desc, [], [])


def test_a_peer_that_closes_mid_message_is_a_channel_error():
    a, b = _pair()
    a.sendall(b"\x00\x00")
    a.close()
    with pytest.raises(channel.ChannelError):
        channel.recv(b)


def test_a_prepared_candidate_answers_before_any_solution_is_loaded():
    """A judge started ahead talks to its candidate before its task (on a GPU it also
    maps one tensor each way); on the CPU the candidate answers and stays ready, and
    it is stopped between requests and continued for each (judge/freeze.py)."""
    from harness.judge.freeze import _stopped
    from harness.judge.remote import Remote

    remote = Remote()
    try:
        remote.request({"op": "ping"}, limit_s=120)
        reply, _ = remote.request({"op": "prepare", "device": "cpu"}, limit_s=60)
        assert reply == {}
        remote.wait_stopped()
        assert _stopped(remote.proc.pid, own_child=True)
        reply, _ = remote.request({"op": "ping"}, limit_s=60)  # continued for the request, still serving
        assert reply == {}
    finally:
        remote.close()


def test_a_cpu_candidate_sleeps_for_its_next_request(monkeypatch):
    """On the CPU the judge's measure of a batch is the CPU time the candidate used until
    it was stopped: a candidate that spun for its next request after replying charged
    the judge's wake-up (milliseconds on a busy host) to every batch. It sleeps in recv
    (serve.SPIN_S; a spin of 10 ms reads here as several ms of CPU after a reply)."""
    import time
    from pathlib import Path

    from harness.judge.freeze import process_cpu_seconds
    from harness.judge.spawn import spawn_candidate

    monkeypatch.setenv("KBENCH_DEVICE", "cpu")
    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).resolve().parents[2]))  # harness, from its scratch folder
    spawned = spawn_candidate()
    try:
        used = []
        for _ in range(3):
            channel.send(spawned.sock, {"op": "ping"})
            assert channel.recv(spawned.sock)[0] == {}
            cpu0 = process_cpu_seconds(spawned.proc.pid)
            time.sleep(0.03)
            used.append(process_cpu_seconds(spawned.proc.pid) - cpu0)
        assert min(used) < 0.002, used
    finally:
        spawned.proc.kill()
        spawned.proc.wait()
        spawned.sock.close()
