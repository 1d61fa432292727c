"""Where the shared corpus of real traces lives, and how tests find it.

``$TRACEVIEW_CORPUS`` names the corpus folder; without it, ``../shared/corpus`` next to the
repository. A test that needs the corpus and finds none skips with ``SKIP_REASON``;
``conftest.py`` counts those skips and says once, at the end of the run, how many there were.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ENV = "TRACEVIEW_CORPUS"
DEFAULT = Path(__file__).resolve().parents[1].parent / "shared" / "corpus"
CORPUS = Path(os.environ[ENV]).expanduser().resolve() if os.environ.get(ENV) else DEFAULT
SKIP_PREFIX = "corpus not found at"
SKIP_REASON = f"{SKIP_PREFIX} {CORPUS}; set {ENV}"


def corpus_files(pattern: str = "*/*.json.gz") -> list[Path]:
    return sorted(CORPUS.glob(pattern)) if CORPUS.is_dir() else []


def corpus_params(pattern: str = "*/*.json.gz"):
    """pytest params over corpus files, or one skipped param when the corpus is absent."""
    files = corpus_files(pattern)
    if not files:
        return [pytest.param(None, marks=pytest.mark.skip(reason=SKIP_REASON))]
    return [pytest.param(f, id=f"{f.parent.name}/{f.name[:50]}") for f in files]
