"""Terminal output: a rich table on a TTY, aligned plain text when piped.

Both fit the width (:mod:`.fit`): ``COLUMNS``, else the terminal's; ``PIPED_WIDTH`` (200) when
piped with no ``COLUMNS``; ``width=0`` or None (``--wide``, a file, ``str(report)``) never
shortens a name. Trace text
is escaped (:mod:`.safe`) before anything is measured, so widths count what is shown.
"""

from __future__ import annotations

import sys

from .fit import fit_rows, layout, middle, output_width, wrap
from .shown import Shown, shown


def render_reports(reports, *, rich: bool | None = None, width: int | None = -1) -> str:
    """Several reports one after another."""
    return "".join(render_text(r, rich=rich, width=width) for r in reports)


def render_text(report, *, rich: bool | None = None, width: int | None = -1) -> str:
    """``report``: a Report, or what it shows (``shown.Shown``). ``width``: -1 (default) from the
    terminal (``PIPED_WIDTH`` when piped), None or 0 unlimited, else that many columns."""
    width = output_width() if width == -1 else (width or None)
    report = shown(report)  # escaped before fitting: ``\x1b`` takes four columns, ESC none
    if rich is None:
        rich = sys.stdout.isatty()
    if rich:
        try:
            return _render_rich(report, width)
        except ImportError:
            pass
    return _render_plain(report, width)


def _head(report: Shown, width) -> list[str]:
    title = wrap(report.title, width)
    out = [*title, "=" * min(max(len(t) for t in title), width or 10**6)]
    for k, v in report.info:
        line = f"{k}: {v}"
        # a value of one word (a path) stays whole on its key's line, so it can be copied
        whole = width is not None and len(line) > width and not any(c.isspace() for c in str(v))
        out += [line] if whole else wrap(line, width, "", "    ")
    return out


def _render_plain(report: Shown, width) -> str:
    out = _head(report, width)
    if report.findings:
        out += ["", "Findings:"]
        for f in report.findings:
            out += wrap(f, width, "  - ", "    ")
    for table in report.tables:
        out += ["", *wrap(f"[{table.heading}]", width), _plain_table(table, width)]
    if report.notes:
        out.append("")
        for n in report.notes:
            out += wrap(f"note: {n}", width, "", "    ")
    return "\n".join(out) + "\n"


def _plain_table(table, width) -> str:
    header, rows, numeric = table.header, table.rows, table.numeric
    if not rows:
        return "(none)"
    blocks = []
    for block in layout(header, rows, numeric, width):

        def line(cells, block=block):
            return "  ".join(
                middle(cells[i], w).rjust(w) if numeric[i] else middle(cells[i], w).ljust(w) for i, w in block
            ).rstrip()

        blocks.append(
            "\n".join(
                [line(header), "  ".join("-" * w for _, w in block)]
                + [line(r) for r in fit_rows(rows, block)]
            )
        )
    return "\n\n".join(blocks)


def _render_rich(report: Shown, width) -> str:
    from io import StringIO

    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    buf = StringIO()
    console = Console(
        file=buf,
        force_terminal=True,
        width=width or 100_000,
        emoji=False,
        highlight=False,
        soft_wrap=width is None,
    )
    console.print(f"[bold]{escape(report.title)}[/bold]")
    for key, value in report.info:
        # a one-word value (a path): the terminal wraps it, rich would fold it mid-path (not copyable)
        path = not any(c.isspace() for c in value)
        console.print(f"  [dim]{escape(key)}:[/dim] {escape(value)}", soft_wrap=path or width is None)
    if report.findings:
        console.print("\n[bold]Findings[/bold]")
        for f in report.findings:
            console.print(f"  • {escape(f)}")
    for t in report.tables:
        header, rows, numeric = t.header, t.rows, t.numeric
        for n, block in enumerate(layout(header, rows, numeric, width, gap=3, edge=4) if rows else [[]]):
            title = t.heading + (" (continued)" if n else "")
            table = Table(title=escape(title), title_justify="left")
            for i, w in block:
                table.add_column(
                    escape(middle(header[i], w)),
                    justify="right" if numeric[i] else "left",
                    no_wrap=True,
                    min_width=w,
                    max_width=w,
                )
            for r in fit_rows(rows, block):
                table.add_row(*(escape(middle(r[i], w)) for i, w in block))
            console.print(table)
    for note in report.notes:
        console.print(f"[yellow]note:[/yellow] {escape(note)}")
    return buf.getvalue()
