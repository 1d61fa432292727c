"""Output formats for Reports; one module per format.

Each format module declares ``EXTENSIONS`` (the first is the one a written file gets),
``BINARY`` (whether it renders bytes, not text) and ``render_reports(reports, *, rich,
width)``, which takes a list of one or more Reports and returns one document: several
reports make one JSON document, one CSV, one HTML page (see each module). ``FORMATS`` is
the explicit list of them, nothing registers itself on import.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ..atomic import write_bytes, write_text
from ..report import Report, set_display
from . import csvout, html, jsonout, markdown, text


@dataclass(frozen=True)
class Format:
    name: str
    extensions: tuple[str, ...]
    binary: bool
    render: Callable[..., str | bytes]

    @property
    def extension(self) -> str:
        return self.extensions[0]


def _format(name: str, module) -> Format:
    return Format(name, module.EXTENSIONS, module.BINARY, module.render_reports)


#: ``--format`` name → format, in the order the help lists them
OUTPUTS: dict[str, Format] = {
    "table": _format("table", text),
    "markdown": _format("markdown", markdown),
    "json": _format("json", jsonout),
    "csv": _format("csv", csvout),
    "html": _format("html", html),
}
FORMATS = tuple(OUTPUTS)


def output_format(fmt: str | Format) -> Format:
    if isinstance(fmt, Format):
        return fmt
    try:
        return OUTPUTS[fmt]
    except KeyError:
        raise ValueError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}") from None


def format_for_path(path) -> str | None:
    """The format whose extension ``path`` ends in (case aside), or None."""
    suffix = Path(path).suffix.lower()
    return next((name for name, f in OUTPUTS.items() if suffix in f.extensions), None)


def _as_list(reports) -> list:
    return [reports] if isinstance(reports, Report) else list(reports)


def render(reports, fmt: str | Format = "table", *, rich: bool | None = None,
           width: int | None = -1) -> str | bytes:
    """One Report or a list of them as one document in ``fmt`` (str, or bytes for a binary format).
    ``width`` (table only): -1 from ``COLUMNS``/the terminal, None or 0 unlimited (``--wide``)."""
    reports = _as_list(reports)
    if not reports:
        raise ValueError("nothing to render: no reports")
    return output_format(fmt).render(reports, rich=rich, width=width)


def write(reports, fmt: str | Format, path, *, width: int | None = None) -> Path:
    """Render ``reports`` and write them to ``path`` whole or not at all (:mod:`..atomic`).
    A table in a file is plain text (no rich colours) and, by default, never shortened: a
    file has no terminal width to fit. Returns the path."""
    out = render(reports, fmt, rich=False, width=width)
    if isinstance(out, bytes):
        write_bytes(path, out)
    else:
        write_text(path, out)
    return Path(path)


def _text(report) -> str:
    return text.render_text(report, rich=False, width=None)


set_display(text=_text, html=html.render_html)
