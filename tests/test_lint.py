"""The habits that keep the code so (issue 21 item 8): CI runs the linter, the formatter check
and the type checker before the tests, with the README's own command; the linter and the
formatter also run here (a second each), so a finding fails the suite too. mypy takes a
minute and runs in CI only."""

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHECKS = ["ruff check .", "ruff format --check .", "mypy"]
READER_AGAIN = "TRACEVIEW_DECODER=python python -m pytest -q -n 2 -m reader"


def _readme_command() -> str:
    text = (ROOT / "README.md").read_text()
    return next(line for line in text.splitlines() if "python -m pytest" in line and "pip install" in line)


def test_ci_runs_the_readme_command_with_lint_format_and_types_before_the_tests():
    command = _readme_command()
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert command in ci, "the README's test command and .ci/run's differ"
    steps = [s.strip() for s in command.split("&&")]
    assert "'.[test,hta,lint]'" in steps[1], steps
    # && stops at the first failure; the reader's tests run again with the msgspec decoder (issue 23)
    assert steps[2:] == [*CHECKS, "python -m pytest -q -n 2", READER_AGAIN], steps


def test_lint_extra_pins_what_ci_installs():
    pyproject = (ROOT / "pyproject.toml").read_text()
    lint = re.search(r"^lint = \[(.*)\]$", pyproject, re.M)
    assert lint, "no lint extra in pyproject.toml"
    pins = re.findall(r'"([\w-]+)==[\w.]+"', lint.group(1))
    assert sorted(pins) == ["mypy", "pandas-stubs", "ruff"], lint.group(0)


def _ruff() -> list[str]:
    found = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    if found is None:
        pytest.skip("ruff not installed (pip install -e '.[lint]')")
    return [found]


@pytest.mark.parametrize("args", [["check", "."], ["format", "--check", "."]])
def test_ruff_finds_nothing(args):
    proc = subprocess.run([*_ruff(), *args], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]


def test_ruff_check_fails_on_a_finding(tmp_path):
    """The check above can fail: the project's configuration flags a loop variable a closure
    reads late (B023, the bug once in render/text.py)."""
    bad = tmp_path / "bad.py"
    bad.write_text("fs = []\nfor i in range(3):\n    fs.append(lambda: i)\n")
    config = ["--config", str(ROOT / "pyproject.toml")]
    proc = subprocess.run([*_ruff(), "check", *config, str(bad)], capture_output=True, text=True)
    assert proc.returncode == 1 and "B023" in proc.stdout, proc.stdout + proc.stderr
