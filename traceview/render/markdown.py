"""GitHub-flavoured markdown.

Trace text is untrusted: controls are escaped (:mod:`.safe`), and in every text from the
trace ``&``, ``<`` and ``>`` become entities (a name reading ``<script>`` or
``<img onerror=...>`` shows as written, never as HTML); in table cells ``|`` is escaped
too, so one row stays one row (a newline is already ``\\n`` by then); ``](`` is escaped so
that no name turns into a link or a remote image.
"""

from __future__ import annotations

import html

from .cells import display_frame, heading, info_lines
from .safe import visible_report


def render_reports(reports, *, rich=None, width=None) -> str:
    """Several reports one after another, each its own ``##`` section."""
    return "".join(render_markdown(r) for r in reports)


def render_markdown(report) -> str:
    report = visible_report(report)
    out = [f"## {_text(report.title)}", ""]
    out += [f"- **{_text(k)}**: {_text(v)}" for k, v in info_lines(report.info)]
    if report.findings:
        out += ["", "### Findings", ""] + [f"- {_text(f)}" for f in report.findings]
    for name, df in report.tables.items():
        out += ["", f"### {_text(heading(report, name))}", ""]
        cols = [str(c) for c in df.columns]
        out.append("| " + " | ".join(_escape(c) for c in cols) + " |")
        out.append("|" + "|".join("---:" if df[c].dtype.kind in "iuf" else "---" for c in df.columns) + "|")
        out += ["| " + " | ".join(_escape(c) for c in row) + " |" for row in display_frame(df)]
    if report.notes:
        out += [""] + [f"> note: {_text(n)}" for n in report.notes]
    return "\n".join(out) + "\n"


def _text(text: str) -> str:
    """HTML in trace text shown, not interpreted (quotes stay: markdown gives them no power);
    ``](`` escaped so that no name becomes a link or a remote image (``![x](http://...)``)."""
    return html.escape(text, quote=False).replace("](", "]\\(")


def _escape(text: str) -> str:
    return _text(text).replace("|", "\\|")
