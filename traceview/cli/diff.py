"""``traceview diff``, ``traceview compare`` and ``traceview timeline``."""

from __future__ import annotations

import os

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

plot_option = click.option(
    "--plot",
    "plot",
    type=click.Path(dir_okay=False),
    default=None,
    metavar="FILE",
    help="Also draw GPU time per step by category per trace as stacked bars "
    "(CPU-only traces: CPU self time by op) into FILE (.png, .svg or .html).",
)
top_option = click.option(
    "--top",
    type=click.IntRange(min=0),
    default=20,
    show_default=True,
    help="Rows to keep in the per-kernel and per-op tables (0: all).",
)


@main.command()
@format_option
@command_options("diff")
@click.option(
    "--annotation-b",
    default=None,
    metavar="NAME",
    help="B's annotation, when it is named differently from A's (--annotation).",
)
@top_option
@plot_option
@dask_options
@friendly
def diff(a, b, out, sel, annotation_b, options, top, plot, workers, scheduler):
    """What changed from trace A to trace B, per step: kernels and GPU time, categories,
    kernels that appeared or vanished (with the CPU ops that launched them), GEMM path,
    attention backend. CPU-only traces compare CPU ops per step. Two folders are two runs
    (rank traces of one job each): ranks are matched and compared one by one and overall."""
    runs = os.path.isdir(a) and os.path.isdir(b)
    refuse("diff", runs=runs)
    plain = annotation_b is None and plot is None and workers is None and scheduler is None
    again = plain and applies((a, b), sel, options, out)
    if again and show("diff", (a, b), {"top": top}, out):  # an earlier run's, without pandas
        return
    seen = kept.identities((a, b)) if again else []
    from .. import api

    if runs:
        return emit(api.diff_runs(a, b, options=options, on_warning=say, **executor(workers, scheduler)), out)
    report = api.diff(
        a, b, sel=sel, annotation_b=annotation_b, top=top, plot=plot, options=options, on_warning=say
    )  # top 0: every row, in both
    if plot is not None:
        say(f"wrote {plot}")
    emit(report, out)
    if again:
        keep("diff", (a, b), seen, {"top": top}, report)


@main.command()
@click.option(
    "--baseline",
    default=None,
    metavar="TRACE",
    help="Trace (path or label) the ratios are relative to (default: the first).",
)
@format_option
@command_options("compare")
@recursive_option
@plot_option
@run_option
@dask_options
@friendly
def compare(traces, baseline, out, sel, options, recursive, plot, run, workers, scheduler):
    """One row per trace (files or folders of traces): kernels and GPU time per step, ratio to
    the baseline, tensor-core share of GEMM time, attention backend, top categories. With --run,
    each path is one run (a folder of rank traces): runs compared overall and rank by rank."""
    refuse("compare", run=run)
    plain = not run and plot is None and workers is None and scheduler is None
    again = plain and applies(traces, sel, options, out)
    asked = {"baseline": baseline, "recursive": recursive}
    if again and show("compare", traces, asked, out):  # an earlier run's, without pandas
        return
    seen = kept.identities(traces) if again else []
    from .. import api

    # with --run every path is one run: a file is refused there ("not a folder"), as in the API
    report = api.compare(
        list(traces),
        baseline=baseline,  # a path, a label or None
        recursive=recursive,
        run=run,
        plot=plot,
        sel=sel,
        options=options,
        on_warning=say,
        **executor(workers, scheduler),
    )
    if plot is not None:
        say(f"wrote {plot}")
    emit(report, out)
    if again:
        keep("compare", traces, seen, asked, report)


@main.command()
@click.option(
    "--plot",
    "plot",
    type=click.Path(dir_okay=False),
    default=None,
    metavar="FILE",
    help="Also draw the step into FILE (.png, .svg or .html); without it, only the table.",
)
@format_option
@command_options("timeline")
@friendly
def timeline(trace, plot, out, sel, options):
    """One step (--step; default the first) on a time axis: GPU activities in a lane per
    stream, coloured by kernel category (CPU-only traces: CPU ops in a lane per thread), drawn
    with --plot. Prints the step's activities (start, duration, lane, category) in --format."""
    from .. import api

    report = api.timeline(trace, sel=sel, plot=plot, options=options, on_warning=say)
    if plot is not None:  # the table alone needs no matplotlib
        busy = (
            f" (GPU busy {report.info['gpu_busy_pct']:.0f}% of the step's span)"
            if "gpu_busy_pct" in report.info
            else ""
        )
        say(f"wrote {plot}{busy}")
    emit(report, out)  # the help promises the table in every format, table included
