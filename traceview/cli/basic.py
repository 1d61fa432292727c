"""``traceview summary`` and ``traceview kernels``."""
from __future__ import annotations

import click

from .group import main
from .common import (devices_option, emit, format_option, friendly, load_many, load_options, loader,
                     recursive_option, run_option, select_options, selection)


@main.command()
@click.argument("traces", nargs=-1, required=True)
@format_option
@select_options
@load_options
@recursive_option
@click.option("--top", type=click.IntRange(min=0), default=10, show_default=True, help="How many top kernels to list.")
@run_option
@friendly
def summary(traces, out, step, annotation, device, stream, kind, salvage, max_size, no_cache, rules, recursive,
            top, run):
    """Device, GPU time, kernel counts in all and per step, time per kind and category, top kernels.
    With --run, TRACES (a folder or the files) are the ranks of one job: one row per rank and the run's
    overall row."""
    from ..analyses.summary import summary as summarise
    from ..render.safe import visible
    from ..run import one_job

    sel = selection(step, annotation, device, stream, kind)
    if run:
        from ..api import summary_run
        from .common import load_kwargs

        return emit(summary_run(traces[0] if len(traces) == 1 else list(traces), recursive=recursive, sel=sel,
                                **load_kwargs(salvage, max_size, no_cache, rules)), out)
    loaded = load_many(traces, loader(salvage, max_size, no_cache, rules), recursive)
    hint = one_job(loaded)  # rank traces summarised one by one: say that --run exists
    if hint:
        click.echo(f"note: {visible(hint)}", err=True)
    reports = [summarise(t, sel, top=top) for t in loaded]
    emit(reports, out)  # several traces: one document (one JSON, one CSV, one HTML page)


@main.command()
@click.argument("trace")
@format_option
@select_options
@load_options
@click.option("--unclassified", is_flag=True, help="List only the names no classification rule matched.")
@click.option("--plot", "plot", type=click.Path(dir_okay=False), default=None, metavar="FILE",
              help="Also draw a roofline of one step's kernels (--step, else the first step), coloured by "
                   "category, into FILE (.png, .svg or .html); needs a trace recorded with shapes.")
@click.option("--ops", is_flag=True, help="Also a table per op name and input shapes: FLOPs, bytes and GPU time "
                                          "per step, TFLOP/s, GB/s and percent of peak (needs shapes).")
@devices_option
@friendly
def kernels(trace, out, step, annotation, device, stream, kind, salvage, max_size, no_cache, rules, unclassified,
            plot, ops):
    """Per kernel name, as nsys stats' cuda_gpu_kern_sum: Time %, Total, Instances, Avg, Med, Min, Max."""
    from ..analyses.kernels import kernel_stats, unclassified_report

    t = loader(salvage, max_size, no_cache, rules)(trace)
    sel = selection(step, annotation, device, stream, kind)
    emit(unclassified_report(t, sel) if unclassified else kernel_stats(t, sel, ops=ops), out)
    if plot is not None:
        from ..analyses.efficiency import roofline
        from ..render.plot import plot_roofline

        click.echo(f"wrote {plot_roofline(roofline(t, sel), plot)}", err=True)
