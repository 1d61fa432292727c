"""JSON with a stable schema (documented in README "JSON output")."""
from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd

from ..report import SCHEMA_VERSION


def report_to_dict(report) -> dict:
    return {
        "schema": "traceview.report",
        "schema_version": SCHEMA_VERSION,
        "kind": report.kind,
        "title": report.title,
        "info": _plain(report.info),
        "findings": list(report.findings),
        "tables": {name: _records(df) for name, df in report.tables.items()},
        "notes": list(report.notes),
    }


def render_json(report) -> str:
    return json.dumps(report_to_dict(report), indent=2) + "\n"


def _records(df: pd.DataFrame) -> list[dict]:
    return [{str(c): _plain(v) for c, v in zip(df.columns, row)} for row in df.itertuples(index=False)]


def _plain(value):
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if value is None or value is pd.NA:
        return None
    if isinstance(value, (np.bool_, bool)):
        return bool(value)
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.floating, float)):
        return None if math.isnan(value) or math.isinf(value) else float(value)
    if isinstance(value, (int, str)):
        return value
    return str(value)
