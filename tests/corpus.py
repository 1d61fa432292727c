"""Where the shared corpus of real traces lives, and how tests find it."""
from __future__ import annotations

from pathlib import Path

import pytest

CORPUS = Path(__file__).resolve().parents[1].parent / "shared" / "corpus"


def corpus_files(pattern: str = "*/*.json.gz") -> list[Path]:
    return sorted(CORPUS.glob(pattern)) if CORPUS.is_dir() else []


def corpus_params(pattern: str = "*/*.json.gz"):
    """pytest params over corpus files, or one skipped param when the corpus is absent."""
    files = corpus_files(pattern)
    if not files:
        return [pytest.param(None, marks=pytest.mark.skip(reason=f"corpus not found at {CORPUS}"))]
    return [pytest.param(f, id=f"{f.parent.name}/{f.name[:50]}") for f in files]
