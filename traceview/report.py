"""The value every analysis returns: named tables plus plain-language findings.

Renderers (traceview/render/) turn a Report into text, markdown, JSON or CSV;
the CLI only picks a renderer. In a notebook a Report shows as HTML and its
tables are ordinary DataFrames (``report["by_kind"]``).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

SCHEMA_VERSION = 1


@dataclass
class Report:
    kind: str  # "summary", "kernels", "diff", "compare", ...
    title: str
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    findings: list[str] = field(default_factory=list)
    info: dict = field(default_factory=dict)  # scalar facts (device, totals, ...)
    notes: list[str] = field(default_factory=list)  # warnings about the data

    def __getitem__(self, name: str) -> pd.DataFrame:
        return self.tables[name]

    def __str__(self) -> str:
        from .render.text import render_text

        return render_text(self, rich=False)

    def _repr_html_(self) -> str:
        from .render.html import render_html

        return render_html(self)

    def to_dict(self) -> dict:
        from .render.jsonout import report_to_dict

        return report_to_dict(self)
