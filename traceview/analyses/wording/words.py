"""How numbers read in tables and sentences: per-step counts, ratios, times, lists of names.

Shared by diff and compare so that both say "2.5x", "1.20 ms" and "a, b and c" alike.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable
from typing import Any

import numpy as np

from ...report import Finding
from ...units import human_ns
from .names import tile

#: the one arrow of a change in sentences (``64x64 → 128x64``, ``4.426 ms → 7.894 ms``), as chains
#: join their ops; the text, csv and markdown renderers write it as it is (UTF-8)
TO = "→"


def ratio(a: float, b: float) -> float:
    """``b / a``; nan when ``a`` is zero or either side is missing."""
    if (
        a is None
        or b is None
        or (isinstance(a, float) and np.isnan(a))
        or (isinstance(b, float) and np.isnan(b))
    ):
        return float("nan")
    return float(b) / float(a) if a else float("nan")


def num(x: float) -> str:
    """The one way a count or an average reads, in sentences and table cells alike
    (``render.cells``): ``61``, ``1,204``, ``61.5``, ``0.33``; integers exactly (never through a
    float). Identifiers (a step number, a rank) are not counts and never come here."""
    if isinstance(x, numbers.Integral) and not isinstance(x, bool):
        return f"{int(x):,}"
    x = float(x)
    if abs(x - round(x)) < 0.005:
        return f"{round(x):,}"
    return f"{x:,.1f}" if abs(x) >= 10 else f"{x:.2f}"


def times(r: float) -> str:
    """The one way a ratio reads, in tables and sentences: two decimals (``1.13x``), two
    significant digits below 0.01 (``0.000037x``)."""
    if r is None or np.isnan(r):
        return "n/a"
    if r == 0 or abs(r) >= 0.01:
        return f"{r:.2f}x"
    return np.format_float_positional(r, precision=2, unique=True, fractional=False, trim="-") + "x"


def human(ns: float) -> str:
    return human_ns(ns)


def plural(n: float, word: str) -> str:
    return f"{num(n)} {word}{'' if abs(float(n) - 1) < 1e-9 else 's'}"


def listing(names: list[str], n: int = 8) -> str:
    """``a, b and c``; past ``n`` names, the first ``n`` and how many more."""
    head = names[:n]
    text = ", ".join(head[:-1]) + (" and " if len(head) > 1 else "") + head[-1]
    return text + (f" (+{len(names) - n} more)" if len(names) > n else "")


def pct(x: float) -> str:
    """The one way a share reads in sentences: whole percent (``63%``)."""
    return f"{x:.0f}%"


def pct1(x: Any) -> str:
    """A percent to one decimal (``6.4``), as a ``pct`` table cell shows it (``render.cells``) and a
    sentence that repeats the cell states it: one rounding for both, so they never differ."""
    return f"{float(x):.1f}"


#: how a cited figure reads (``Cite``): the sentence states the figure's magnitude this way and says
#: its direction in words ("fewer", "-"), so a script re-derives it from the cell with ``reads``
READS: dict[str, Callable[[Any], str]] = {
    "ns": lambda v: human(abs(v)),
    "count": lambda v: num(abs(v)),
    "ratio": times,
    "pct": pct,
    "pct1": lambda v: f"{abs(v):.1f}",
    "text": str,
    "name": lambda v: shortened(str(v)),
    "bytes": lambda v: size(abs(v)),
    "share": lambda v: share(v),
    "tflops": lambda v: f"{v:.3g}",
    "peak": lambda v: f"{v:.4g}",
    "tile": lambda v: tile(str(v)) or "-",  # a kernel name cell read as its tile (``128x64``)
}


def share(v: float) -> str:
    """A percent of peak in a sentence: two significant digits under 10% (``0.16%``), whole above."""
    return f"{v:.2g}%" if v < 10 else f"{v:.0f}%"


def size(n: float) -> str:
    """Bytes as a sentence states them: ``64.0 MiB``, ``12.5 KiB``, ``8 B`` (binary units, as torch
    prints them)."""
    for scale, unit in ((2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB")):
        if abs(n) >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{int(n)} B"


def shortened(text: str, limit: int = 70) -> str:
    """A name as a sentence states it: shortened in the middle past ``limit`` characters."""
    if len(text) <= limit:
        return text
    half = (limit - 1) // 2
    return text[:half] + "…" + text[-(limit - 1 - half) :]


def reads(value, how: str) -> str:
    """A cited cell as its sentence states it (``how``: a key of ``READS``)."""
    return READS[how](value)


class Cite:
    """Collects a sentence's evidence while writing it: ``c("overview", {"metric": "x"}, "a", v, "ns")``
    returns ``v`` as the sentence reads it and records the table, row (its key columns), column and
    how it reads. ``c.finding(text)`` is the sentence with its evidence (``report.Finding``)."""

    def __init__(self) -> None:
        self.evidence: list[dict] = []

    def __call__(self, table: str, row: dict, column: str, value, how: str) -> str:
        self.evidence.append({"table": table, "row": dict(row), "column": column, "reads": how})
        return reads(value, how)

    def finding(self, text: str) -> Finding:
        return Finding(text, self.evidence)
