"""``traceview report``: one self-contained HTML file comparing traces."""

from __future__ import annotations

from pathlib import Path

import click

from .common import command_options, friendly, recursive_option, say
from .group import main


@main.command()
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
@command_options("report")
@recursive_option
@friendly
def report(traces, output, baseline, sel, options, recursive):
    """An HTML report of traces (files or folders): findings in words, the compare table,
    GPU time by category per trace, tensor-core share, attention backend, and one step's
    timeline per trace. Needs matplotlib (traceview[plot])."""
    from .. import api

    # the report path and matplotlib are checked there, before the (slow) loading
    api.report(
        list(traces),
        output=output,
        baseline=baseline,
        sel=sel,
        recursive=recursive,
        options=options,
        on_warning=say,
    )
    say(f"wrote {Path(output)}")  # written atomically: a full disk leaves no truncated report
