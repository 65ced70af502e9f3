"""The candidate's process: import the solution, run what the judge asks, say where outputs are.

Run as: python -m harness.candidate FD SCRATCH (started by the judge, ahead of
its task). FD is its end of the channel; SCRATCH the only folder it may write.
Nothing it sends is a verdict, a value the judge trusts or a time the judge
uses: it runs calls and batches of calls, and says where each output lies
(locate.py); the judge reads the outputs itself and times every request on
its own clock, with this process frozen whenever it is not answering one
(judge/freeze.py). __main__ confined the process before torch was imported.
"""
from __future__ import annotations

import gc
import os
import select
import socket
import sys
import time
from typing import Any

import torch

from harness.shared import batches, channel, hold, precision, sandbox
from harness.candidate import custom, guard
from harness.shared.locate import Locator, Unlocatable

# kbench's own functions, taken now, before any solution code runs: a solution that
# rewrites the module's attribute (the guard reports it) does not break the server.
_run_timed = batches.run_timed
_queue_held = batches.queue_held
_held_ms = batches.held_ms
_perf = time.perf_counter


class Candidate:
    # No instance dictionary: a solution that finds this object (through the stack)
    # cannot shadow a method with an attribute of its own. (It could still do much in
    # its own process; none of it reaches a figure the judge uses.)
    __slots__ = ("sock", "scratch", "device", "model", "snapshot", "keep", "copies", "batch", "locator", "hooks",
                 "page", "last_held")

    def __init__(self, sock: socket.socket, scratch: str):
        self.sock, self.scratch = sock, scratch
        self.device = torch.device("cpu")
        self.model: Any = None
        self.snapshot: dict = {}
        self.keep: list = []  # mappings of lent tensors
        self.copies: list[list] = []  # the timing inputs: call i of a batch reads copies[i]
        self.batch: batches.Eager | batches.Graph | None = None
        self.locator = Locator(self.device)
        self.hooks = None
        self.page: hold.Page | None = None  # the hold page the judge lent (hold.py)
        self.last_held: tuple | None = None  # (batch number, its events): its claim goes with the next reply

    # -- replies ---------------------------------------------------------------
    def reply(self, header: dict, guard_check: bool = True) -> None:
        """Send a reply. The guard's check (milliseconds: it walks torch's namespaces)
        is left out of batches, whose time is the judge's measure."""
        if guard_check:
            header["tampered"] = self._tampered()
        channel.send(self.sock, header)

    def _tampered(self) -> list[str]:
        return guard.changed(self.snapshot)[:8] if self.snapshot else []

    def lent(self, desc: Any, fds: list[int], outputs_may_alias: bool = False) -> Any:
        """Decode what the judge lent. With `outputs_may_alias` these are the inputs of
        the calls to come, and only they: an output in their memory is located as such."""
        ids: list = []
        out = channel.decode(desc, fds, self.keep, ids)
        if outputs_may_alias:
            self.locator.clear_lent()  # earlier loans may be freed, their memory lent again under new ids
            for t, ident in ids:
                self.locator.add_lent(t, ident)
        return out

    # -- operations ------------------------------------------------------------
    def op_load(self, msg: dict, fds: list[int]) -> None:
        from harness.build import LOADER_ENV, load

        self.device = torch.device(msg["device"])
        self.locator = Locator(self.device)
        if msg.get("ext_dir"):
            # Where the build process left this solution's extension: load_inline finds it there.
            os.environ["TORCH_EXTENSIONS_DIR"] = msg["ext_dir"]
        # The compiler names its build ran under (build.loader_env): torch's loader writes them
        # into build.ninja and runs ninja, which compiles nothing only if they are unchanged.
        compilers = msg.get("compilers")
        if isinstance(compilers, dict):
            os.environ.update({k: v for k, v in compilers.items() if k in LOADER_ENV and isinstance(v, str)})
        confined = os.environ.get("KBENCH_SANDBOX") or None  # set by __main__ before torch was imported
        # True fp32 for everyone unless a solution asks otherwise (cuDNN's TF32 default
        # would fail even the reference as its own solution).
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        cast_to = msg.get("precision", "fp32")  # --precision: the judge casts its side the same way
        precision.exact_half_matmuls(cast_to)
        failed = msg.get("failed_calls")  # builds that failed in the build process: raised again, not compiled
        failed = {k: v for k, v in failed.items() if isinstance(v, str)} if isinstance(failed, dict) else {}
        self.hooks = load.install_build_hooks(self.device.type, failed=failed)
        self.snapshot = guard.snapshot()
        init = self.lent(msg["init"], fds)
        state = self.lent(msg["state"], fds)
        base = {"sandbox": confined}
        try:
            module = load.load_solution(msg["solution_path"], self.device.type)
        except (Exception, SystemExit) as e:  # noqa: BLE001 - a solution may raise anything
            status, message = load.import_failure(e, self.hooks, self.device.type)
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
        self.reply({**base, "ok": True, "candidate_class": name})

    def call(self, inputs: list) -> Any:
        with torch.no_grad():
            return self.model(*inputs)

    def op_call(self, msg: dict, fds: list[int]) -> None:
        """One forward on lent inputs; where its output is."""
        gc.enable()
        self._collect()
        self.batch = None  # the previous call's output goes before this one allocates
        inputs = self.lent(msg["inputs"], fds, outputs_may_alias=True)
        before = guard.live_threads()
        info = None
        if msg.get("profile"):
            # The guard looks before the profiler runs: a profiler may import modules
            # that rewrap torch's functions (torch.profiler's imports torch._dynamo).
            tampered = self._tampered()
            out, info = custom.measure(lambda: self.call(inputs), self.device, self.hooks.extension_names)
        else:
            out = self.call(inputs)
        self._sync()
        self.batch = batches.Eager(self.call, [])
        self.batch.outs = [out]  # alive until the judge has read it
        self.locator.begin_reply()
        header = {"out": self.locator.describe(out), "segs": self.locator.reply_segs,
                  "threads": guard.new_threads(before)[:3], "custom": info}
        if msg.get("profile"):
            header["tampered"] = tampered
        self.reply(header, guard_check=not msg.get("profile"))

    def op_bind(self, msg: dict, fds: list[int]) -> None:
        """The judge lends the timing inputs: for each input a tensor holding one copy
        per call (stacked on a first dimension), or a plain value shared by all."""
        self.batch = None
        self._collect()
        stacked = self.lent(msg["stacked"], fds, outputs_may_alias=True)
        n = int(msg["n"])
        self.copies = [[s[i] if isinstance(s, torch.Tensor) else s for s in stacked] for i in range(n)]
        # No collection inside a batch, as on the judge's side.
        gc.collect()
        gc.disable()
        self.reply({})

    def op_capture(self, msg: dict, fds: list[int]) -> None:
        """Capture `n` calls into one CUDA graph; where its outputs are (the same memory at every replay)."""
        self.batch = None
        try:
            self.batch = batches.Graph(self.call, self.copies, int(msg["n"]))
        except Exception as e:  # noqa: BLE001 - capture rejects syncs, host copies, unjoined streams...
            self.batch = None
            _settle(self.device)
            return self.reply({"ok": False, "message": f"capture failed: {str(e).splitlines()[0][:200]}"})
        self.locator.begin_reply()
        log = batches.Log(self.locator.at, self.locator.describe)
        for out in self.batch.outs:
            log.note(out)
        self.reply({"ok": True, **log.fields(), "segs": self.locator.reply_segs})

    def op_batch(self, msg: dict, fds: list[int]) -> None:
        """The timed request: `n` calls (eagerly, or one replay of the captured graph),
        then a synchronize. The judge's clock runs from before this request reached
        us to after our reply and the GPU's drain; the events here are our own claim."""
        t_in = _perf()
        n = int(msg["n"])
        before = guard.live_threads()
        self.locator.begin_reply()
        if msg.get("graph"):
            if not isinstance(self.batch, batches.Graph):
                return self.reply({"error": "no captured graph", "kind": "protocol"}, guard_check=False)
            ms, host_ms = _run_timed(self.batch, n, self.device)
            return self.reply({"ms": ms, "host_ms": host_ms, "threads": guard.new_threads(before)[:3]},
                              guard_check=False)
        if not isinstance(self.batch, batches.Eager) or self.batch.copies is not self.copies:
            self.batch = batches.Eager(self.call, self.copies)
        log = batches.Log(self.locator.at, self.locator.describe) if n else None
        t_run = _perf()
        ms, host_ms = _run_timed(self.batch, n, self.device, log)
        t_done = _perf()
        header = {"ms": ms, "host_ms": host_ms, "threads": guard.new_threads(before)[:3]}
        if log is not None:
            header.update(log.fields(), segs=self.locator.reply_segs)
        header["trace_us"] = [round((t_run - t_in) * 1e6), round((t_done - t_run) * 1e6), round((_perf() - t_done) * 1e6)]
        self.reply(header, guard_check=False)

    def op_hold_page(self, msg: dict, fds: list[int]) -> None:
        """The judge lends the page its holds release (hold.py): mapped and registered here."""
        try:
            self.page = hold.Page(fds[0], self.device if self.device.type == "cuda" else torch.device("cuda"))
        except (hold.HoldUnavailable, IndexError, OSError, ValueError) as e:
            self.page = None
            return self.reply({"ok": False, "message": str(e)[:300]}, guard_check=False)
        self.reply({"ok": True}, guard_check=False)

    def op_held(self, msg: dict, fds: list[int]) -> None:
        """Queue `n` calls behind the hold of batch `seq` and answer at once, without
        waiting for them: the judge writes the inputs, releases the hold and times the
        device from outside. Where the outputs will be, and the host's time to issue them."""
        n, seq = int(msg["n"]), int(msg["seq"])
        if self.page is None:
            return self.reply({"error": "no hold page", "kind": "protocol"}, guard_check=False)
        self.last_held = None
        before = guard.live_threads()
        self.locator.begin_reply()
        if not isinstance(self.batch, batches.Eager) or self.batch.copies is not self.copies:
            self.batch = batches.Eager(self.call, self.copies)
        log = batches.Log(self.locator.at, self.locator.describe) if n else None
        host_ms, events = _queue_held(self.batch, n, self.device, self.page, "candidate", seq, log)
        self.last_held = (seq, events)
        header = {"host_ms": host_ms, "threads": guard.new_threads(before)[:3]}
        if log is not None:
            header.update(log.fields(), segs=self.locator.reply_segs)
        self.reply(header, guard_check=False)

    def op_claim(self, msg: dict, fds: list[int]) -> None:
        """The last held batch's own events, now that the judge has seen it run: our claim."""
        claim = [self.last_held[0], _held_ms(self.last_held[1])] if self.last_held is not None else None
        self.reply({"claim": claim}, guard_check=False)

    def op_guard(self, msg: dict, fds: list[int]) -> None:
        """After timing: what the guard saw (collection back on)."""
        gc.enable()
        self.reply({})

    def op_ping(self, msg: dict, fds: list[int]) -> None:
        channel.send(self.sock, {})

    def op_prepare(self, msg: dict, fds: list[int]) -> None:
        """Before the task, no solution imported yet: the GPU's context, and one
        tensor located for the judge to map (its first IPC mapping is paid here)."""
        if self.model is None and msg.get("device") == "cuda":
            self.device = torch.device("cuda")
            self.locator = Locator(self.device)
            if msg.get("echo") is not None:
                self.lent(msg["echo"], fds)  # the first IPC import of a lent tensor, paid here
            echo = torch.arange(64.0, device=self.device)
            torch.cuda.synchronize(self.device)
            self.batch = batches.Eager(self.call, [])
            self.batch.outs = [echo]
            self.locator.begin_reply()
            return channel.send(self.sock, {"out": self.locator.describe(echo), "segs": self.locator.reply_segs})
        channel.send(self.sock, {})

    def _collect(self) -> None:
        """Free what the judge has read: memory shared over CUDA IPC stays in torch's
        limbo until collected, and the checks' outputs of a 6 GB softmax would
        otherwise pile up beside the judge's own memory."""
        if self.device.type == "cuda":
            torch.cuda.ipc_collect()
            torch.cuda.empty_cache()

    def _sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    # -- loop ------------------------------------------------------------------
    def serve(self) -> None:
        poller = select.poll()
        poller.register(self.sock, select.POLLIN)
        while True:
            _spin_until_readable(poller)
            msg, _blobs, fds = channel.recv(self.sock)
            op = msg.get("op")
            if op == "exit":
                return
            # Looked up on the class: an attribute set on this instance (by a solution
            # that found it) does not answer a request.
            handler = getattr(Candidate, f"op_{op}", None) if isinstance(op, str) else None
            try:
                if handler is None:
                    raise ValueError(f"unknown request {str(op)[:40]!r}")
                handler(self, msg, fds)
            except (Exception, SystemExit) as e:  # noqa: BLE001 - the solution raised: report, keep serving
                import traceback

                from harness.build import load

                traceback.print_exc()
                err = load.last_line(e) if isinstance(e, BaseException) else str(e)
                kind = "out_of_memory" if isinstance(e, torch.OutOfMemoryError) else "exception"
                if load.triton_error_line(e):
                    kind = "compile_error"  # Triton compiles at a kernel's first call, in forward
                if isinstance(e, SystemExit):
                    err = f"the solution called sys.exit({e.code!r})"
                if isinstance(e, Unlocatable):
                    err = str(e)
                channel.send(self.sock, {"error": err[:600], "kind": kind, "tampered": self._tampered()})
            finally:
                for fd in fds:
                    os.close(fd)


# The judge stops this process after each reply and continues it right before the next
# request: once continued, a request is microseconds away. Spinning for it, rather than
# sleeping in recv, spares the scheduler's wake-up from every timed request; past
# SPIN_S (the judge is busy elsewhere, or has not frozen us yet) this sleeps instead.
# Not on the CPU, where the judge's measure is this process's CPU time until it is
# stopped: a spin after each reply added the judge's wake-up (milliseconds on a busy
# 2-core host) to every batch, 0.3-1 ms a call of a 1.3 ms C++ affine (2026-11-27).
SPIN_S = 0.0 if os.environ.get("KBENCH_DEVICE") == "cpu" else 0.01


def _spin_until_readable(poller: select.poll) -> None:
    end = _perf() + SPIN_S
    while _perf() < end:
        if poller.poll(0):
            return


def _settle(device: torch.device) -> None:
    """After a failed capture: wait for whatever was queued; a capture error is not sticky."""
    try:
        if device.type == "cuda":
            torch.cuda.synchronize(device)
    except Exception:  # noqa: BLE001
        pass


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
