"""--precision: run a task's floating tensors in fp16 or bf16, on both sides alike.

As KernelBench does it, the inputs and the model's weights are cast to the dtype,
for the reference and the candidate. Unlike KernelBench, only floating tensors
are cast: integer inputs (class targets, indices) stay integers, since a float
target breaks cross entropy's reference. "fp32" casts nothing: the problem runs
as written (KernelBench's problems are fp32), so verdicts are those of a run
without the option.

The float64 reference is made from the cast tensors (check.run_fp64_reference
widens them exactly), so its output is what both sides should compute from what
they were given, and each side's error against it is its own rounding.
"""
from __future__ import annotations

from typing import Any

import torch

DTYPES = {"fp32": None, "fp16": torch.float16, "bf16": torch.bfloat16}


def dtype_of(precision: str) -> torch.dtype | None:
    """The dtype floating tensors are cast to; None for "fp32" (nothing is cast)."""
    return DTYPES[precision]


def cast_values(values: list, precision: str) -> list:
    """Floating tensors of `values` (inputs or init inputs) cast; everything else as is."""
    dtype = dtype_of(precision)
    if dtype is None:
        return values
    return [x.to(dtype) if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in values]


def cast_model(model: Any, precision: str) -> Any:
    """The module with its floating parameters and buffers cast (Module.to leaves integer
    buffers alone); anything that is not a Module as is."""
    dtype = dtype_of(precision)
    if dtype is None or not isinstance(model, torch.nn.Module):
        return model
    return model.to(dtype)


def exact_half_matmuls(precision: str) -> None:
    """At fp16 or bf16, half GEMMs accumulate in fp32 throughout, as TF32 is off at fp32.
    By default cuBLAS may reduce split-K partial sums in the half dtype, which makes the
    reference's own error, and so the tolerance scaled from it, larger than an honest
    fp32-accumulating kernel needs. Set on both sides, so that the reference as a
    solution matches itself; a solution that turns it back on is judged by the precision
    rule. At "fp32" torch's defaults stay: nothing changes there."""
    if dtype_of(precision) is None:
        return
    torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
