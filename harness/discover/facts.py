"""What `kbench list` shows per problem (shapes, bytes, FLOPs), cached by the file's
content so that listing KernelBench's 270 problems a second time takes no import.

Missing facts are found in parallel processes (each imports the problem and runs it
on torch's meta device, harness/discover/shapes.py). A problem that cannot be imported because
an optional package is missing (einops, transformers) says `needs <package>`; that
answer is cached too, and used only while the package is still not installed
(importlib's find_spec tells without importing it), so a warm listing starts no process."""
from __future__ import annotations

import hashlib
import json
import os
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass
from multiprocessing import get_context
from pathlib import Path

from ..shared.cache_dir import default_cache_dir, store_json

FACTS_SALT = "kbench-facts-1"  # bump when what is stored changes
MAX_PROCESSES = 8


@dataclass(frozen=True)
class ProblemFacts:
    """shapes.ProblemShape's fields, readable without importing torch."""

    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    input_bytes: int
    output_bytes: int
    flops: int | None


def facts_key(source: bytes, torch_version: str) -> str:
    """sha256 of the file, salted with the torch version: its meta kernels and FLOP counter decide the facts."""
    h = hashlib.sha256(f"{FACTS_SALT}\0{torch_version}\0".encode())
    h.update(source)
    return h.hexdigest()


def facts_of_files(paths: list[str], cache_dir: Path | None = None, processes: int | None = None):
    """Per path: its ProblemFacts, or one line saying why there is none ('needs einops', an
    import error...). Returns (facts by path, how many came from the cache)."""
    folder = (cache_dir or default_cache_dir()) / "problem-facts"
    torch_version = _torch_version()
    keys = {p: facts_key(Path(p).read_bytes(), torch_version) for p in paths}
    found: dict[str, dict] = {}
    for path, key in keys.items():
        entry = folder / f"{key}.json"
        if entry.is_file():
            try:
                data = json.loads(entry.read_text())
            except (OSError, json.JSONDecodeError):
                continue  # a torn or foreign file: compute again
            if not _installed_since(data):
                found[path] = data
    cached = len(found)
    missing = [p for p in paths if p not in found]
    if missing:
        for path, data in zip(missing, _compute(missing, processes)):
            found[path] = data
            store_json(folder / f"{keys[path]}.json", data)
    out = {}
    for path in paths:
        data = found[path]
        if "shape" in data:
            s = data["shape"]
            out[path] = ProblemFacts(tuple(s["inputs"]), tuple(s["outputs"]), s["input_bytes"], s["output_bytes"],
                                     s["flops"])
        else:
            out[path] = f"needs {data['needs']}" if "needs" in data else data["error"]
    return out, cached


def _installed_since(data: dict) -> bool:
    """A cached 'needs <package>' whose package can now be found: compute it again."""
    from importlib.util import find_spec

    package = data.get("needs")
    if not isinstance(package, str):
        return False
    try:
        return find_spec(package) is not None
    except (ImportError, ValueError):
        return False


def _torch_version() -> str:
    """Without importing torch (seconds): a listing from the cache needs none."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("torch")
    except PackageNotFoundError:
        import torch

        return torch.__version__


def _compute(paths: list[str], processes: int | None) -> list[dict]:
    workers = min(len(paths), processes or os.cpu_count() or 2, MAX_PROCESSES)
    if workers <= 1:
        return [facts_of_file(p) for p in paths]
    # spawn, not fork: the children import torch themselves (forking a process with
    # torch's thread pools running can deadlock); each then takes many problems.
    with ProcessPoolExecutor(max_workers=workers, mp_context=get_context("spawn")) as pool:
        return list(pool.map(facts_of_file, paths, chunksize=max(1, len(paths) // (4 * workers))))


def facts_of_file(path: str) -> dict:
    """{"shape": {...}}, {"needs": package} or {"error": line}; runs in a pool process."""
    from ..build import load
    from . import shapes

    try:
        return {"shape": asdict(shapes.problem_shape(load.load_problem(path)))}
    except ModuleNotFoundError as e:
        if e.name and e.name.split(".")[0] not in ("torch", "harness"):
            return {"needs": e.name.split(".")[0]}
        return {"error": load.last_line(e)}
    except Exception as e:  # noqa: BLE001 - a broken problem file is reported, not fatal
        return {"error": load.last_line(e)}

