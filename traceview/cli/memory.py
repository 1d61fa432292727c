"""``traceview memory``: allocations from a trace's ``[memory]`` events, as tables and a timeline."""

from __future__ import annotations

import dataclasses

import click

from .common import command_options, emit, format_option, friendly, say
from .group import main


@main.command()
@click.option(
    "--plot",
    "plot",
    type=click.Path(dir_okay=False),
    default=None,
    metavar="FILE",
    help="Also draw allocated and reserved memory over time per device, the peak marked, "
    "into FILE (.png, .svg or .html).",
)
@format_option
@command_options("memory")
@friendly
def memory(trace, plot, out, sel, options):
    """Memory per device (CPU and each GPU) from the trace's [memory] events (recorded with
    profile_memory=True): the peak, when it happened and the op (and op chain) running then;
    what is alive at the peak by the op that allocated it; bytes allocated, freed and net per
    op; per step the peak and the bytes kept (growing: kept step after step). --step and
    --device (a GPU index) narrow the events."""
    from .. import api

    report = api.memory(trace, sel=sel, plot=plot, options=options, on_warning=say)
    if plot is not None:
        say(f"wrote {plot}")
        # drawn, not printed (one row per event): a copy without it, the API's Report left whole
        report = dataclasses.replace(
            report, tables={k: v for k, v in report.tables.items() if k != "timeline"}
        )
    emit(report, out)
