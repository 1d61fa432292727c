"""HTML for Jupyter (Report._repr_html_)."""
from __future__ import annotations

import html

from .cells import display_frame, info_lines


def render_html(report) -> str:
    out = [f"<h3>{html.escape(report.title)}</h3>", "<ul>"]
    out += [f"<li><b>{html.escape(k)}</b>: {html.escape(v)}</li>" for k, v in info_lines(report.info)]
    out.append("</ul>")
    if report.findings:
        out += ["<h4>Findings</h4>", "<ul>"] + [f"<li>{html.escape(f)}</li>" for f in report.findings] + ["</ul>"]
    for name, df in report.tables.items():
        out.append(f"<h4>{html.escape(name)}</h4><table><thead><tr>")
        out += [f"<th>{html.escape(str(c))}</th>" for c in df.columns]
        out.append("</tr></thead><tbody>")
        for row in display_frame(df):
            out.append("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>")
        out.append("</tbody></table>")
    out += [f"<p><i>note: {html.escape(n)}</i></p>" for n in report.notes]
    return "\n".join(out)
