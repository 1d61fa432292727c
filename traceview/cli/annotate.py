"""``traceview annotate``: the trace written back with traceview's classification in it."""
from __future__ import annotations

import click

from .common import friendly, load_options, loader
from .group import main


@main.command()
@click.argument("trace")
@click.option("-o", "--output", "output", type=click.Path(dir_okay=False), required=True, metavar="OUT",
              help="Annotated trace to write (.json or .json.gz).")
@load_options
@friendly
def annotate(trace, output, salvage, max_size, no_cache, rules):
    """Write TRACE back with each GPU activity's category, tensor-core use, attention backend
    and launching op chain in its args (traceview.*), plus counter tracks of GPU time by
    category per step, for Perfetto UI or chrome://tracing."""
    from ..analyses.annotate import annotations
    from ..render.annotated import write_annotated

    t = loader(salvage, max_size, no_cache, rules)(trace)
    counts = write_annotated(t, annotations(t), output)
    click.echo(f"wrote {output}: {counts['activities']} GPU activities annotated, "
               f"{counts['counter_events']} counter samples", err=True)
