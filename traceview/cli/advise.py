"""``traceview advise``: what to do about a trace, with evidence and the time at stake (``tv.advise``)."""

from __future__ import annotations

import click

from .common import command_options, emit, format_option, friendly, say
from .group import main


@main.command()
@click.option(
    "--min-pct",
    type=click.FloatRange(0, 100),
    default=None,
    help="Say advice with at least this % of the wall time at stake (default: each rule's own threshold).",
)
@format_option
@command_options("advise")
@friendly
def advise(trace, min_pct, out, sel, options):
    """What to do about TRACE, ranked by the time at stake per step: out-of-place copies, the SDPA
    math backend and why flash was not eligible, fp32 GEMMs on CUDA cores, host syncs, pageable
    copies, launch-bound stretches, exposed communication, misaligned half-precision GEMMs
    (rules/advice.toml). The time at stake is an upper bound, never more than the exposed time
    of its cause (CPU time of the ops on a trace without GPU activity); rules that cannot run on
    this trace say why and what to record."""
    from .. import api

    emit(api.advise(trace, sel=sel, min_pct=min_pct, options=options, on_warning=say), out)
