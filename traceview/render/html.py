"""HTML: ``--format html`` as one self-contained page (one report, or several one after
another under one heading; ``traceview report``'s ReportSet as its page), and a report's
section for Jupyter (Report._repr_html_).
Every text escaped (:mod:`.htmlreport`)."""

from __future__ import annotations

from .htmlreport import esc, page, render_report_set, report_html
from .sets import is_report_set


def render_html(report) -> str:
    return report_html(report, level=3)


def render_reports(reports, *, rich=None, width=None) -> str:
    if len(reports) == 1 and is_report_set(reports[0]):
        n = len(reports[0].timelines)  # one per trace
        return render_report_set(reports[0], f"traceview report: {n} trace{'s' if n != 1 else ''}")
    if len(reports) == 1:
        return page(reports[0].title, report_html(reports[0], level=1))
    title = _title(reports)
    return page(title, f"<h1>{esc(title)}</h1>\n" + "\n".join(report_html(r) for r in reports))


def _title(reports) -> str:
    kinds = {r.kind for r in reports}
    if len(kinds) == 1:  # "Summary of 3 traces", as the command was asked
        return f"{next(iter(kinds)).replace('_', ' ').capitalize()} of {len(reports)} traces"
    return f"{len(reports)} reports"
