"""Each problem's input and output bytes and check-set count, for refusing a task
that cannot fit its GPU; found once per problem file's content and kept in the
cache, so a rerun imports no problem file for them (finding them runs each
problem on torch's meta device: seconds of imports on a warm run that would
otherwise wait for them).
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

from ..shared.cache_dir import store_json

SALT = "kbench-sizes-1"  # bump when what is stored changes


def of_files(paths: list[str], cache_dir: Path | None) -> dict[str, dict | None]:
    """Per problem file: {"input_bytes", "output_bytes", "check_inputs"}, or None
    where the meta device cannot run it (its tasks then run without an estimate)."""
    folder = cache_dir / "problem-sizes" if cache_dir is not None else None
    keys = {p: _key(Path(p).read_bytes()) for p in paths}
    found: dict[str, dict | None] = {}
    for path, key in keys.items():
        entry = folder / f"{key}.json" if folder is not None else None
        if entry is not None and entry.is_file():
            try:
                found[path] = json.loads(entry.read_text())["size"]
                continue
            except (OSError, ValueError, KeyError):
                pass  # torn or foreign: find it again
    missing = [p for p in paths if p not in found]
    if missing:
        from . import shapes

        for path, size in shapes.bytes_of_files(missing).items():
            found[path] = size
            if folder is not None:
                store_json(folder / f"{keys[path]}.json", {"size": size})
    return found


def _key(source: bytes) -> str:
    """The file's hash, salted with torch's version: its meta kernels decide the sizes."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        torch_version = version("torch")
    except PackageNotFoundError:
        torch_version = "unknown"
    h = hashlib.sha256(f"{SALT}\0{torch_version}\0".encode())
    h.update(source)
    return h.hexdigest()

