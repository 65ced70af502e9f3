"""The README's two commands work as written on a fresh clone, and CI runs the same ones."""
import re
import tomllib

from conftest import ROOT

README = (ROOT / "README.md").read_text()
CI = (ROOT / ".ci" / "run").read_text()


def two_commands_section() -> str:
    return README.split("## Two commands", 1)[1].split("\n## ", 1)[0]


def code_blocks(text: str) -> list[str]:
    return [b.strip() for b in re.findall(r"```\n(.*?)```", text, re.S)]


def test_exactly_two_copyable_commands():
    blocks = code_blocks(two_commands_section())
    assert len(blocks) == 2 and all("\n" not in b for b in blocks), blocks
    install_and_run, tests = blocks
    assert install_and_run.startswith("pip install -e .") and "kbench run" in install_and_run


def test_test_command_installs_what_it_needs():
    """`python -m pytest` alone fails on a fresh clone: pytest comes with the `test` extra."""
    tests = code_blocks(two_commands_section())[1]
    assert tests.startswith("pip install -e '.[test]' && ") and tests.endswith("python -m pytest")
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert any(dep.startswith("pytest") for dep in extras["test"])


def test_no_gpu_install_line():
    section = " ".join(two_commands_section().split())
    assert "`pip install torch --index-url https://download.pytorch.org/whl/cpu`" in section


def test_ci_runs_the_readmes_test_command_after_the_cpu_torch():
    tests = code_blocks(two_commands_section())[1]
    lines = [ln.strip() for ln in CI.splitlines()]
    assert tests in lines
    # CI's machines serve torch==2.13.0 as a CPU build from local disk; a user's follows the README's line.
    cpu_torch = next(i for i, ln in enumerate(lines) if "pip install" in ln and ("whl/cpu" in ln or "torch==2.13.0" in ln))
    assert cpu_torch < lines.index(tests)
