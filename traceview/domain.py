"""Domain facts about CPU ops and kernel families, read from ``rules/ops.toml``.

Kept as data beside the kernel rules so that a new attention backend, copy op or
GEMM family is one edit in one file, not a change to the analyses.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

OPS_PATH = Path(__file__).parent / "rules" / "ops.toml"


@dataclass(frozen=True)
class Domain:
    sdpa_ops: dict  # SDPA CPU op name -> backend
    backend_words: dict  # backend -> how it reads in a sentence
    copy_ops: tuple  # ops that copy a tensor, most telling first
    tensor_core_majority_pct: float
    gemm_families: tuple  # (compiled regex, label or None: the regex's first group)

    def backend_word(self, backend: str) -> str:
        return self.backend_words.get(backend, f"{backend} backend")


@functools.lru_cache(maxsize=1)
def domain() -> Domain:
    doc = tomllib.loads(OPS_PATH.read_text(encoding="utf-8"))
    families = tuple((re.compile(f["pattern"]), f["label"] or None) for f in doc["gemm_families"])
    return Domain(
        sdpa_ops=dict(doc["sdpa_ops"]),
        backend_words=dict(doc["backend_words"]),
        copy_ops=tuple(doc["copies"]["ops"]),
        tensor_core_majority_pct=float(doc["gemm"]["tensor_core_majority_pct"]),
        gemm_families=families,
    )


@functools.lru_cache(maxsize=16384)
def gemm_family(name: str) -> str:
    """The GEMM family a kernel name tells: ``s16816``, ``s1688``, ``sgemm``, ``gemv``, ``xmma``, ..."""
    for pattern, label in domain().gemm_families:
        m = pattern.search(name)
        if m:
            return label or m.group(1)
    return "other"
