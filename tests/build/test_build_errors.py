"""The message of a failed build is the compiler's own first error lines, whichever
tool wrote them; Triton's compile errors carry Triton's line. Literal logs as
torch's extension builder puts them in its exception."""
import inspect

import pytest

from harness.build.errors import REMOVED_API_HINT, build_error_message, first_error_lines, transient
from harness.build.load import _quiet, last_line, triton_error_line

NVCC = """Error building extension 'softmax': [1/3] c++ -MMD -MF main.o.d -c /root/.cache/ext/softmax/main.cpp -o main.o
[2/3] /usr/local/cuda/bin/nvcc --generate-dependencies-with-compile -c /root/.cache/ext/softmax/cuda.cu -o cuda.cuda.o
FAILED: [code=2] cuda.cuda.o
/usr/local/cuda/bin/nvcc --generate-dependencies-with-compile -c /root/.cache/ext/softmax/cuda.cu -o cuda.cuda.o
/root/.cache/ext/softmax/cuda.cu(12): error: identifier "scalar_t" is undefined
      scalar_t m = -INFINITY;
      ^

/root/.cache/ext/softmax/cuda.cu(30): error: too few arguments in function call

2 errors detected in the compilation of "/root/.cache/ext/softmax/cuda.cu".
ninja: build stopped: subcommand failed.
"""

GCC = """Error building extension 'add_relu': [1/2] c++ -MMD -MF main.o.d -fPIC -std=c++17 -c /tmp/ext/add_relu/main.cpp -o main.o
FAILED: main.o
c++ -MMD -MF main.o.d -fPIC -std=c++17 -c /tmp/ext/add_relu/main.cpp -o main.o
/tmp/ext/add_relu/main.cpp: In function 'at::Tensor add_relu(at::Tensor, at::Tensor)':
/tmp/ext/add_relu/main.cpp:5:3: error: 'foo' was not declared in this scope
    5 |   foo(x);
      |   ^~~
ninja: build stopped: subcommand failed.
"""

LD = """Error building extension 'k': [1/3] c++ -c /tmp/ext/k/main.cpp -o main.o
[2/3] nvcc -c /tmp/ext/k/cuda.cu -o cuda.cuda.o
[3/3] c++ main.o cuda.cuda.o -shared -o k.so
FAILED: k.so
c++ main.o cuda.cuda.o -shared -o k.so
/usr/bin/ld: main.o: in function `forward(at::Tensor)':
main.cpp:(.text+0x2a): undefined reference to `launch_softmax(float const*, float*, int)'
collect2: error: ld returned 1 exit status
ninja: build stopped: subcommand failed.
"""

UNDEFINED_SYMBOL = "/root/.cache/kbench/builds/abc/ext/k/k.so: undefined symbol: _Z14launch_softmaxPKfPfi"

# ninja says only that a step failed; the failed step's own output (no "error:" in it) follows the command's echo.
NINJA = """Error building extension 'k': [1/2] /usr/local/cuda/bin/nvcc -c /tmp/ext/k/cuda.cu -o cuda.cuda.o
FAILED: cuda.cuda.o
/usr/local/cuda/bin/nvcc -c /tmp/ext/k/cuda.cu -o cuda.cuda.o
Segmentation fault (core dumped)
ninja: build stopped: subcommand failed.
"""

# Tensor.type() in AT_DISPATCH, compiled by g++ against torch 2.13 (trimmed from a real log).
REMOVED_TYPE = """Error building extension 'add_relu': [1/2] c++ -MMD -MF main.o.d -c /tmp/ext/add_relu/main.cpp -o main.o
FAILED: [code=1] main.o
c++ -MMD -MF main.o.d -c /tmp/ext/add_relu/main.cpp -o main.o
/tmp/ext/add_relu/main.cpp: In lambda function:
/tmp/ext/add_relu/main.cpp:6:38: warning: 'at::DeprecatedTypeProperties& at::Tensor::type() const' is deprecated
/tmp/ext/add_relu/main.cpp:6:5: error: cannot convert 'const at::DeprecatedTypeProperties' to 'c10::ScalarType'
ninja: build stopped: subcommand failed.
"""

THC = """FAILED: cuda.cuda.o
nvcc -c /tmp/ext/k/cuda.cu -o cuda.cuda.o
/tmp/ext/k/cuda.cu:3:10: fatal error: THC/THC.h: No such file or directory
compilation terminated.
"""


