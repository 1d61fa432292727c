"""``traceview summary`` and ``traceview kernels``."""

from __future__ import annotations

import click

from .. import kept
from .again import applies, keep, show
from .common import (
    command_options,
    dask_options,
    emit,
    executor,
    format_option,
    friendly,
    recursive_option,
    refuse,
    run_option,
    say,
)
from .group import main


@main.command()
@format_option
@command_options("summary")
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
    refuse("summary", run=run)
    again = not run and applies(traces, sel, options, out)
    if again and show("summary", traces, {"top": top}, out):  # an earlier run's, without pandas
        return
    seen = kept.identities(traces) if again else []
    from .. import api

    if run:
        paths = traces[0] if len(traces) == 1 else list(traces)
        dask = executor(workers, scheduler)
        report = api.summary_run(paths, recursive=recursive, sel=sel, options=options, on_warning=say, **dask)
        return emit(report, out)
    reports = api.summary(
        list(traces), sel=sel, top=top, recursive=recursive, options=options, on_warning=say
    )
    emit(reports, out)  # several traces: one document (one JSON, one CSV, one HTML page)
    if again:
        keep("summary", traces, seen, {"top": top}, reports)


@main.command()
@format_option
@command_options("kernels")
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
@friendly
def kernels(trace, out, sel, options, unclassified, plot, ops, by, library):
    """Per kernel name, as nsys stats' cuda_gpu_kern_sum: share, total, count, avg, median, min, max (ns)."""
    from .. import api

    refuse("kernels", unclassified=unclassified, by=by)
    report = api.kernels(
        trace,
        sel=sel,
        ops=ops,
        unclassified=unclassified,
        by=by,
        library=tuple(library),
        plot=plot,
        options=options,
        on_warning=say,
    )
    emit(report, out)
    if plot is not None:
        say(f"wrote {plot}")
