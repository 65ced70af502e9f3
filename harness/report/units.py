"""Times as a reader wants them: in the unit that fits, so that a 5 us kernel reads
`5.00 us`, not `0.0050` (ms). One function for report.md, the terminal, HTML and
JUnit; results.json and results.csv keep plain milliseconds."""
from __future__ import annotations

import math


def duration(ms: float | None) -> str:
    """'5.00 us', '158.00 us', '8.640 ms', '12.300 s'; '' for no time."""
    if ms is None or (isinstance(ms, float) and math.isnan(ms)):
        return ""
    if math.isinf(ms):
        return "inf"
    if abs(ms) < 1.0:
        return f"{ms * 1e3:.2f} us"
    if abs(ms) < 1000.0:
        return f"{ms:.3f} ms"
    return f"{ms / 1e3:.3f} s"
