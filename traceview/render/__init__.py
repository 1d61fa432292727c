"""Output formats for Reports; one module per format."""
from __future__ import annotations

from ..report import set_display

FORMATS = ("table", "markdown", "json", "csv", "html")


def render(report, fmt: str = "table", *, rich: bool | None = None, width: int | None = -1) -> str:
    """``width`` (table only): -1 from ``COLUMNS``/the terminal, None or 0 unlimited (``--wide``)."""
    if fmt == "table":
        from .text import render_text

        return render_text(report, rich=rich, width=width)
    if fmt == "markdown":
        from .markdown import render_markdown

        return render_markdown(report)
    if fmt == "json":
        from .jsonout import render_json

        return render_json(report)
    if fmt == "csv":
        from .csvout import render_csv

        return render_csv(report)
    if fmt == "html":
        from .htmlreport import render_html_page

        return render_html_page(report)
    raise ValueError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")


def _text(report) -> str:
    from .text import render_text

    return render_text(report, rich=False, width=None)


def _html(report) -> str:
    from .html import render_html

    return render_html(report)


set_display(text=_text, html=_html)
