"""``traceview summary`` and ``traceview kernels``."""
from __future__ import annotations

import click

from .group import main
from .common import (emit, format_option, friendly, load_many, load_options, loader, recursive_option,
                     select_options, selection)


@main.command()
@click.argument("traces", nargs=-1, required=True)
@format_option
@select_options
@load_options
@recursive_option
@click.option("--top", type=int, default=10, show_default=True, help="How many top kernels to list.")
@friendly
def summary(traces, fmt, step, annotation, device, stream, kind, salvage, max_size, no_cache, rules, recursive,
            top):
    """Device, GPU time, kernel counts in all and per step, time per kind and category, top kernels."""
    from ..analyses.summary import summary as summarise

    load = loader(salvage, max_size, no_cache, rules)
    sel = selection(step, annotation, device, stream, kind)
    for t in load_many(traces, load, recursive):
        emit(summarise(t, sel, top=top), fmt)


@main.command()
@click.argument("trace")
@format_option
@select_options
@load_options
@click.option("--unclassified", is_flag=True, help="List only the names no classification rule matched.")
@friendly
def kernels(trace, fmt, step, annotation, device, stream, kind, salvage, max_size, no_cache, rules, unclassified):
    """Per kernel name, as nsys stats' cuda_gpu_kern_sum: Time %, Total, Instances, Avg, Med, Min, Max."""
    from ..analyses.kernels import kernel_stats, unclassified_report

    t = loader(salvage, max_size, no_cache, rules)(trace)
    sel = selection(step, annotation, device, stream, kind)
    emit(unclassified_report(t, sel) if unclassified else kernel_stats(t, sel), fmt)
