"""``traceview diff``, ``traceview compare`` and ``traceview timeline``."""

from __future__ import annotations

import os

import click

from ..api import Selection
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


def _check_plot(plot):
    if plot is not None:
        from ..render.plot import check_path, pyplot

        check_path(plot)
        pyplot()  # fail before the (slow) loading when matplotlib is missing


def _write_plot(traces, plot, *, labels, sels) -> None:
    from ..api import breakdown
    from ..render.plot import plot_breakdown

    plot_breakdown(breakdown(traces, sels=sels, labels=labels), plot)
    click.echo(f"wrote {plot}", err=True)


@main.command()
@click.argument("a")
@click.argument("b")
@format_option
@select_options
@click.option(
    "--annotation-b",
    default=None,
    metavar="NAME",
    help="B's annotation, when it is named differently from A's (--annotation).",
)
@load_options
@top_option
@plot_option
@devices_option
@dask_options
@friendly
def diff(a, b, out, sel, annotation_b, options, top, plot, workers, scheduler):
    """What changed from trace A to trace B, per step: kernels and GPU time, categories,
    kernels that appeared or vanished (with the CPU ops that launched them), GEMM path,
    attention backend. CPU-only traces compare CPU ops per step. Two folders are two runs
    (rank traces of one job each): ranks are matched and compared one by one and overall."""
    from .. import api

    if os.path.isdir(a) and os.path.isdir(b):
        not_applied(
            "two folders are compared rank by rank over whole runs; these options apply to two traces",
            "step",
            "annotation",
            "device",
            "stream",
            "kind",
            "annotation_b",
            "top",
            "plot",
        )
        return emit(api.diff_runs(a, b, options=options, **executor(workers, scheduler)), out)

    not_applied("--workers and --scheduler spread two runs' ranks: give two folders", "workers", "scheduler")

    _check_plot(plot)
    ta, tb = load_one(a, options), load_one(b, options)
    report = api.diff(ta, tb, sel=sel, annotation_b=annotation_b, top=top)  # 0: every row, in both
    if plot:
        la, lb = report.info["a_label"], report.info["b_label"]
        sel_b = (
            Selection(sel.step, annotation_b, sel.device, sel.stream, sel.kind)
            if annotation_b is not None
            else sel
        )
        _write_plot([ta, tb], plot, labels=[f"A: {la}", f"B: {lb}"], sels=[sel, sel_b])
    emit(report, out)


@main.command()
@click.argument("traces", nargs=-1, required=True)
@click.option(
    "--baseline",
    default=None,
    metavar="TRACE",
    help="Trace (path or label) the ratios are relative to (default: the first).",
)
@format_option
@select_options
@load_options
@recursive_option
@plot_option
@devices_option
@run_option
@dask_options
@friendly
def compare(traces, baseline, out, sel, options, recursive, plot, run, workers, scheduler):
    """One row per trace (files or folders of traces): kernels and GPU time per step, ratio to
    the baseline, tensor-core share of GEMM time, attention backend, top categories. With --run,
    each path is one run (a folder of rank traces): runs compared overall and rank by rank."""
    from .. import api

    if run:
        dask = executor(workers, scheduler)
        return emit(
            compare_runs(traces, baseline, sel, plot, recursive=recursive, options=options, **dask), out
        )
    not_applied("--workers and --scheduler spread a run's ranks: give --run", "workers", "scheduler")
    _check_plot(plot)
    loaded = load_many(traces, options, recursive)
    report = api.compare(loaded, baseline=baseline, sel=sel)  # a path, a label or None
    if plot:
        _write_plot(loaded, plot, labels=report["compare"]["label"].tolist(), sels=[sel] * len(loaded))
    emit(report, out)


def compare_runs(paths, baseline, sel, plot, *, recursive, options, workers, scheduler):
    """``compare --run``: every path must be a folder (one run each)."""
    from ..api import compare_runs as compare_many
    from ..errors import TraceviewError

    if plot is not None:
        raise click.UsageError("--plot draws traces, not runs: leave it out with --run")
    for p in paths:
        if not os.path.isdir(p):
            raise TraceviewError(f"{p}: not a folder; compare --run takes one folder of rank traces per run")
    return compare_many(
        list(paths),
        baseline=baseline,
        recursive=recursive,
        sel=sel,
        options=options,
        workers=workers,
        scheduler=scheduler,
    )


@main.command()
@click.argument("trace")
@click.option(
    "--plot",
    "plot",
    type=click.Path(dir_okay=False),
    default=None,
    metavar="FILE",
    help="Also draw the step into FILE (.png, .svg or .html); without it, only the table.",
)
@format_option
@select_options
@load_options
@friendly
def timeline(trace, plot, out, sel, options):
    """One step (--step; default the first) on a time axis: GPU activities in a lane per
    stream, coloured by kernel category (CPU-only traces: CPU ops in a lane per thread), drawn
    with --plot. Prints the step's activities (start, duration, lane, category) in --format."""
    from .. import api

    _check_plot(plot)
    report = api.timeline(load_one(trace, options), sel=sel)
    if plot is not None:  # the table alone needs no matplotlib
        from ..render.plot import plot_timeline

        busy = (
            f" (GPU busy {report.info['gpu_busy_pct']:.0f}% of the step's span)"
            if "gpu_busy_pct" in report.info
            else ""
        )
        click.echo(f"wrote {plot_timeline(report, plot)}{busy}", err=True)
    emit(report, out)  # the help promises the table in every format, table included
