"""A Triton kernel that does not compile (tl has no relu), for tests/build/test_build_errors.py:
Triton reads a kernel's source from its file, so it cannot be defined in a string."""
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.relu(x)
    tl.store(out_ptr + offsets, y, mask=mask)
