"""Cell formatting shared by the human-readable renderers (text, markdown, html)."""
from __future__ import annotations

import math

import pandas as pd

from ..units import human_ns


def cell(column: str, value) -> str:
    if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if column.endswith("(ns)"):
        return f"{value:,.0f}"
    if column.endswith("_ns"):
        return human_ns(value)
    if column.startswith("pct") or column.endswith("(%)") or column.endswith("_pct") or column.endswith("share"):
        return f"{float(value):.1f}"
    if column.startswith("ratio") or column.endswith("ratio"):
        return f"{float(value):.2f}x"
    if isinstance(value, float):
        return f"{value:,.2f}"
    if isinstance(value, (bool,)):
        return "yes" if value else "no"
    text = str(value)
    return text if len(text) <= 90 else text[:87] + "..."


def display_frame(df: pd.DataFrame) -> list[list[str]]:
    cols = [str(c) for c in df.columns]
    return [[cell(c, v) for c, v in zip(cols, row)] for row in df.itertuples(index=False)]


def info_lines(info: dict) -> list[tuple[str, str]]:
    return [(key, cell(key, value)) for key, value in info.items()]
