"""``traceview summary`` and ``traceview kernels``."""

from __future__ import annotations

import click

from .common import (
    dask_options,
    devices_option,
    emit,
    executor,
    format_option,
    friendly,
    load_many,
    load_one,
    load_options,
    not_applied,
    recursive_option,
    run_option,
    select_options,
)
from .group import main


@main.command()
@click.argument("traces", nargs=-1, required=True)
@format_option
@select_options
@load_options
@recursive_option
@click.option(
    "--top", type=click.IntRange(min=0), default=10, show_default=True, help="How many top kernels to list."
)
@run_option
@dask_options
@friendly
def summary(traces, out, sel, options, recursive, top, run, workers, scheduler):
    """Device, GPU time, kernel counts in all and per step, time per kind and category, top kernels.
    With --run, TRACES (a folder or the files) are the ranks of one job: one row per rank and the run's
    overall row."""
    from .. import api
    from ..render.safe import visible
    from ..run import one_job

    if run:
        not_applied("summary --run shows the shared metrics of every rank, not a list of kernels", "top")
        paths = traces[0] if len(traces) == 1 else list(traces)
        dask = executor(workers, scheduler)
        return emit(api.summary_run(paths, recursive=recursive, sel=sel, options=options, **dask), out)
    not_applied("--workers and --scheduler spread a run's ranks: give --run", "workers", "scheduler")
    loaded = load_many(traces, options, recursive)
    hint = one_job(loaded)  # rank traces summarised one by one: say that --run exists
    if hint:
        click.echo(f"note: {visible(hint)}", err=True)
    reports = [api.summary(t, sel=sel, top=top) for t in loaded]
    emit(reports, out)  # several traces: one document (one JSON, one CSV, one HTML page)


@main.command()
@click.argument("trace")
@format_option
@select_options
@load_options
@click.option("--unclassified", is_flag=True, help="List only the names no classification rule matched.")
@click.option(
    "--plot",
    "plot",
    type=click.Path(dir_okay=False),
    default=None,
    metavar="FILE",
    help="Also draw a roofline of one step's kernels (--step, else the first step), coloured by "
    "category, into FILE (.png, .svg or .html); needs a trace recorded with shapes.",
)
@click.option(
    "--ops",
    is_flag=True,
    help="Also a table per op name and input shapes: FLOPs, bytes and GPU time "
    "per step, TFLOP/s, GB/s and percent of peak (needs shapes).",
)
@click.option(
    "--by",
    type=click.Choice(["name", "source"]),
    default="name",
    show_default=True,
    help="source: per line of your code (file.py:42 function, from a with_stack=True trace): GPU "
    "time, kernels, memcpys, FLOPs and bytes allocated.",
)
@click.option(
    "--library",
    multiple=True,
    metavar="PATTERN",
    help="With --by source: a file (utils.py) or folder (mylib/) that is not your code, beside "
    "traceview/rules/sources.toml; repeatable.",
)
@devices_option
@friendly
def kernels(trace, out, sel, options, unclassified, plot, ops, by, library):
    """Per kernel name, as nsys stats' cuda_gpu_kern_sum: share, total, count, avg, median, min, max (ns)."""
    from .. import api

    if unclassified:
        not_applied("--unclassified lists the names no rule matched, without the ops table", "ops")
    if by == "source":
        not_applied("--by source is its own table", "ops", "unclassified", "plot")
    else:
        not_applied("--library applies to --by source", "library")
    t = load_one(trace, options)
    emit(api.kernels(t, sel=sel, ops=ops, unclassified=unclassified, by=by, library=tuple(library)), out)
    if plot is not None:
        from ..render.plot import plot_roofline

        click.echo(f"wrote {plot_roofline(api.roofline(t, sel=sel), plot)}", err=True)
