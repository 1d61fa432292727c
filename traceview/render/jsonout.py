"""JSON with a stable schema (documented in docs/json-schema.md): the Report's own numbers.

A number is written as the Report holds it, so that the JSON and the API's DataFrames agree
(issue 37): a float column (or info value) whose values are all whole is written as integers
(counts, sums of ns), and nothing is rounded (a per-step mean keeps its decimals). Percentages
and ratios stay floats. One report is one Report document; several (``summary A B``) are one
document too, of schema ``traceview.reports`` with the Report documents, in order, under
``reports``."""

from __future__ import annotations

import json

from ..report import SCHEMA_VERSION, report_to_dict
from .raw import raw_report


def render_json(report) -> str:
    return _dump(report_to_dict(raw_report(report)))


def render_reports(reports, *, rich=None, width=None) -> str:
    if len(reports) == 1:
        return render_json(reports[0])
    return _dump(
        {
            "schema": "traceview.reports",
            "schema_version": SCHEMA_VERSION,
            "reports": [report_to_dict(raw_report(r)) for r in reports],
        }
    )


def _dump(doc: dict) -> str:
    return json.dumps(doc, indent=2) + "\n"
