"""Output formats for Reports; one module per format.

Each format module has ``render_reports(reports, *, rich, width)``, which takes a list of one or
more Reports and returns one document: several reports make one JSON document, one CSV, one HTML
page (see each module). ``OUTPUTS`` is the explicit list of them, as data: each format's name,
its file extensions (the first is the one a written file gets), whether it renders bytes, and its
module, imported when a report is first rendered in it, so that the command line declares
``--format`` without importing pandas. Nothing registers itself on import.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..atomic import write_bytes, write_text
from .sets import is_report_set

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


def _format(name: str, module: str, extensions: tuple[str, ...], binary: bool = False) -> Format:
    def render_reports(reports, **kwargs):
        return importlib.import_module(f"{__name__}.{module}").render_reports(reports, **kwargs)

    return Format(name, extensions, binary, render_reports)


#: ``--format`` name → format, in the order the help lists them
OUTPUTS: dict[str, Format] = {
    "table": _format("table", "text", (".txt",)),
    "markdown": _format("markdown", "markdown", (".md", ".markdown")),
    "json": _format("json", "jsonout", (".json",)),
    "csv": _format("csv", "csvout", (".csv",)),
    "html": _format("html", "html", (".html", ".htm")),
}
FORMATS = tuple(OUTPUTS)
#: the format modules, reachable as attributes (``traceview.render.html``) as when they were imported here
_MODULES = frozenset({"text", "markdown", "jsonout", "csvout", "html"})


def __getattr__(name: str):
    if name in _MODULES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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
    items = [reports] if _is_report(reports) or is_report_set(reports) else list(reports)
    if fmt.name == "html" and len(items) == 1:
        return items
    return [r for item in items for r in (_set_reports(item) if is_report_set(item) else [item])]


def _is_report(x) -> bool:
    """Whether ``x`` is a Report; asked without importing its module (and pandas): none exists
    until that module is imported."""
    module = sys.modules.get(__name__.rpartition(".")[0] + ".report")
    return module is not None and isinstance(x, module.Report)


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
    from .text import render_text

    return render_text(report, rich=False, width=None)
