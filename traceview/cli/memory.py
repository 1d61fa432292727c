"""``traceview memory``: allocations from a trace's ``[memory]`` events, as tables and a timeline."""

from __future__ import annotations

import dataclasses

import click

from .common import emit, format_option, friendly, load_one, load_options, select_options
from .group import main


@main.command()
@click.argument("trace")
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
@select_options(only=("step", "device"))
@load_options
@friendly
def memory(trace, plot, out, sel, options):
    """Memory per device (CPU and each GPU) from the trace's [memory] events (recorded with
    profile_memory=True): the peak, when it happened and the op (and op chain) running then;
    what is alive at the peak by the op that allocated it; bytes allocated, freed and net per
    op; per step the peak and the bytes kept (growing: kept step after step). --step and
    --device (a GPU index) narrow the events."""
    from .. import api

    if plot is not None:
        from ..render.plot import check_path, pyplot

        check_path(plot)
        pyplot()  # fail before the (slow) loading when matplotlib is missing
    report = api.memory(load_one(trace, options), sel=sel, timeline=plot is not None)
    if plot is not None:
        from ..render.plot import plot_memory

        click.echo(f"wrote {plot_memory(report, plot)}", err=True)
        # drawn, not printed (one row per event): a copy without it, the API's Report left whole
        report = dataclasses.replace(
            report, tables={k: v for k, v in report.tables.items() if k != "timeline"}
        )
    emit(report, out)
