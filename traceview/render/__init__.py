"""Output formats for Reports; one module per format."""
from __future__ import annotations

FORMATS = ("table", "markdown", "json", "csv")


def render(report, fmt: str = "table", *, rich: bool | None = None) -> str:
    if fmt == "table":
        from .text import render_text

        return render_text(report, rich=rich)
    if fmt == "markdown":
        from .markdown import render_markdown

        return render_markdown(report)
    if fmt == "json":
        from .jsonout import render_json

        return render_json(report)
    if fmt == "csv":
        from .csvout import render_csv

        return render_csv(report)
    raise ValueError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")
