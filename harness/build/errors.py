"""One line for a failed build: the compiler's own first error lines, whichever tool
wrote them, and a hint where the lines show a mistake models make again and again
(an API this torch removed, a missing include, a flag given to the wrong compiler,
a toolchain that does not fit). The log is torch's extension-builder output as the
build process keeps it (harness/build/stage.py), verbose or not (harness/build/load.py forces
verbose off, so the output is always in the exception).
"""
from __future__ import annotations

import re

# Lines that name an error, as each tool writes them:
# nvcc:   kernel.cu(12): error: identifier "scalar_t" is undefined
#         nvcc fatal   : Unsupported gpu architecture 'compute_20'
# ptxas:  ptxas error   : Entry function '_Z6kernel' uses too much shared data
# gcc:    main.cpp:5:3: error: 'foo' was not declared in this scope
#         main.cpp:1:10: fatal error: THC/THC.h: No such file or directory
#         c++: error: unrecognized command-line option '--use_fast_math'
# ld:     main.o: undefined reference to `foo' / ext.so: undefined symbol: _Z3foov
#         /usr/bin/ld: cannot find -lcudnn_missing: No such file or directory
#         /usr/bin/ld: b.o: multiple definition of `launch'; a.o: first defined here
_ERROR_LINE = re.compile(r"\berror\b\s*:|\bfatal\b\s*:|fatal error|undefined (reference|symbol)|"
                         r"\bld: cannot find\b|multiple definition of", re.IGNORECASE)
# ninja's and torch's wrappers around the compiler's lines: never the message.
_NOISE = re.compile(r"^(ninja: build stopped|FAILED:|\[\d+/\d+\] |subprocess\.CalledProcessError|"
                    r"(RuntimeError: )?Error building extension|error: command .* failed with exit)")
# True but generic: shown only when nothing more specific was found.
_GENERIC = re.compile(r"^(collect2: error: ld returned|ninja: error:|make: \*\*\*)")
_BUILD_PATH = re.compile(r"(/[^\s:()]+/)([^/\s:()]+\.(cu|cuh|cpp|cc|cxx|c|h|hpp|o|so))\b")

# Compiler lines that mean the solution was written for an older torch (KernelBench-era
# code): Tensor.type() in AT_DISPATCH, the THC headers and macros removed in torch 1.11.
_REMOVED_API = re.compile(
    r"DeprecatedTypeProperties|has no member named .type.|has no member \"type\"|\bTHC/THC\.h\b|\bTHCudaCheck\b|"
    r"\bTHCState\b|\bTHCudaTensor\w*|\bAT_CHECK\b.*(not declared|undefined)|"
    r"(not declared|undefined).*\bAT_CHECK\b"
)
REMOVED_API_HINT = ("hint: the solution uses a torch C++ API removed from this torch version (Tensor.type() in "
                    "AT_DISPATCH: use .scalar_type(); THC: use ATen/c10; AT_CHECK: use TORCH_CHECK)")

# Names that torch/extension.h does not declare, and the header that does. nvcc says
# `identifier "X" is undefined` or `namespace "at::cuda" has no member "X"`; g++ says
# `'X' was not declared in this scope` or `'X' is not a member of 'at::cuda'`.
_HEADERS = {
    "C10_CUDA_KERNEL_LAUNCH_CHECK": "c10/cuda/CUDAException.h",
    "C10_CUDA_CHECK": "c10/cuda/CUDAException.h",
    "getCurrentCUDAStream": "ATen/cuda/CUDAContext.h",
    "getCurrentCUDABlasHandle": "ATen/cuda/CUDAContext.h",
    "getCurrentDeviceProperties": "ATen/cuda/CUDAContext.h",
    "CUDAGuard": "c10/cuda/CUDAGuard.h",
    "OptionalCUDAGuard": "c10/cuda/CUDAGuard.h",
}
_UNDECLARED = re.compile(r"[\"'‘`](?:[\w:]*::)?(\w+)[\"'’]\s+(?:is undefined|was not declared|is not a member)|"
                         r"has no member [\"'‘](\w+)[\"'’]")
# g++ options nvcc does not know, given to it in extra_cuda_cflags.
_NVCC_UNKNOWN = re.compile(r"nvcc fatal\s*:\s*Unknown option '([^']+)'")
# nvcc-only options given to the C++ compiler in extra_cflags.
_GXX_UNKNOWN = re.compile(r"unrecognized command[- ]line option [\"'‘`]?((?:--use_fast_math|-arch=|--gpu-architecture|"
                          r"-gencode|-Xptxas|--ptxas-options|-Xcompiler|--expt-|-lineinfo|-maxrregcount|"
                          r"--maxrregcount|--extended-lambda|-ftz=|-prec-div|-prec-sqrt|-fmad=)[^\"'’\s]*)")
