"""Self-contained HTML pages: their parts (``--format html``, :mod:`.html`) and ``traceview report``.

Everything is inline (CSS, one script, figures as SVG), so the file opens offline and
can be attached to a pull request; a Content-Security-Policy forbids every request and
every script but ours (by its hash). All trace text (kernel and op names, labels,
metadata) is escaped: a name reading ``<script>`` shows as written, and control and bidi
characters show as ``\\x1b``, ``\\u202e`` (:mod:`.safe`), as in every text output.
"""

from __future__ import annotations

import base64
import hashlib

from .cells import display_frame, heading, info_lines
from .safe import esc

CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:2em auto;max-width:1200px;color:#222;
padding:0 1em}
h1{font-size:1.5em}h2{font-size:1.25em;border-bottom:1px solid #ddd;padding-bottom:.2em;margin-top:2em}
h3{font-size:1.05em}table{border-collapse:collapse;margin:.5em 0 1em;font-size:12.5px}
th,td{border:1px solid #ddd;padding:3px 7px;vertical-align:top}th{background:#f3f4f6;cursor:pointer}
td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
td.name{min-width:9em;max-width:38em;overflow-wrap:anywhere;font-family:ui-monospace,Menlo,Consolas,monospace;font-size:12px}
ul.findings li{margin:.25em 0}dl.info{display:grid;grid-template-columns:max-content auto;gap:.1em 1em}
dl.info dt{color:#555}dl.info dd{margin:0;overflow-wrap:anywhere}.note{color:#8a5a00}
figure{margin:1em 0}figure svg{max-width:100%;height:auto}figcaption{color:#555;font-size:.9em}
div.scroll{overflow-x:auto;max-width:100%}
"""
#: sorts a table by the clicked column; marks the page rendered for tests
SCRIPT = """
document.querySelectorAll("table.report th").forEach(function (th) {
  th.addEventListener("click", function () {
    var table = th.closest("table"), body = table.tBodies[0], i = th.cellIndex;
    var rows = Array.prototype.slice.call(body.rows), asc = th.dataset.asc !== "1";
    var key = function (r) { var t = r.cells[i].textContent.replace(/[,x%]/g, ""); var n = parseFloat(t);
      return isNaN(n) ? t : n; };
    rows.sort(function (a, b) {
      var x = key(a), y = key(b);
      return (x > y ? 1 : x < y ? -1 : 0) * (asc ? 1 : -1);
    });
    rows.forEach(function (r) { body.appendChild(r); }); th.dataset.asc = asc ? "1" : "0";
  });
});
document.documentElement.dataset.rendered = "1";
"""
NAME_COLUMNS = {"name", "kernel", "example", "launched_by", "chain", "op", "trace", "label", "key", "rule"}


def page(title: str, body: str) -> str:
    digest = base64.b64encode(hashlib.sha256(SCRIPT.encode()).digest()).decode()
    csp = (
        f"default-src 'none'; style-src 'unsafe-inline'; img-src data:; script-src 'sha256-{digest}'; "
        "base-uri 'none'; form-action 'none'"
    )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">\n'
        f'<meta http-equiv="Content-Security-Policy" content="{csp}">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{esc(title)}</title>\n<style>{CSS}</style></head>\n<body>\n{body}\n"
        f"<script>{SCRIPT}</script>\n</body></html>\n"
    )


def table_html(df, caption: str = "") -> str:
    cols = [str(c) for c in df.columns]
    numeric = [df[c].dtype.kind in "iuf" for c in df.columns]
    # a wide table scrolls inside its box instead of running off the page (issue 37)
    out = ['<div class="scroll"><table class="report">']
    if caption:
        out.append(f"<caption hidden>{esc(caption)}</caption>")
    out.append("<thead><tr>" + "".join(f"<th>{esc(c)}</th>" for c in cols) + "</tr></thead><tbody>")
    for row in display_frame(df):
        cells = []
        for c, v, num in zip(cols, row, numeric, strict=True):
            cls = ' class="num"' if num else (' class="name"' if c in NAME_COLUMNS else "")
            cells.append(f"<td{cls}>{esc(v)}</td>")
        out.append("<tr>" + "".join(cells) + "</tr>")
    out.append("</tbody></table></div>")
    return "\n".join(out)


def report_html(report, level: int = 2, info: bool = True) -> str:
    """One Report as a section: title, facts, findings, tables, notes."""
    h, sub = f"h{level}", f"h{level + 1}"
    out = [f'<section class="report" data-kind="{esc(report.kind)}"><{h}>{esc(report.title)}</{h}>']
    if info and report.info:
        out.append(
            '<dl class="info">'
            + "".join(f"<dt>{esc(k)}</dt><dd>{esc(v)}</dd>" for k, v in info_lines(report.info))
            + "</dl>"
        )
    if report.findings:
        out.append(
            f'<{sub}>Findings</{sub}><ul class="findings">'
            + "".join(f"<li>{esc(f)}</li>" for f in report.findings)
            + "</ul>"
        )
    for name, df in report.tables.items():
        title = heading(report, name)
        out.append(f"<{sub}>{esc(title)}</{sub}>" + (table_html(df, title) if len(df) else "<p>(none)</p>"))
    out += [f'<p class="note">note: {esc(n)}</p>' for n in report.notes]
    out.append("</section>")
    return "\n".join(out)


def figure_html(svg: str, caption: str) -> str:
    """An SVG that matplotlib drew (its text as paths) with an escaped caption."""
    return f"<figure>{svg}<figcaption>{esc(caption)}</figcaption></figure>"


def render_report_set(rs, title: str) -> str:
    """``traceview report``: the comparison, the diffs in words, figures, the top source lines of
    each trace with stacks, one timeline per trace."""
    from .flame import flame_svg
    from .plot import breakdown_figure, svg_text, timeline_figure

    out = [f"<h1>{esc(title)}</h1>", report_html(rs.compare)]
    out.append(report_html(rs.glance, info=False))
    out.append(
        "<h2>GPU time by category per trace</h2>"
        if rs.breakdown.info["basis"] == "gpu"
        else "<h2>CPU self time by op per trace</h2>"
    )
    out.append(figure_html(svg_text(breakdown_figure(rs.breakdown)), rs.breakdown.title))
    for d in rs.diffs:
        out.append(
            f'<section class="diff"><h2>{esc(d.title)}</h2><ul class="findings">'
            + "".join(f"<li>{esc(f)}</li>" for f in d.findings)
            + "</ul></section>"
        )
    for src in rs.sources:  # the lines of the user's code that ran the most GPU time (traces with stacks)
        out.append(report_html(src, info=False))
    for label, tree in rs.flames:  # where in the code the time goes, as a flame graph (issue 36)
        out.append(f"<h2>{esc(label)}: the call stacks as a flame graph</h2>")
        caption = f"a box per frame, as wide as its time ({tree.info['weight']}); hover a box for its figures"
        out.append(figure_html(flame_svg(tree), caption))
    out.append("<h2>One step per trace</h2>")
    for label, tl, why in rs.timelines:
        if tl is None:
            out.append(f'<p class="note">{esc(label)}: no timeline ({esc(why)})</p>')
            continue
        fig, caption = timeline_figure(tl)
        out.append(figure_html(svg_text(fig), caption))
    return page(title, "\n".join(out))
