import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # `import cli`, `import harness` without installing
sys.path.insert(0, str(Path(__file__).resolve().parent))  # `import expect`


def pytest_collection_modifyitems(config, items):
    """gpu-marked tests skip, visibly, where torch sees no CUDA device."""
    try:
        import torch

        has_cuda = torch.cuda.is_available()
    except Exception:  # noqa: BLE001
        has_cuda = False
    if has_cuda:
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def kbench_cache(tmp_path_factory) -> Path:
    """One build cache for every CLI run in the session: each C++ fixture builds once.
    An explicit KBENCH_CACHE is used as is, so builds made by earlier runs are reused."""
    import os

    return Path(os.environ["KBENCH_CACHE"]) if os.environ.get("KBENCH_CACHE") else tmp_path_factory.mktemp("kbench-cache")


@pytest.fixture(scope="session")
def run_cli(kbench_cache):
    """Run `python cli.py ARGS` as a user would; returns the CompletedProcess."""

    def run(*args: str, cwd: Path = ROOT, timeout: float = 900, env: dict | None = None) -> subprocess.CompletedProcess:
        env = {**os.environ, "KBENCH_CACHE": str(kbench_cache), "PYTHONUNBUFFERED": "1", **(env or {})}
        return subprocess.run(
            [sys.executable, str(ROOT / "cli.py"), *args], cwd=cwd, env=env, capture_output=True, text=True,
            timeout=timeout,
        )

    return run


# Escape fixtures (tests/fixtures/adversarial/*/14_escape, ...) put this string in the
# command line of every process they leave behind, and name every file they write
# outside their scratch folder kbench-pwned-*.
ESCAPE_MARKER = b"kbench-escape-marker"


def marker_pids() -> set[int]:
    """Live processes whose command line carries ESCAPE_MARKER."""
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                if ESCAPE_MARKER in (entry / "cmdline").read_bytes():
                    found.add(int(entry.name))
            except OSError:
                continue
    return found


def kill_pids(pids) -> None:
    import signal

    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def pwned_files() -> set[Path]:
    """Files escape fixtures write outside their scratch folder."""
    return set(Path("/tmp").glob("kbench-pwned-*")) | set(Path.home().glob("kbench-pwned-*"))
