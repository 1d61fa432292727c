"""``traceview report``: one self-contained HTML file comparing traces."""

from __future__ import annotations

from pathlib import Path

import click

from .common import devices_option, friendly, load_many, load_options, recursive_option, select_options
from .group import main


@main.command()
@click.argument("traces", nargs=-1, required=True)
@click.option(
    "-o",
    "--output",
    "output",
    type=click.Path(dir_okay=False),
    required=True,
    metavar="FILE",
    help="HTML file to write (one file: styles, script and figures inline; no network).",
)
@click.option(
    "--baseline",
    default=None,
    metavar="TRACE",
    help="Trace (path or label) the ratios and diffs are relative to (default: the first).",
)
@select_options
@load_options
@recursive_option
@devices_option
@friendly
def report(traces, output, baseline, sel, options, recursive):
    """An HTML report of traces (files or folders): findings in words, the compare table,
    GPU time by category per trace, tensor-core share, attention backend, and one step's
    timeline per trace. Needs matplotlib (traceview[plot])."""
    from .. import api
    from ..render.plot import pyplot

    api.check_report_path(output)  # before the (slow) loading
    pyplot()  # fail before the (slow) loading when matplotlib is missing
    api.report(load_many(traces, options, recursive), output=output, baseline=baseline, sel=sel)
    click.echo(
        f"wrote {Path(output)}", err=True
    )  # written atomically: a full disk leaves no truncated report
