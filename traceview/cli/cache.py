"""``traceview cache info|clear``: where the columnar cache lives, what it holds, and emptying it."""

from __future__ import annotations

import json

import click

from .common import friendly
from .group import main

_DIR = click.option(
    "--dir",
    "folder",
    type=click.Path(file_okay=False),
    default=None,
    help="This cache folder instead of the default ($TRACEVIEW_CACHE_DIR, else "
    "$XDG_CACHE_HOME/traceview, else ~/.cache/traceview).",
)
_FMT = click.option(
    "--format",
    "fmt",
    type=click.Choice(["table", "json"]),
    default="table",
    show_default=True,
    help="Output format.",
)


@main.group()
def cache():
    """Show or empty the columnar cache of loaded traces.

    The cache is capped at $TRACEVIEW_CACHE_MAX_MB mebibytes (default 2048; 0 turns it
    off): after each store, entries of other traceview versions go first, then the least
    recently used.

    An entry is keyed on the trace file as it was read (size, times including the change
    time, inode, and its first and last 64 KiB) and checksummed: a trace changed since is
    read again, and an entry that fails its checksum is removed and rebuilt with a warning.
    """


@cache.command()
@_DIR
@_FMT
@friendly
def info(folder, fmt):
    """Cache folder, number of entries, size in MiB and the cap."""
    from .. import cache as cache_mod  # its tables' module: imported by the command that reads it

    d = cache_mod.info(folder)
    if fmt == "json":
        click.echo(json.dumps(d, indent=2))
        return
    entries = f"{d['entries']}"
    if d["other_versions"]:
        entries += f" ({d['other_versions']} from other traceview versions, removed at the next store)"
    if not d["exists"]:
        entries += " (the folder does not exist yet)"
    if not cache_mod.available():
        state = "off: pyarrow is not installed (pip install pyarrow, or the 'cache' extra)"
    elif d["max_bytes"] == 0:
        state = f"off: {cache_mod.MAX_ENV}=0"
    elif not d["writable"]:
        state = "off: the folder is not writable (set TRACEVIEW_CACHE_DIR to one that is)"
    else:
        state = "on"
    rows = [
        ("folder", d["folder"]),
        ("entries", entries),
        ("replays", f"{_outputs(d['replays'])} of repeated commands"),
        ("size", f"{d['size_mib']:.1f} MiB"),
        ("cap", f"{d['max_mib']:g} MiB (set with {cache_mod.MAX_ENV})"),
        ("caching", state),
    ]
    for name, value in rows:
        click.echo(f"{name + ':':<9}{value}")


@cache.command()
@_DIR
@_FMT
@friendly
def clear(folder, fmt):
    """Remove every cache entry and recorded output (nothing else in the folder)."""
    from .. import cache as cache_mod

    d = cache_mod.clear(folder)
    if fmt == "json":
        click.echo(json.dumps(d, indent=2))
        return
    click.echo(
        f"removed {d['removed']} entries ({d['bytes'] / 2**20:.1f} MiB, with "
        f"{_outputs(d['replays'])} of repeated commands) from {d['folder']}"
    )


def _outputs(n: int) -> str:
    return f"{n} recorded output{'' if n == 1 else 's'}"
