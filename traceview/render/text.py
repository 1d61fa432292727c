"""Terminal output: a rich table on a TTY, aligned plain text when piped."""
from __future__ import annotations

import sys

from .cells import display_frame, info_lines


def render_text(report, *, rich: bool | None = None) -> str:
    if rich is None:
        rich = sys.stdout.isatty()
    if rich:
        try:
            return _render_rich(report)
        except ImportError:
            pass
    return _render_plain(report)


def _render_plain(report) -> str:
    out = [report.title, "=" * len(report.title)]
    out += [f"{k}: {v}" for k, v in info_lines(report.info)]
    if report.findings:
        out += ["", "Findings:"] + [f"  - {f}" for f in report.findings]
    for name, df in report.tables.items():
        out += ["", f"[{name}]", _plain_table(df)]
    if report.notes:
        out += [""] + [f"note: {n}" for n in report.notes]
    return "\n".join(out) + "\n"


def _plain_table(df) -> str:
    header = [str(c) for c in df.columns]
    rows = display_frame(df)
    if not rows:
        return "(none)"
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
    numeric = [df[c].dtype.kind in "iuf" for c in df.columns]

    def line(cells):
        return "  ".join(c.rjust(w) if num else c.ljust(w) for c, w, num in zip(cells, widths, numeric)).rstrip()

    return "\n".join([line(header), line(["-" * w for w in widths])] + [line(r) for r in rows])


def _render_rich(report) -> str:
    from io import StringIO

    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    buf = StringIO()
    console = Console(file=buf, force_terminal=True, width=160)
    console.print(f"[bold]{escape(report.title)}[/bold]")
    for key, value in info_lines(report.info):
        console.print(f"  [dim]{escape(key)}:[/dim] {escape(value)}")
    if report.findings:
        console.print("\n[bold]Findings[/bold]")
        for f in report.findings:
            console.print(f"  • {escape(f)}")
    for name, df in report.tables.items():
        table = Table(title=escape(name), title_justify="left")
        for c in df.columns:
            table.add_column(escape(str(c)), justify="right" if df[c].dtype.kind in "iuf" else "left")
        for row in display_frame(df):
            table.add_row(*(escape(c) for c in row))
        console.print(table)
    for n in report.notes:
        console.print(f"[yellow]note:[/yellow] {escape(n)}")
    return buf.getvalue()
