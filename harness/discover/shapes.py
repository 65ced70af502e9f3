"""What a problem moves and computes, found on torch's meta device: shapes and
dtypes, bytes in and out, FLOPs. No memory is allocated and nothing runs on a
device, so `kbench list` can describe a 12 GB problem on a laptop, and a task
can be refused before it runs out of GPU memory halfway through."""
from __future__ import annotations

from dataclasses import dataclass

import torch

from ..build import load

# Peak device memory of a task, in units of the problem's input and output bytes:
# the judge's pristine inputs + the copy lent to the candidate + the reference's
# clone; the reference's output, the candidate's, and the judge's copy of it.
# The float64 reference falls back to the CPU when the GPU has no room, so it is not counted.
INPUT_COPIES, OUTPUT_COPIES = 3, 3


@dataclass(frozen=True)
class ProblemShape:
    inputs: tuple[str, ...]  # "float32[4096, 393216]", "int64[32768]", "3"
    outputs: tuple[str, ...]
    input_bytes: int
    output_bytes: int
    flops: int | None  # None when torch's counter does not know an operator

    @property
    def task_bytes(self) -> int:
        return peak_bytes(self.input_bytes, self.output_bytes)


def peak_bytes(input_bytes: int, output_bytes: int) -> int:
    """Device memory a task needs at its peak, roughly."""
    return INPUT_COPIES * input_bytes + OUTPUT_COPIES * output_bytes


def _describe(x) -> str:
    if isinstance(x, torch.Tensor):
        return f"{str(x.dtype).replace('torch.', '')}{list(x.shape)}"
    return repr(x)


def nbytes(values) -> int:
    """Bytes of the tensors in a value, a list or a tuple, however nested."""
    if isinstance(values, torch.Tensor):
        return values.numel() * values.element_size()
    if isinstance(values, (list, tuple)):
        return sum(nbytes(v) for v in values)
    return 0


def _flatten(out) -> list:
    if isinstance(out, (tuple, list)):
        return [y for x in out for y in _flatten(x)]
    return [out]


def problem_shape(module) -> ProblemShape:
    """Run the problem's Model on meta tensors (raises if an operator has no meta kernel)."""
    from torch.utils.flop_counter import FlopCounterMode

    from .meta_rnn import RecurrentByShape

    with torch.device("meta"):
        torch.manual_seed(0)
        inputs = list(module.get_inputs())
        model = module.Model(*module.get_init_inputs())
        counter, recurrent = FlopCounterMode(display=False), RecurrentByShape()
        with counter, recurrent, torch.no_grad():
            out = _flatten(model(*inputs))
    try:
        flops = int(counter.get_total_flops()) + recurrent.flops
    except Exception:  # noqa: BLE001 - an operator the counter cannot count
        flops = None
    return ProblemShape(
        inputs=tuple(_describe(x) for x in inputs),
        outputs=tuple(_describe(x) for x in out),
        input_bytes=nbytes(inputs),
        output_bytes=nbytes(out),
        flops=flops,
    )


def bytes_of_files(paths: list[str]) -> dict[str, dict | None]:
    """Per problem file: input and output bytes, and how many structured check
    sets get_check_inputs() returns (None if it has none). None for a file the
    meta device cannot run: its tasks then run without a memory estimate and
    count their check sets themselves."""
    out: dict[str, dict | None] = {}
    for path in paths:
        try:
            module = load.load_problem(path)
            shape = problem_shape(module)
            checks = None
            if hasattr(module, "get_check_inputs"):
                with torch.device("meta"):
                    checks = len(module.get_check_inputs())
        except Exception:  # noqa: BLE001 - reported by the task that runs it
            out[path] = None
            continue
        out[path] = {"input_bytes": shape.input_bytes, "output_bytes": shape.output_bytes, "check_inputs": checks}
    return out

