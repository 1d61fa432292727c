"""JSON with a stable schema (documented in docs/json-schema.md): the Report's own numbers.

A number is written as the Report holds it, so that the JSON and the API's DataFrames agree
(issue 37): a float column (or info value) whose values are all whole is written as integers
(counts, sums of ns), and nothing is rounded (a per-step mean keeps its decimals). Percentages
and ratios stay floats. One report is one Report document; several (``summary A B``) are one
document too, of schema ``traceview.reports`` with the Report documents, in order, under
``reports``."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pandas as pd

from ..report import SCHEMA_VERSION, report_to_dict
from .cells import is_pct, is_ratio

EXTENSIONS = (".json",)
BINARY = False


def render_json(report) -> str:
    return _dump(report_to_dict(json_report(report)))


def render_reports(reports, *, rich=None, width=None) -> str:
    if len(reports) == 1:
        return render_json(reports[0])
    return _dump(
        {
            "schema": "traceview.reports",
            "schema_version": SCHEMA_VERSION,
            "reports": [report_to_dict(json_report(r)) for r in reports],
        }
    )


def _dump(doc: dict) -> str:
    return json.dumps(doc, indent=2) + "\n"


def json_report(report):
    """A copy of ``report`` whose whole floats are integers; every value as the Report holds it."""
    return dataclasses.replace(
        report,
        tables={n: _frame(df) for n, df in report.tables.items()},
        info={k: _value(str(k), v) for k, v in report.info.items()},
    )


def _counted(name: str) -> bool:
    return not is_pct(name) and not is_ratio(name)  # a percentage or ratio stays a float


def _whole(v: np.ndarray) -> bool:
    v = v[~np.isnan(v)]
    return bool(len(v)) and bool(np.all(v == np.round(v))) and bool(np.all(np.abs(v) < 2**53))


def _frame(df: pd.DataFrame) -> pd.DataFrame:
    if "metric" in df.columns:  # diff's overview: each row is its own metric
        out = df.astype({c: object for c in df.columns if c != "metric" and _counted(str(c))})
        for c in out.columns:
            if c != "metric" and _counted(str(c)):
                out[c] = [_value(str(m), v) for m, v in zip(df["metric"].astype(str), df[c], strict=True)]
        return out
    cols = {}
    for c in df.columns:
        s = df[c]
        if s.dtype.kind == "f" and _counted(str(c)) and _whole(s.to_numpy(dtype=float)):
            s = s.astype("Int64")
        cols[c] = s
    return pd.DataFrame(cols, index=df.index)


def _value(key: str, value):
    if isinstance(value, (float, np.floating)) and _counted(key) and float(value).is_integer():
        return int(value) if abs(float(value)) < 2**53 else value
    return value
