"""CSV: a one-table report as that table; otherwise every table with a leading ``table``
column, the report's facts (``info``) first as rows of table ``info`` (key, value); diff's and
compare's sentences last, as rows of table ``findings`` (text).
Several reports (``summary A B``) are one CSV with one header: each report's rows as
above, after a leading ``report`` column holding its label (the trace's label, else its
path, else its title; a label met twice gets `` (N)``, its position), the columns the
union of theirs, empty where a report has no such column.
Numbers are those JSON writes (:mod:`.raw`): the Report's own, whole floats as integers. Text is made safe
(:func:`.safe.csv_frame`): controls escaped, a cell that would start a spreadsheet
formula prefixed with ``'``; numbers stay numbers."""

from __future__ import annotations

import io

import pandas as pd

from ..report import FINDING_OBJECTS
from .raw import raw_report
from .safe import csv_frame


def render_csv(report, table: str | None = None) -> str:
    return _to_csv(_frame(raw_report(report), table))


def render_reports(reports, *, rich=None, width=None) -> str:
    if len(reports) == 1:
        return render_csv(reports[0])
    frames = [_frame(raw_report(r)) for r in reports]
    labelled = [
        df.assign(report=label)[["report", *df.columns]]
        for df, label in zip(frames, labels(reports), strict=True)
    ]
    return _to_csv(pd.concat(labelled, ignore_index=True))


def labels(reports) -> list[str]:
    """What tells each report apart in a ``report`` column."""
    names = [str(r.info.get("label") or r.info.get("trace") or r.title) for r in reports]
    return [f"{n} ({i})" if names.count(n) > 1 else n for i, n in enumerate(names)]


def _frame(report, table: str | None = None) -> pd.DataFrame:
    if table is not None or len(report.tables) == 1:
        return report.tables[table or next(iter(report.tables))]
    info = pd.DataFrame(
        {
            "table": "info",
            "key": list(report.info),
            "value": [v if not isinstance(v, (list, dict)) else str(v) for v in report.info.values()],
        }
    )
    frames = [info] + [
        _cells(df).assign(table=name)[["table", *df.columns]] for name, df in report.tables.items()
    ]
    if report.kind in FINDING_OBJECTS and report.findings:  # the sentences, as JSON has them
        frames.append(pd.DataFrame({"table": "findings", "text": [str(f) for f in report.findings]}))
    return pd.concat(frames, ignore_index=True)


def _cells(df: pd.DataFrame) -> pd.DataFrame:
    """Integer columns as Python ints: stacked under another table's float column of the same name,
    they would be written 0.0 where JSON writes 0."""
    ints = [c for c in df.columns if str(df[c].dtype) == "Int64"]
    return df.astype({c: object for c in ints}) if ints else df


def _to_csv(df: pd.DataFrame) -> str:
    buf = io.StringIO()
    csv_frame(df).to_csv(buf, index=False)
    return buf.getvalue()
