"""``traceview annotate``: the trace written back with traceview's classification in it."""
from __future__ import annotations

import sys

import click

from ..render.safe import visible
from .common import friendly, load_kwargs, load_options, loader
from .group import main

EXIT_USAGE = 2


@main.command()
@click.argument("trace")
@click.option("-o", "--output", "output", type=click.Path(dir_okay=False), required=True, metavar="OUT",
              help="Annotated trace to write (.json or .json.gz; .gz compresses it). Never the input itself.")
@load_options
@friendly
def annotate(trace, output, salvage, max_size, no_cache, rules):
    """Write TRACE back with each GPU activity's category, tensor-core use, attention backend
    and launching op chain in its args (traceview.*), plus counter tracks of GPU time by
    category per step, for Perfetto UI or chrome://tracing. OUT appears only once complete."""
    from ..analyses.annotate import annotations
    from ..render.annotated import SameFileError, check_output, write_annotated

    try:  # before the (slow) load: a wrong OUT is known now
        check_output(trace, output)
    except SameFileError as exc:  # the input would be replaced: a usage error, not a bad trace
        click.echo(f"traceview: error: {visible(str(exc))}", err=True)
        sys.exit(EXIT_USAGE)
    t = loader(salvage, max_size, no_cache, rules)(trace)
    reread = {key: value for key, value in load_kwargs(salvage, max_size, no_cache, None).items()
              if key in ("max_bytes", "max_ratio", "salvage")}  # re-read the text under the load's caps
    counts = write_annotated(t, annotations(t), output, **reread)
    if counts["not_loaded"]:
        click.echo(f"warning: {visible(trace)}: {counts['not_loaded']} complete events the load skipped are copied "
                   "unannotated", err=True)
    if counts["skipped"]:
        click.echo(f"warning: {visible(trace)}: {counts['skipped']} GPU activities have args that are not an object: "
                   "left unannotated", err=True)
    click.echo(f"wrote {visible(output)}: {counts['activities']} GPU activities annotated, "
               f"{counts['counter_events']} counter samples", err=True)
