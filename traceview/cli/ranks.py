"""``traceview ranks``: a folder (or list) of rank traces as one run, optionally on Dask."""

from __future__ import annotations

import sys

import click

from .common import emit, format_option, friendly, load_options, recursive_option
from .group import main


def progress_line():
    """ranks done / total on stderr, when stderr is a terminal; None otherwise."""
    if not sys.stderr.isatty():
        return None

    def tick(done: int, total: int) -> None:
        click.echo(f"\rranks: {done}/{total} done", err=True, nl=done == total)

    return tick


def _check_scheduler(_ctx, _param, value):
    """A malformed address is a usage error, told before any trace is read or connection tried."""
    from ..errors import TraceviewError
    from ..scale import AddressError, check_address, connect_timeout

    if value is None:
        return None
    try:
        connect_timeout()
    except TraceviewError as exc:
        raise click.UsageError(str(exc)) from None
    try:
        return check_address(value)
    except AddressError as exc:
        raise click.BadParameter(str(exc)) from None


@main.command()
@click.argument("paths", nargs=-1, required=True)
@format_option
@load_options
@recursive_option
@click.option(
    "--workers",
    type=click.IntRange(min=1),
    default=None,
    metavar="N",
    help="Spread the ranks over a local Dask cluster of N worker processes.",
)
@click.option(
    "--scheduler",
    default=None,
    metavar="ADDRESS",
    callback=_check_scheduler,
    help="Use an existing Dask cluster (tcp://host:port); its workers must see the files at these paths. "
    "Connecting waits at most TRACEVIEW_DASK_TIMEOUT seconds (default: Dask's, 30).",
)
@click.option(
    "--skip-bad", is_flag=True, help="Leave out rank files that can't be read (named in the notes)."
)
@friendly
def ranks(paths, out, options, recursive, workers, scheduler, skip_bad):
    """One row per rank of a distributed run: GPU time breakdown, comm/comp overlap, idle per stream,
    stragglers per step and per collective. PATHS: a folder of rank traces, or the files."""
    from .. import api

    if workers is not None and scheduler is not None:
        raise click.UsageError("give --workers or --scheduler, not both")
    report = api.ranks(
        paths,
        workers=workers,
        scheduler=scheduler,
        skip_bad=skip_bad,
        recursive=recursive,
        progress=progress_line(),
        options=options,
    )
    emit(report, out)