_UNSUPPORTED_ARCH = re.compile(r"nvcc fatal\s*:\s*Unsupported gpu architecture '(\w+)'")
_UNSUPPORTED_HOST = re.compile(r"unsupported (GNU|clang) version")


def first_error_lines(log: str, limit: int = 3) -> list[str]:
    """The compiler's own first error lines, with build-folder paths cut to file names.

    Lines that name an error (nvcc, ptxas, gcc, ld) come first, generic ones (collect2,
    ninja: error) only when there is nothing else; when no line names an error, the
    first line the failed command printed (after ninja's FAILED: and the command's echo)."""
    lines = [raw.strip() for raw in log.splitlines()]
    found: list[str] = []
    generic: list[str] = []
    for line in lines:
        if not line or _NOISE.match(line) or not _ERROR_LINE.search(line):
            continue
        target = generic if _GENERIC.match(line) else found
        line = _short(line)
        if line not in target:
            target.append(line)
    return (found or generic or _after_failed(lines))[:limit]


def _short(line: str) -> str:
    return _BUILD_PATH.sub(r"\2", line)[:400]


def _after_failed(lines: list[str]) -> list[str]:
    """What ninja's failed step printed: the lines after `FAILED: target` and the echo of
    its command, less gcc's 'In function' context."""
    for i, line in enumerate(lines):
        if not line.startswith("FAILED:"):
            continue
        for after in lines[i + 2:]:  # i + 1 echoes the command
            if after and not _NOISE.match(after) and ": In " not in after and not after.startswith(("In file", "from ")):
                return [_short(after)]
    return []


def build_error_message(log: str, fallback: str = "") -> str:
    """One line for a failed build: its first error lines (else `fallback`), and the
    hints its error lines call for."""
    lines = first_error_lines(log) or ([fallback] if fallback else [])
    # Error lines only: Tensor.type() outside AT_DISPATCH still builds, with a deprecation warning.
    errors = [ln for ln in log.splitlines() if _ERROR_LINE.search(ln) and not _NOISE.match(ln.strip())]
    return " | ".join(lines + hints(errors))


def hints(error_lines: list[str]) -> list[str]:
    """At most one hint of each kind, in a fixed order."""
    out = []
    if any(_REMOVED_API.search(ln) for ln in error_lines):
        out.append(REMOVED_API_HINT)
    missing = sorted({name for ln in error_lines for m in _UNDECLARED.finditer(ln)
                      for name in m.groups() if name in _HEADERS}, key=list(_HEADERS).index)
    if missing:
        includes = sorted({_HEADERS[name] for name in missing}, key=list(_HEADERS.values()).index)
        out.append(f"hint: {', '.join(missing)} need{'s' if len(missing) == 1 else ''} "
                   + " and ".join(f"#include <{h}>" for h in includes)
                   + f" (torch/extension.h does not include {'it' if len(includes) == 1 else 'them'})")
    for pattern, text in ((_NVCC_UNKNOWN, "hint: '{}' is not an nvcc option: host-compiler flags go in extra_cflags, "
                                          "or to nvcc as -Xcompiler={}"),
                          (_GXX_UNKNOWN, "hint: '{}' is an nvcc option given to the C++ compiler: it goes in "
                                         "extra_cuda_cflags, not extra_cflags"),
                          (_UNSUPPORTED_ARCH, "hint: toolchain mismatch: this nvcc cannot compile for '{}' (an -arch or "
                                              "-gencode flag in the solution, or TORCH_CUDA_ARCH_LIST, names an "
                                              "architecture this CUDA toolkit dropped or does not know yet)")):
        flag = next((m.group(1) for ln in error_lines for m in [pattern.search(ln)] if m), None)
        if flag:
            out.append(text.format(flag, flag))
    if any(_UNSUPPORTED_HOST.search(ln) for ln in error_lines):
        out.append("hint: toolchain mismatch: this nvcc does not support the host compiler's version "
                   "(set CXX/CC to a supported gcc, or install a CUDA toolkit that supports it)")
    return out


# A compiler that died of the host rather than of the source: killed for memory, a full
# disk, no memory to fork. The same source may build next time, so such a failure is
# not cached (every other build error is: the same source and toolchain fail the same way).
_TRANSIENT = re.compile(r"Killed signal terminated program|No space left on device|Cannot allocate memory|"
                        r"virtual memory exhausted|out of memory allocating|Resource temporarily unavailable|"
                        r"\bterminated by signal\b|Segmentation fault|Bus error|"
                        # The shell could not start a program (a compiler, kbench's stand-in for
                        # one): the next run may; a cached failure would be reused on every rerun.
                        r"^/bin/(?:ba|da)?sh: (?:line )?\d+: \S+: (?:Permission denied|Text file busy)$",
                        re.IGNORECASE | re.MULTILINE)


def transient(log: str) -> bool:
    """A build that failed for the host's sake, not the source's."""
    return bool(_TRANSIENT.search(log))
