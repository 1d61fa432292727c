"""The README's Python examples run as doctests, so they never go stale."""

from __future__ import annotations

import doctest
import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_readme_examples(monkeypatch):
    monkeypatch.chdir(ROOT)  # examples use paths relative to the project root
    result = doctest.testfile(
        str(ROOT / "README.md"),
        module_relative=False,
        optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE,
    )
    assert result.attempted >= 5
    assert result.failed == 0


def test_readme_opens_with_the_two_commands():
    text = (ROOT / "README.md").read_text()
    blocks = text.split("```bash\n")[1:3]
    assert "traceview compare sample_traces/" in blocks[0]
    assert "python -m pytest" in blocks[1]
    ci = (ROOT / ".ci" / "run").read_text()
    assert blocks[1].strip().splitlines()[0] in ci.splitlines()  # CI runs the README's command verbatim
    assert os.access(ROOT / ".ci" / "run", os.X_OK)
