"""CSV: a one-table report as that table; otherwise every table with a leading ``table``
column, the report's facts (``info``) first as rows of table ``info`` (key, value).
Numbers are raw (:mod:`.raw`): integer ns, integer counts. Text is made safe
(:func:`.safe.csv_frame`): controls escaped, a cell that would start a spreadsheet
formula prefixed with ``'``; numbers stay numbers."""
from __future__ import annotations

import io

import pandas as pd

from .raw import raw_report
from .safe import csv_frame


def render_csv(report, table: str | None = None) -> str:
    report = raw_report(report)
    buf = io.StringIO()
    if table is not None or len(report.tables) == 1:
        name = table or next(iter(report.tables))
        csv_frame(report.tables[name]).to_csv(buf, index=False)
        return buf.getvalue()
    info = pd.DataFrame({"table": "info", "key": list(report.info),
                         "value": [v if not isinstance(v, (list, dict)) else str(v) for v in report.info.values()]})
    frames = [info] + [df.assign(table=name)[["table", *df.columns]] for name, df in report.tables.items()]
    csv_frame(pd.concat(frames, ignore_index=True)).to_csv(buf, index=False)
    return buf.getvalue()