def test_nvcc_error_lines_with_file_names_only():
    assert first_error_lines(NVCC) == [
        'cuda.cu(12): error: identifier "scalar_t" is undefined',
        "cuda.cu(30): error: too few arguments in function call",
    ]


def test_gcc_error_line():
    assert first_error_lines(GCC) == ["main.cpp:5:3: error: 'foo' was not declared in this scope"]


def test_ld_undefined_reference_before_collect2():
    assert first_error_lines(LD) == ["main.cpp:(.text+0x2a): undefined reference to `launch_softmax(float const*, float*, int)'"]
    assert first_error_lines(UNDEFINED_SYMBOL) == ["k.so: undefined symbol: _Z14launch_softmaxPKfPfi"]


def test_collect2_alone_is_kept():
    assert first_error_lines("collect2: error: ld returned 1 exit status\n") == ["collect2: error: ld returned 1 exit status"]


def test_ninja_failed_is_noise_and_the_failed_steps_output_is_the_message():
    assert first_error_lines(NINJA) == ["Segmentation fault (core dumped)"]


def test_nvcc_fatal():
    assert first_error_lines("nvcc fatal   : Unsupported gpu architecture 'compute_20'\n") == [
        "nvcc fatal   : Unsupported gpu architecture 'compute_20'"]


def test_removed_torch_api_gets_a_hint():
    message = build_error_message(REMOVED_TYPE)
    assert message.startswith("main.cpp:6:5: error: cannot convert 'const at::DeprecatedTypeProperties'")
    assert message.endswith(REMOVED_API_HINT)
    assert build_error_message(THC) == f"cuda.cu:3:10: fatal error: THC/THC.h: No such file or directory | {REMOVED_API_HINT}"
    assert REMOVED_API_HINT not in build_error_message(GCC)


def test_deprecation_warning_alone_gives_no_hint():
    log = REMOVED_TYPE.replace("error: cannot convert 'const at::DeprecatedTypeProperties' to 'c10::ScalarType'",
                               "error: 'foo' was not declared in this scope")
    assert REMOVED_API_HINT not in build_error_message(log)


# The lines below were printed by nvcc 13.0 and g++ 12.2 on kbench's CPU box (both ship there),
# compiling the mistakes the fixtures under tests/fixtures/gpu/solutions/styles make.
LAUNCH_CHECK_NVCC = """FAILED: cuda.cuda.o
/usr/local/cuda/bin/nvcc -c /tmp/ext/k/cuda.cu -o cuda.cuda.o
/tmp/ext/k/cuda.cu(6): error: identifier "C10_CUDA_KERNEL_LAUNCH_CHECK" is undefined
1 error detected in the compilation of "/tmp/ext/k/cuda.cu".
"""
MISSING_INCLUDES_GXX = """/tmp/ext/k/main.cpp:2:11: error: ‘C10_CUDA_KERNEL_LAUNCH_CHECK’ was not declared in this scope
/tmp/ext/k/main.cpp:2:62: error: ‘getCurrentCUDAStream’ is not a member of ‘at::cuda’
"""
STREAM_NVCC = 'd.cu(3): error: namespace "at::cuda" has no member "getCurrentCUDAStream"\n'
REMOVED_TYPE_NVCC = ('c.cu(5): error: no suitable conversion function from "const at::DeprecatedTypeProperties" to '
                     '"c10::ScalarType" exists\n')
GXX_FLAG_TO_NVCC = "nvcc fatal   : Unknown option '-march=native'\n"
NVCC_FLAG_TO_GXX = "c++: error: unrecognized command-line option ‘--use_fast_math’; did you mean ‘--fast-math’?\n"
OLD_ARCH = "nvcc fatal   : Unsupported gpu architecture 'compute_70'\n"
MISSING_LIBRARY = """FAILED: k.so
c++ main.o -shared -lkbench_no_such_lib -o k.so
/usr/bin/ld: cannot find -lkbench_no_such_lib: No such file or directory
collect2: error: ld returned 1 exit status
"""
HOST_COMPILER = ("/usr/local/cuda/include/crt/host_config.h:143:2: error: #error -- unsupported GNU version! gcc "
                 "versions later than 12 are not supported!\n")


