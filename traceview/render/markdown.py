"""GitHub-flavoured markdown."""
from __future__ import annotations

from .cells import display_frame, heading, info_lines


def render_markdown(report) -> str:
    out = [f"## {report.title}", ""]
    out += [f"- **{k}**: {v}" for k, v in info_lines(report.info)]
    if report.findings:
        out += ["", "### Findings", ""] + [f"- {f}" for f in report.findings]
    for name, df in report.tables.items():
        out += ["", f"### {heading(report, name)}", ""]
        cols = [str(c) for c in df.columns]
        out.append("| " + " | ".join(cols) + " |")
        out.append("|" + "|".join("---:" if df[c].dtype.kind in "iuf" else "---" for c in df.columns) + "|")
        out += ["| " + " | ".join(_escape(c) for c in row) + " |" for row in display_frame(df)]
    if report.notes:
        out += [""] + [f"> note: {n}" for n in report.notes]
    return "\n".join(out) + "\n"


def _escape(text: str) -> str:
    return text.replace("|", "\\|")
