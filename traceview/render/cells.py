"""Cell formatting shared by the human-readable renderers (text, markdown, html).

One convention for numbers: a header that names a unit (``_ns``, ``(ns)``, ``_pct``,
``(%)``) has its cells in that unit, as plain numbers (``309,437``, ``12.3``); ratios
read ``1.13x``; counts are integers, averages (per step) keep one or two decimals.
Text is never shortened here: the terminal renderer fits it to the width.
"""

from __future__ import annotations

import math
import numbers

import pandas as pd

from .. import units
from ..analyses.wording.words import num, pct1, times
from .safe import visible


def is_ns(column: str) -> bool:
    return column.endswith(("_ns", "(ns)"))


def is_pct(column: str) -> bool:
    return column.startswith("pct") or column.endswith(("(%)", "_pct", "share")) or "_pct_" in column


def is_ratio(column: str) -> bool:
    return column.startswith("ratio") or column.endswith("ratio")


#: columns that hold identifiers, not quantities: ``ProfilerStep#1009`` reads 1009, not 1,009
ID_COLUMNS = frozenset(
    {"step", "rank", "device", "stream", "event", "world_size", "correlation", "external_id"}
)


def is_integer(value) -> bool:
    """A Python or numpy integer (not a bool): printed exactly, never through a float."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


#: a count or an average: the same formatter as the findings' sentences (``analyses.wording.words.num``)
number = num


def ratio_text(r: float) -> str:
    """The one rounding of a ratio, in tables and sentences alike (``analyses.wording.words.times``)."""
    return times(r)


def cell(column: str, value) -> str:
    if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, bool) or type(value).__name__ == "bool_":
        return "yes" if value else "no"
    if isinstance(value, str):
        return visible(value)  # the renderers escaped it already; a Path or other object may not be
    if not isinstance(value, (int, float)) and not hasattr(value, "__float__"):
        return visible(str(value))
    if column in ID_COLUMNS and float(value).is_integer():
        return str(int(value))
    if is_ns(column):  # int64 ns above 2**53 would lose digits through a float
        return f"{int(value):,}" if is_integer(value) else f"{float(value):,.0f}"
    if is_pct(column):
        return pct1(value)
    if is_ratio(column):
        return ratio_text(float(value))
    return number(value)


def display_frame(df: pd.DataFrame) -> list[list[str]]:
    """Cells as text. A table with a ``metric`` column (diff's overview) takes each row's
    unit from its metric's name (``gpu_time_per_step_ns``: the row's numbers are ns)."""
    cols = [str(c) for c in df.columns]
    if "metric" not in cols:
        return [[cell(c, v) for c, v in zip(cols, row, strict=True)] for row in df.itertuples(index=False)]
    units = [str(m) for m in df["metric"]]
    return [
        [cell(c if is_ratio(c) or c == "metric" else unit, v) for c, v in zip(cols, row, strict=True)]
        for unit, row in zip(units, df.itertuples(index=False), strict=True)
    ]


def info_lines(info: dict) -> list[tuple[str, str]]:
    return [
        (
            visible(key),
            cell(key, value) if not isinstance(value, (list, tuple, dict)) else visible(str(value)),
        )
        for key, value in info.items()
        if key != PER_STEP_TABLES
    ]


#: info key naming the tables whose numbers are averages per step (their headings say so)
PER_STEP_TABLES = "per_step_tables"


def heading(report, name: str) -> str:
    per = report.info.get("per", "step")
    return f"{name} (per {per})" if name in report.info.get(PER_STEP_TABLES, ()) else name


def human(ns) -> str:
    return units.human_ns(ns)
