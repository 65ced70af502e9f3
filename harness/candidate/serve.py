"""The candidate's process: import the solution, run what the judge asks, return data.

Run as: python -m harness.candidate FD SCRATCH (started by the judge, ahead of
its task). FD is its end of the channel; SCRATCH the only folder it may write.
Nothing it sends is a verdict: outputs, sample times and projections are data
the judge checks. __main__ confined the process before torch was imported
(Landlock); this module captures kbench's clocks before the solution is.
"""
from __future__ import annotations

import gc
import os
import socket
import sys
from typing import Any

# Before any solution code: the clocks and graph functions are captured at import.
import torch

from harness import channel, fingerprint, graph_clock, precision, sandbox, timer  # noqa: F401 - timer: clocks captured now
from harness.candidate import custom, guard


class Candidate:
    # No instance dictionary: a solution that finds this object (through the stack)
    # cannot shadow a method with an attribute of its own (a `reply` that rewrites
    # times, a `call` that defers work to the projection); the methods are the
    # class's, whose members the guard watches.
    __slots__ = ("sock", "scratch", "device", "model", "snapshot", "keep", "timing_copies", "last_out", "clock",
                 "clock_held", "graph", "hooks", "threads_left", "pending", "released")

    def __init__(self, sock: socket.socket, scratch: str):
        self.sock, self.scratch = sock, scratch
        self.device = torch.device("cpu")
        self.model: Any = None
        self.snapshot: dict = {}
        self.keep: list = []  # mappings of lent tensors
        self.timing_copies: list[list] = []
        self.last_out: Any = None
        self.clock: Any = None
        self.clock_held: dict[str, tuple] = {}
        self.graph: graph_clock.GraphSampler | graph_clock.BurstSampler | None = None
        self.hooks = None
        self.threads_left: list[str] = []
        self.pending: str | None = None  # what the next release runs: "call" or "graph"
        self.released: str | None = None  # what the next projection reads: "call" or "graph"

    # -- replies ---------------------------------------------------------------
    def reply(self, header: dict, payload: Any = None, has_payload: bool = False, guard_check: bool = True) -> None:
        """Send a reply. The guard's check (milliseconds: it walks torch's namespaces)
        is left out of timed samples, whose wall time the judge bounds; the next
        reply that carries it covers them."""
        blobs: list[bytes] = []
        if has_payload:
            header["output"] = channel.encode(payload, [], blobs, by_copy=True)
        if guard_check:
            header["tampered"] = self._tampered()
        channel.send(self.sock, header, blobs)

    def _tampered(self) -> list[str]:
        if not self.snapshot:
            return []
        return (guard.changed(self.snapshot) + guard.shadowed({
            "clock": (self.clock, (timer.CpuClock, timer.CudaClock)),
            "sampler": (self.graph, (graph_clock.GraphSampler, graph_clock.BurstSampler)),
        }) + guard.swapped(self.clock, self.clock_held))[:8]

    def lent(self, desc: Any, fds: list[int]) -> Any:
        return channel.decode(desc, fds, [], self.keep)

    # -- operations ------------------------------------------------------------
    def op_load(self, msg: dict, fds: list[int]) -> None:
        from harness import build, load

        self.device = torch.device(msg["device"])
        if msg.get("ext_dir"):
            # Where the build process left this solution's extension: load_inline finds it there.
            os.environ["TORCH_EXTENSIONS_DIR"] = msg["ext_dir"]
        confined = os.environ.get("KBENCH_SANDBOX") or None  # set by __main__ before torch was imported
        # True fp32 for everyone unless a solution asks otherwise (cuDNN's TF32 default
        # would fail even the reference as its own solution).
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        cast_to = msg.get("precision", "fp32")  # --precision: the judge casts its side the same way
        precision.exact_half_matmuls(cast_to)
        self.hooks = load.install_build_hooks(self.device.type)
        self.snapshot = guard.snapshot()
        init = self.lent(msg["init"], fds)
        state = self.lent(msg["state"], fds)
        base = {"sandbox": confined}
        try:
            module = load.load_solution(msg["solution_path"], self.device.type)
        except (Exception, SystemExit) as e:  # noqa: BLE001 - a solution may raise anything
            status, message = build.import_failure(e, self.hooks, self.device.type)
            return self.reply({**base, "ok": False, "status": status.value, "message": message})
        torch.manual_seed(msg["seed"])
        cls, name = load.candidate_class(module)
        try:
            with torch.device(self.device):
                model = cls(*init)
                if isinstance(model, torch.nn.Module):
                    model = precision.cast_model(model.to(self.device), cast_to)
        except (Exception, SystemExit) as e:  # noqa: BLE001
            return self.reply({**base, "ok": False, "status": "load_error",
                               "message": f"{name}(*get_init_inputs()) raised: {load.last_line(e)}"})
        _share_weights(model, dict(state))
        self.model = model
        if self.clock is None or str(getattr(self.clock, "device", "cpu")) != str(self.device):
            self._take_clock(self.device)  # made after the import: out of its reach
        self.reply({**base, "ok": True, "candidate_class": name})

    def call(self, inputs: list) -> Any:
        before = guard.live_threads()
        with torch.no_grad():
            out = self.model(*inputs)
        self.threads_left = guard.new_threads(before)
        return out

    def op_call(self, msg: dict, fds: list[int]) -> None:
        inputs = self.lent(msg["inputs"], fds)
        self.last_out = None
        self._collect()
        info = None
        if msg.get("profile"):
            # The guard looks before the profiler runs: a profiler may import modules
            # that rewrap torch's functions (torch.profiler's imports torch._dynamo,
            # which rewraps torch.manual_seed).
            tampered = self._tampered()
            out, info = custom.measure(lambda: self.call(inputs), self.device, self.hooks.extension_names)
        else:
            out = self.call(inputs)
        self._sync()
        self.last_out = out
        header = {"threads": self.threads_left[:3], "custom": info}
        if msg.get("profile"):
            header["tampered"] = tampered
        self.reply(header, out, has_payload=True, guard_check=not msg.get("profile"))

    def op_bind(self, msg: dict, fds: list[int]) -> None:
        """The judge lends the buffers timed calls read; it rewrites them between calls."""
        self.timing_copies = self.lent(msg["copies"], fds)
        self.graph = None
        self._collect()
        # No collection inside a timed call, as on the judge's side (its samples are
        # the yardstick for this process's overhead); back on with the output request.
        gc.collect()
        gc.disable()
        self.reply({})

    def op_sample(self, msg: dict, fds: list[int]) -> None:
        """The first half of a timed call: caches flushed and the call queued behind
        a held stream. The judge times this request and the release apart."""
        inputs = self.timing_copies[msg.get("copy", 0)]

        def timed():
            self.last_out = None  # free the previous output before the next call allocates
            self.last_out = self.call(inputs)

        self.clock.queue(timed)
        self.pending = "call"
        self.reply({"queued": True}, guard_check=False)

    def op_release(self, msg: dict, fds: list[int]) -> None:
        """The second part: the call runs; its times. The judge times this request
        apart from the projection's, so its bound holds the call alone."""
        pending, self.pending = self.pending, None
        if pending == "graph":
            s = self.graph.finish()
        elif pending == "call":
            s = self.clock.finish()
        else:
            return self.reply({"error": "release without a queued call", "kind": "protocol"})
        self.released = pending
        self.reply({"ms": s.ms, "wall_ms": s.wall_ms, "host_ms": s.host_ms, "clock": s.clock,
                    "why": self.clock.why, "threads": self.threads_left[:3]},
                   guard_check=False)

    def op_project(self, msg: dict, fds: list[int]) -> None:
        """The third part: the projection of the released call's output(s)."""
        released, self.released = self.released, None
        try:
            if released == "graph" and type(self.graph) in (graph_clock.GraphSampler, graph_clock.BurstSampler):
                fp = fingerprint.project_many(type(self.graph).outputs(self.graph), msg["fp_seed"])
            elif released == "call":
                fp = fingerprint.project(self.last_out, msg["fp_seed"])
            else:
                return self.reply({"error": "projection without a released call", "kind": "protocol"})
        except fingerprint.NotPlain as e:
            return self.reply({"fp": None, "why": str(e)}, guard_check=False)
        self.reply({"fp": fp}, guard_check=False)

    def op_graph_capture(self, msg: dict, fds: list[int]) -> None:
        kind = graph_clock.BurstSampler if msg.get("eager") else graph_clock.GraphSampler
        try:
            self.graph = kind(self.call, self.timing_copies, self.clock, msg["calls"], keep_all=msg.get("keep_all", False))
            self.graph.replay()
        except Exception as e:  # noqa: BLE001 - capture rejects syncs, host copies, unjoined streams...
            self.graph = None
            graph_clock.settle(self.clock)
            what = "a burst failed" if msg.get("eager") else "capture failed"
            return self.reply({"ok": False, "message": f"{what}: {str(e).splitlines()[0][:200]}"})
        self.reply({"ok": True})

    def op_graph_sample(self, msg: dict, fds: list[int]) -> None:
        self.graph.queue()
        self.pending = "graph"
        self.reply({"queued": True}, guard_check=False)

    def op_graph_replay(self, msg: dict, fds: list[int]) -> None:
        self.graph.replay()
        fp = fingerprint.project_many(self.graph.outputs(), msg.get("fp_seed", 0))
        self.reply({"fp": fp}, self.graph.outputs()[-1], has_payload=True)

    def op_output(self, msg: dict, fds: list[int]) -> None:
        gc.enable()
        self.reply({}, self.last_out, has_payload=True)

    def op_ping(self, msg: dict, fds: list[int]) -> None:
        channel.send(self.sock, {})

    def op_prepare(self, msg: dict, fds: list[int]) -> None:
        """Before the task, no solution imported yet: the GPU's context and the clock."""
        if self.model is None and msg.get("device") == "cuda" and timer.prepare(torch.device("cuda")):
            # Taken out of the module now, before any solution code runs (an import
            # could reach timer._prepared).
            self._take_clock(torch.device("cuda"))
        if self.model is None and msg.get("echo") is not None:
            # The judge's one tensor over CUDA IPC before the task: opened here, and a
            # tensor of ours sent back (main.py's _prepare_device says why).
            echo = [x + 1 for x in self.lent(msg["echo"], fds) if isinstance(x, torch.Tensor)]
            self.reply({}, echo, has_payload=True, guard_check=False)
            del echo
            if torch.cuda.is_initialized():
                torch.cuda.ipc_collect()
            return
        channel.send(self.sock, {})

    def _take_clock(self, device: torch.device) -> None:
        """The clock this candidate times with, and what it holds, recorded at once:
        a record taken later could already describe a swapped flush buffer."""
        self.clock = timer.make_clock(device)
        self.clock_held = guard.held(self.clock)

    def _collect(self) -> None:
        """Free outputs the judge has copied: memory shared over CUDA IPC stays in
        torch's limbo until collected, and the checks' outputs of a 6 GB softmax
        would otherwise pile up beside the judge's own memory."""
        if self.device.type == "cuda":
            torch.cuda.ipc_collect()
            torch.cuda.empty_cache()

    def _sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    # -- loop ------------------------------------------------------------------
    def serve(self) -> None:
        while True:
            msg, _blobs, fds = channel.recv(self.sock)
            op = msg.get("op")
            if op == "exit":
                return
            # Looked up on the class, whose members the guard watches: an attribute set
            # on this instance (by a solution that found it) does not answer a request.
            handler = getattr(Candidate, f"op_{op}", None) if isinstance(op, str) else None
            try:
                handler(self, msg, fds)
            except (Exception, SystemExit) as e:  # noqa: BLE001 - the solution raised: report, keep serving
                import traceback

                from harness import load

                traceback.print_exc()
                err = load.last_line(e) if isinstance(e, BaseException) else str(e)
                kind = "out_of_memory" if isinstance(e, torch.OutOfMemoryError) else "exception"
                if load.triton_error_line(e):
                    kind = "compile_error"  # Triton compiles at a kernel's first call, in forward
                if isinstance(e, SystemExit):
                    err = f"the solution called sys.exit({e.code!r})"
                channel.send(self.sock, {"error": err[:600], "kind": kind, "tampered": self._tampered()})
            finally:
                for fd in fds:
                    os.close(fd)


def _share_weights(model: Any, ref_state: dict) -> None:
    """Same parameters on both sides where the names and shapes agree, so that a
    candidate that creates its layers in another order is not failed for that."""
    if not isinstance(model, torch.nn.Module) or not ref_state:
        return
    own = model.state_dict()
    if own.keys() == ref_state.keys() and all(own[k].shape == ref_state[k].shape for k in own):
        model.load_state_dict(ref_state)


def main() -> None:
    fd, scratch = int(sys.argv[1]), sys.argv[2]
    sandbox.set_parent_death_signal(int(os.environ.get("KBENCH_JUDGE_PID", os.getppid())))
    # Imports every task needs, done while waiting for it. Not torch._dynamo: the
    # profile of custom.py no longer pulls it in (it cost ~5 s per worker started
    # on an H100 host), and a solution that compiles imports it itself.
    import torch.utils.cpp_extension  # noqa: F401

    sock = socket.socket(fileno=fd)
    try:
        Candidate(sock, scratch).serve()
    except channel.ChannelError:
        pass  # the judge is gone or done
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # no interpreter teardown: solution atexit hooks and CUDA teardown can hang


if __name__ == "__main__":
    main()
