"""``traceview ranks``: a folder (or list) of rank traces as one run, optionally on Dask."""

from __future__ import annotations

import sys

import click

from .common import (
    command_options,
    dask_options,
    emit,
    executor,
    format_option,
    friendly,
    recursive_option,
    say,
)
from .group import main


def progress_line():
    """ranks done / total on stderr, when stderr is a terminal; None otherwise."""
    if not sys.stderr.isatty():
        return None

    def tick(done: int, total: int) -> None:
        click.echo(f"\rranks: {done}/{total} done", err=True, nl=done == total)

    return tick


@main.command()
@format_option
@command_options("ranks")
@recursive_option
@dask_options
@click.option(
    "--skip-bad", is_flag=True, help="Leave out rank files that can't be read (named in the notes)."
)
@friendly
def ranks(paths, out, options, recursive, workers, scheduler, skip_bad):
    """One row per rank of a distributed run: GPU time breakdown, comm/comp overlap, idle per stream,
    stragglers per step and per collective. PATHS: a folder of rank traces, or the files."""
    from .. import api

    report = api.ranks(
        paths,
        **executor(workers, scheduler),
        skip_bad=skip_bad,
        recursive=recursive,
        progress=progress_line(),
        options=options,
        on_warning=say,
    )
    emit(report, out)
