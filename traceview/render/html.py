"""HTML for Jupyter (Report._repr_html_): the report's section, every text escaped."""
from __future__ import annotations

from .htmlreport import report_html


def render_html(report) -> str:
    return report_html(report, level=3)