def test_missing_include_is_named_for_nvcc_and_gxx():
    assert build_error_message(LAUNCH_CHECK_NVCC) == (
        'cuda.cu(6): error: identifier "C10_CUDA_KERNEL_LAUNCH_CHECK" is undefined | hint: C10_CUDA_KERNEL_LAUNCH_CHECK '
        "needs #include <c10/cuda/CUDAException.h> (torch/extension.h does not include it)")
    assert build_error_message(MISSING_INCLUDES_GXX).endswith(
        "hint: C10_CUDA_KERNEL_LAUNCH_CHECK, getCurrentCUDAStream need #include <c10/cuda/CUDAException.h> and "
        "#include <ATen/cuda/CUDAContext.h> (torch/extension.h does not include them)")
    assert "#include <ATen/cuda/CUDAContext.h>" in build_error_message(STREAM_NVCC)


def test_removed_api_hint_from_nvccs_wording():
    assert build_error_message(REMOVED_TYPE_NVCC).endswith(REMOVED_API_HINT)


def test_flags_given_to_the_wrong_compiler():
    assert build_error_message(GXX_FLAG_TO_NVCC) == (
        "nvcc fatal   : Unknown option '-march=native' | hint: '-march=native' is not an nvcc option: host-compiler "
        "flags go in extra_cflags, or to nvcc as -Xcompiler=-march=native")
    message = build_error_message(NVCC_FLAG_TO_GXX)
    assert message.startswith("c++: error: unrecognized command-line option ‘--use_fast_math’")
    assert message.endswith("hint: '--use_fast_math' is an nvcc option given to the C++ compiler: it goes in "
                            "extra_cuda_cflags, not extra_cflags")
    assert "hint" not in build_error_message("c++: error: unrecognized command-line option '-fkbench'\n")


def test_toolchain_mismatches_say_so():
    assert "hint: toolchain mismatch: this nvcc cannot compile for 'compute_70'" in build_error_message(OLD_ARCH)
    assert "hint: toolchain mismatch: this nvcc does not support the host compiler's version" in build_error_message(
        HOST_COMPILER)
    # torch's own check raises before any compiler runs; its line says so itself.
    exc = ("RuntimeError: The detected CUDA version (12.1) mismatches the version that was used to compile PyTorch "
           "(13.0). Please make sure to use the same CUDA versions.")
    assert build_error_message("", fallback=exc) == exc


def test_ld_cannot_find_a_library_before_collect2():
    assert build_error_message(MISSING_LIBRARY) == "/usr/bin/ld: cannot find -lkbench_no_such_lib: No such file or directory"


def test_no_error_line_falls_back():
    assert build_error_message("Error building extension 'k'", fallback="RuntimeError: boom") == "RuntimeError: boom"


def test_verbose_is_forced_off_however_it_is_passed():
    def load_inline(name, cpp_sources, cuda_sources=None, functions=None, extra_cflags=None, extra_cuda_cflags=None,
                    extra_ldflags=None, extra_include_paths=None, build_directory=None, verbose=False):
        pass

    sig = inspect.signature(load_inline)
    args, kwargs = _quiet(sig, ("n", "src"), {"functions": ["f"], "verbose": True})
    assert sig.bind(*args, **kwargs).arguments["verbose"] is False
    args, kwargs = _quiet(sig, ("n", "src", None, ["f"], None, None, None, None, None, True), {})
    assert sig.bind(*args, **kwargs).arguments["verbose"] is False
    assert _quiet(sig, ("n", "src"), {}) == (("n", "src"), {})


def _compilation_error(text: str) -> Exception:
    """An exception of Triton's class name and module, without importing Triton."""
    cls = type("CompilationError", (Exception,), {"__module__": "triton.compiler.errors"})
    return cls(text)


TRITON = """at 9:8:
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    z = tl.fancy_add(x, y)
        ^
AttributeError("module 'triton.language' has no attribute 'fancy_add'")"""


def test_triton_compile_error_carries_tritons_line():
    line = triton_error_line(_compilation_error(TRITON))
    assert line == ("Triton compile error at 9:8: `z = tl.fancy_add(x, y)`: "
                    "AttributeError(\"module 'triton.language' has no attribute 'fancy_add'\")")
    assert last_line(_compilation_error(TRITON)) == line  # what the worker reports for an error in forward


