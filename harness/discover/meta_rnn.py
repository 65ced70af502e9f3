"""Recurrent layers (nn.LSTM, nn.GRU, nn.RNN) answered by shape on torch's meta device.

On meta tensors torch runs a recurrent layer as its step-by-step decomposition: six
ops per time step, layer and direction, each through a Python meta function. KernelBench's
level3/38_LSTMBidirectional (512 steps, 12 layer-directions) makes 92,000 of them and
takes 16 s; its eight recurrent problems took 82 of the 86 s that `kbench list` spent on
its 270 problems. Their outputs' shapes and their matmul FLOPs follow from the inputs and
weights alone, so this mode returns empty meta outputs of the right shapes at once and
counts the FLOPs the decomposition would have counted (tests/discover/test_list.py compares both
with the decomposition on small layers). Anything else, packed sequences included, runs
as before.
"""
from __future__ import annotations

import torch
from torch.overrides import TorchFunctionMode

_VF = torch._C._VariableFunctions
# name -> how many hidden-state tensors it carries (LSTM: h and c)
_LAYERS = {"lstm": 2, "gru": 1, "rnn_tanh": 1, "rnn_relu": 1}


class RecurrentByShape(TorchFunctionMode):
    """Inside it, a recurrent layer on meta tensors returns at once; `flops` adds up
    the matmul FLOPs of the layers it answered (FlopCounterMode never sees them)."""

    def __init__(self):
        super().__init__()
        self.flops = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", "")
        if name in _LAYERS and not kwargs and func == getattr(_VF, name):
            answer = self._answer(name, args)
            if answer is not None:
                return answer
        return func(*args, **(kwargs or {}))

    def _answer(self, name: str, args: tuple):
        # The overload for padded input: (input, hx, params, has_biases, num_layers, dropout,
        # train, bidirectional, batch_first); LSTM's hx is a (h, c) pair. The packed-sequence
        # overload has a batch_sizes tensor second and is left to torch.
        if len(args) != 9 or not isinstance(args[2], (list, tuple)):
            return None
        x, hx, params, bidirectional = args[0], args[1], args[2], args[7]
        hidden = list(hx) if _LAYERS[name] == 2 else [hx]
        tensors = [x, *hidden, *params]
        if len(hidden) != _LAYERS[name] or not all(isinstance(t, torch.Tensor) and t.is_meta for t in tensors):
            return None
        directions = 2 if bidirectional else 1
        out = torch.empty((*x.shape[:-1], directions * hidden[0].shape[-1]), dtype=x.dtype, device="meta")
        # Every step of every layer and direction multiplies each 2-D weight (input-hidden,
        # hidden-hidden, LSTM's projection) by one vector per batch row: 2 FLOPs per weight.
        rows = x.numel() // x.shape[-1] if x.shape[-1] else 0
        self.flops += 2 * rows * sum(p.numel() for p in params if p.dim() == 2)
        states = tuple(torch.empty_like(h) for h in hidden)
        return (out, *states)
