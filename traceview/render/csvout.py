"""CSV: the report's first table, or every table with a leading ``table`` column."""
from __future__ import annotations

import io

import pandas as pd


def render_csv(report, table: str | None = None) -> str:
    buf = io.StringIO()
    if table is not None or len(report.tables) == 1:
        name = table or next(iter(report.tables))
        report.tables[name].to_csv(buf, index=False)
        return buf.getvalue()
    frames = [df.assign(table=name)[["table", *df.columns]] for name, df in report.tables.items()]
    pd.concat(frames, ignore_index=True).to_csv(buf, index=False)
    return buf.getvalue()