def test_triton_message_from_the_cause_when_the_text_has_none():
    exc = _compilation_error(TRITON.rsplit("\n", 1)[0])
    exc.__cause__ = ValueError("unsupported tensor index: constexpr[0]")
    assert triton_error_line(exc).endswith("`z = tl.fancy_add(x, y)`: ValueError: unsupported tensor index: constexpr[0]")


def test_other_exceptions_are_not_triton():
    assert triton_error_line(RuntimeError("at 1:2:\n^\nx")) is None


def test_real_triton_compile_error_carries_tritons_line():
    """Triton's own CompilationError (it compiles for a named target without a GPU).
    Skipped where Triton is not installed (CI's CPU machine); runs on a GPU machine."""
    triton = pytest.importorskip("triton")
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from triton_kernels import relu_kernel

    source = ASTSource(fn=relu_kernel, signature={"x_ptr": "*fp32", "out_ptr": "*fp32", "n_elements": "i32",
                                                  "BLOCK_SIZE": "constexpr"}, constexprs={"BLOCK_SIZE": 1024})
    with pytest.raises(Exception) as raised:
        triton.compile(source, target=GPUTarget("cuda", 90, 32))
    assert triton_error_line(raised.value) == (
        "Triton compile error at 6:8: `y = tl.relu(x)`: "
        "AttributeError(\"module 'triton.language' has no attribute 'relu'\")")


def test_a_caught_build_failure_is_still_the_build_error():
    """Models wrap the build in try/except and then sys.exit or raise their own error;
    the compiler's line is what the user needs, whatever came after it."""
    from types import SimpleNamespace

    from harness.build.load import import_failure
    from harness.build.load import LoadError
    from harness.records import Status

    hooks = SimpleNamespace(failures=[GCC])
    for after in (SystemExit(1), RuntimeError("CUDA kernel compilation failed"), LoadError("defines no ModelNew")):
        assert import_failure(after, hooks, "cpu") == (
            Status.BUILD_ERROR, "main.cpp:5:3: error: 'foo' was not declared in this scope")
    assert import_failure(SystemExit(1), SimpleNamespace(failures=[]), "cpu")[0] is Status.LOAD_ERROR


def test_a_solutions_syntax_error_names_its_file_and_line(tmp_path):
    """The build process imports the solution first; its SyntaxError's last printed line
    ("SyntaxError: invalid syntax") has neither file nor line."""
    from harness.build import stage as build, load

    path = tmp_path / "broken_candidate.py"
    path.write_text("import torch\n\nclass ModelNew(torch.nn.Module):\n    def forward(self, x:\n        return x\n")
    with pytest.raises(SyntaxError) as info:
        load.import_file(str(path), "kbench_solution_under_test")
    status, message = load.import_failure(info.value, load.BuildHooks(), "cpu")
    assert status.value == "load_error"
    assert message.startswith("at import: SyntaxError: ") and "(broken_candidate.py, line 4)" in message, message
    assert "`def forward(self, x:`" in message  # the offending line's own text


STAND_IN_NOT_RUN = """Error building extension 'mse': [1/3] /tmp/gs/cache/objects/bin/cxx/c++ -MMD -MF main.o.d -c main.cpp -o main.o
FAILED: [code=126] main.o
/tmp/gs/cache/objects/bin/cxx/c++ -MMD -MF main.o.d -c main.cpp -o main.o
/bin/sh: 1: /tmp/gs/cache/objects/bin/cxx/c++: Permission denied
ninja: build stopped: subcommand failed.
"""


@pytest.mark.parametrize("log, host_s_fault", [
    (STAND_IN_NOT_RUN, True),  # the host's compiler could not be started: the next run may start it
    ("c++: fatal error: Killed signal terminated program cc1plus\n", True),
    (NVCC, False),
    (GCC, False),
    ("main.cpp:3:1: error: 'Permission denied' was not declared in this scope\n", False),
])
def test_only_a_failure_of_the_host_is_left_out_of_the_build_cache(log, host_s_fault):
    """A build that failed for the host's sake is not cached: on 2 x H200 (2026-11-29) every
    C++ compile of one run found kbench's compiler stand-in not executable, and the cached
    failures made 13 kernels build_error (10 of them honest) in every rerun on that cache."""
    assert transient(log) is host_s_fault
