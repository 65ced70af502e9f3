"""python -m harness.candidate FD SCRATCH: confine this process first, then serve.

Landlock confines the calling thread and the threads it starts later, so the
sandbox goes on before `import torch` starts any: writes only under SCRATCH
and the build cache (where torch's loader takes a lock beside the built
extension; the judge verifies every build's hash before use), no TCP, no
signals to processes outside.
"""
import os
import sys

from harness.shared import sandbox

_scratch = sys.argv[2]
_writable = [_scratch] + [p for p in os.environ.get("KBENCH_WRITABLE", "").split(os.pathsep) if p]
os.environ["KBENCH_SANDBOX"] = sandbox.confine(_writable, "candidate") or ""

from harness.candidate.serve import main  # noqa: E402 - after the sandbox, on purpose

import gc  # noqa: E402
import torch.utils.cpp_extension  # noqa: E402,F401 - as serve.main imports it, before the freeze below

# What kbench and torch imported lives as long as this process: frozen, the collection at
# each bind (serve.op_bind) walks only what came after (83 ms a collection on the 2-core
# CI host otherwise, inside the task's timing budget, two or three binds a task).
gc.collect()
gc.freeze()
main()
