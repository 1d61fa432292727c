"""``traceview annotate``: the trace written back with traceview's classification in it."""

from __future__ import annotations

import sys

import click

from ..render.safe import visible
from .common import EXIT_USAGE, command_options, friendly, say
from .group import main


@main.command()
@click.option(
    "-o",
    "--output",
    "output",
    type=click.Path(dir_okay=False),
    required=True,
    metavar="OUT",
    help="Annotated trace to write (.json or .json.gz; .gz compresses it). Never the input itself.",
)
@command_options("annotate")
@friendly
def annotate(trace, output, options):
    """Write TRACE back with each GPU activity's category, tensor-core use, attention backend
    and launching op chain in its args (traceview.*), plus counter tracks of GPU time by
    category per step, for Perfetto UI or chrome://tracing. OUT appears only once complete."""
    from .. import api
    from ..render.annotated import SameFileError

    try:  # OUT is checked there before the (slow) load
        counts = api.annotate(trace, output, options=options, on_warning=say)
    except SameFileError as exc:  # the input would be replaced: a usage error, not a bad trace
        click.echo(f"traceview: error: {visible(str(exc))}", err=True)
        sys.exit(EXIT_USAGE)
    if counts["not_loaded"]:
        click.echo(
            f"warning: {visible(trace)}: {counts['not_loaded']} complete events the load skipped are copied "
            "unannotated",
            err=True,
        )
    if counts["skipped"]:
        click.echo(
            f"warning: {visible(trace)}: {counts['skipped']} GPU activities have args that are "
            "not an object: left unannotated",
            err=True,
        )
    click.echo(
        f"wrote {visible(output)}: {counts['activities']} GPU activities annotated, "
        f"{counts['counter_events']} counter samples",
        err=True,
    )
