"""python -m harness.build SPEC.json [RESULT_FD]: one build process (stage.py, _child)."""
import sys

from harness.build.stage import _child

_child(*sys.argv[1:3])
