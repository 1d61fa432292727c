"""Output formats for Reports; one module per format.

Each format module declares ``EXTENSIONS`` (the first is the one a written file gets),
``BINARY`` (whether it renders bytes, not text) and ``render_reports(reports, *, rich,
width)``, which takes a list of one or more Reports and returns one document: several
reports make one JSON document, one CSV, one HTML page (see each module). ``FORMATS`` is
the explicit list of them, nothing registers itself on import.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..atomic import write_bytes, write_text
from ..report import Report
from . import csvout, html, jsonout, markdown, text
from .html import is_report_set

if TYPE_CHECKING:  # for the annotations only: the module imports every analysis
    from ..analyses.report_set import ReportSet


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


def _as_list(reports, fmt: Format) -> list:
    """The reports to render: a ReportSet (``traceview report``) stays whole for HTML, its
    page; any other format gets its reports one after another."""
    items = [reports] if isinstance(reports, Report) or is_report_set(reports) else list(reports)
    if fmt.name == "html" and len(items) == 1:
        return items
    return [r for item in items for r in (_set_reports(item) if is_report_set(item) else [item])]


def _set_reports(rs: ReportSet) -> list:
    """A ReportSet's reports in the order its page shows them (traces without a timeline left out)."""
    return [
        rs.compare,
        rs.glance,
        rs.breakdown,
        *rs.diffs,
        *rs.sources,
        *(tl for _, tl, _ in rs.timelines if tl is not None),
    ]


def render(
    reports, fmt: str | Format = "table", *, rich: bool | None = None, width: int | None = -1
) -> str | bytes:
    """One Report, a list of them, or a ReportSet as one document in ``fmt`` (str, or bytes for
    a binary format).
    ``width`` (table only): -1 from ``COLUMNS``/the terminal, None or 0 unlimited (``--wide``)."""
    fmt = output_format(fmt)
    reports = _as_list(reports, fmt)
    if not reports:
        raise ValueError("nothing to render: no reports")
    return fmt.render(reports, rich=rich, width=width)


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


def display_text(report) -> str:
    """``str(report)`` (named in ``report.DISPLAY``): the text table without colours, never cut."""
    return text.render_text(report, rich=False, width=None)
