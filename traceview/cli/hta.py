"""``traceview hta``: Holistic Trace Analysis's breakdowns of a trace, as a traceview Report."""

from __future__ import annotations

import click

from .common import command_options, emit, format_option, friendly, say
from .group import main

ANALYSES = ("temporal", "idle", "kernels", "launch")


@main.command()
@format_option
@command_options("hta")
@click.option(
    "--analysis",
    type=click.Choice(ANALYSES),
    default="temporal",
    show_default=True,
    help="Which HTA analysis: temporal breakdown, idle time, kernel breakdown, launch statistics.",
)
@click.option(
    "--rank",
    type=click.IntRange(min=0),
    default=None,
    help="Rank to file the trace under (default: distributedInfo.rank in the trace, else 0).",
)
@click.option("--drop-last-step", is_flag=True, help="Drop the last ProfilerStep, as HTA does by default.")
@click.option(
    "--no-ns-rounding",
    is_flag=True,
    help="Keep fractional-µs timestamps instead of HTA's inward rounding (HTA_DISABLE_NS_ROUNDING).",
)
@friendly
def hta(trace, out, options, analysis, rank, drop_last_step, no_ns_rounding):
    """HTA's temporal/idle/kernel/launch analysis, COMPUTATION split by traceview's categories.

    Needs Holistic Trace Analysis: pip install 'traceview[hta]'.
    """
    from .. import api

    report = api.hta(
        trace,
        analysis=analysis,
        rank=rank,
        drop_last_step=drop_last_step,
        ns_rounding=not no_ns_rounding,
        options=options,
        on_warning=say,
    )  # HTA missing: one line with the install hint, before loading
    emit(report, out)
