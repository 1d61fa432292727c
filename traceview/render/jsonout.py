"""JSON with a stable schema (documented in docs/json-schema.md): the Report's own numbers.

A number is written as the Report holds it, so that the JSON and the API's DataFrames agree
(issue 37): a float column (or info value) whose values are all whole is written as integers
(counts, sums of ns), and nothing is rounded (a per-step mean keeps its decimals). Percentages
and ratios stay floats. One report is one Report document; several (``summary A B``) are one
document too, of schema ``traceview.reports`` with the Report documents, in order, under
``reports``."""

from __future__ import annotations

import json


def document(report) -> dict:
    """One Report's document (``report.report_to_dict`` of its raw numbers)."""
    from ..report import report_to_dict  # its tables' module: pandas
    from .raw import raw_report

    return report_to_dict(raw_report(report))


def render_json(report) -> str:
    return render_documents([document(report)])


def render_reports(reports, *, rich=None, width=None) -> str:
    return render_documents([document(r) for r in reports])


def render_documents(docs: list[dict]) -> str:
    """One Report document as itself; several as one ``traceview.reports`` document, of the
    schema version each of them carries (the one ``report.SCHEMA_VERSION``)."""
    if len(docs) == 1:
        return _dump(docs[0])
    return _dump(
        {"schema": "traceview.reports", "schema_version": docs[0]["schema_version"], "reports": docs}
    )


def _dump(doc: dict) -> str:
    return json.dumps(doc, indent=2) + "\n"
