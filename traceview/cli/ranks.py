"""``traceview ranks``: a folder (or list) of rank traces as one run, optionally on Dask."""
from __future__ import annotations

import sys

import click

from .common import emit, format_option, friendly, load_kwargs, load_options, recursive_option
from .group import main


def progress_line():
    """ranks done / total on stderr, when stderr is a terminal; None otherwise."""
    if not sys.stderr.isatty():
        return None

    def tick(done: int, total: int) -> None:
        click.echo(f"\rranks: {done}/{total} done", err=True, nl=done == total)
    return tick


@main.command()
@click.argument("paths", nargs=-1, required=True)
@format_option
@load_options
@recursive_option
@click.option("--workers", type=int, default=None, metavar="N",
              help="Spread the ranks over a local Dask cluster of N worker processes.")
@click.option("--scheduler", default=None, metavar="ADDRESS",
              help="Use an existing Dask cluster (tcp://host:port); its workers must see the files at these paths.")
@click.option("--skip-bad", is_flag=True, help="Leave out rank files that can't be read (named in the notes).")
@friendly
def ranks(paths, fmt, salvage, max_size, no_cache, rules, recursive, workers, scheduler, skip_bad):
    """One row per rank of a distributed run: GPU time breakdown, comm/comp overlap, idle per stream,
    stragglers per step and per collective. PATHS: a folder of rank traces, or the files."""
    from ..scale import analyse_run

    if workers is not None and scheduler is not None:
        raise click.UsageError("give --workers or --scheduler, not both")
    report = analyse_run(paths, workers=workers, scheduler=scheduler, skip_bad=skip_bad, recursive=recursive,
                         progress=progress_line(), **load_kwargs(salvage, max_size, no_cache, rules))
    emit(report, fmt)
