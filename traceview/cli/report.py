"""``traceview report``: one self-contained HTML file comparing traces."""
from __future__ import annotations

from pathlib import Path

import click

from ..atomic import write_text
from ..errors import TraceviewError
from .common import (devices_option, friendly, load_many, load_options, loader, recursive_option, select_options,
                     selection)
from .group import main


@main.command()
@click.argument("traces", nargs=-1, required=True)
@click.option("-o", "--output", "output", type=click.Path(dir_okay=False), required=True, metavar="FILE",
              help="HTML file to write (one file: styles, script and figures inline; no network).")
@click.option("--baseline", default=None, metavar="TRACE",
              help="Trace (path or label) the ratios and diffs are relative to (default: the first).")
@select_options
@load_options
@recursive_option
@devices_option
@friendly
def report(traces, output, baseline, step, annotation, device, stream, kind, salvage, max_size, no_cache, rules,
           recursive):
    """An HTML report of traces (files or folders): findings in words, the compare table,
    GPU time by category per trace, tensor-core share, attention backend, and one step's
    timeline per trace. Needs matplotlib (traceview[plot])."""
    from ..analyses.report_set import report_set
    from ..render.htmlreport import render_report_set
    from ..render.plot import pyplot

    path = Path(output)
    if path.suffix.lower() not in (".html", ".htm"):
        raise TraceviewError(f"{path}: the report file must end in .html")
    if not path.parent.exists():
        raise TraceviewError(f"{path}: folder {path.parent} does not exist")
    pyplot()  # fail before the (slow) loading when matplotlib is missing
    loaded = load_many(traces, loader(salvage, max_size, no_cache, rules), recursive)
    rs = report_set(loaded, selection(step, annotation, device, stream, kind), baseline)
    text = render_report_set(rs, f"traceview report: {len(loaded)} trace{'s' if len(loaded) != 1 else ''}")
    write_text(path, text)  # atomic: a full disk or Ctrl-C leaves no truncated report (OutputError: exit 1)
    click.echo(f"wrote {path}", err=True)
