"""GitHub-flavoured markdown.

Trace text is untrusted: controls are escaped (:mod:`.safe`), and in every text from the
trace ``&``, ``<`` and ``>`` become entities (a name reading ``<script>`` or
``<img onerror=...>`` shows as written, never as HTML); in table cells ``|`` is escaped
too, so one row stays one row (a newline is already ``\\n`` by then); ``](`` is escaped so
that no name turns into a link or a remote image.
"""

from __future__ import annotations

import html

from .shown import shown


def render_reports(reports, *, rich=None, width=None) -> str:
    """Several reports one after another, each its own ``##`` section."""
    return "".join(render_markdown(r) for r in reports)


def render_markdown(report) -> str:
    """``report``: a Report, or what it shows (``shown.Shown``)."""
    report = shown(report)
    out = [f"## {_text(report.title)}", ""]
    out += [f"- **{_text(k)}**: {_text(v)}" for k, v in report.info]
    if report.findings:
        out += ["", "### Findings", ""] + [f"- {_text(f)}" for f in report.findings]
    for t in report.tables:
        out += ["", f"### {_text(t.heading)}", ""]
        out.append("| " + " | ".join(_escape(c) for c in t.header) + " |")
        out.append("|" + "|".join("---:" if n else "---" for n in t.numeric) + "|")
        out += ["| " + " | ".join(_escape(c) for c in row) + " |" for row in t.rows]
    if report.notes:
        out += [""] + [f"> note: {_text(n)}" for n in report.notes]
    return "\n".join(out) + "\n"


def _text(text: str) -> str:
    """HTML in trace text shown, not interpreted (quotes stay: markdown gives them no power);
    ``](`` escaped so that no name becomes a link or a remote image (``![x](http://...)``)."""
    return html.escape(text, quote=False).replace("](", "]\\(")


def _escape(text: str) -> str:
    return _text(text).replace("|", "\\|")
