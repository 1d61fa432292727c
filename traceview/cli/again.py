"""``traceview summary``, ``diff`` and ``compare`` of cached traces, shown again from what an
earlier run kept in the traces' cache entries (``traceview.kept``) before pandas, numpy or pyarrow
is imported.

A run whose every trace is a file, with no selection and the default load options, none of the
command's options that write a file or run elsewhere (``--plot``, ``-o``, ``--run``, Dask), printed
to stdout as a table, markdown or JSON, keeps what it showed (``render.shown``: the texts and cells
before any width or colour, and the JSON document) when it said nothing on stderr and read no
source file (``replay``: the advice's line to edit comes from files the entries do not cover).
``summary`` keeps each trace's report in that trace's entry; ``diff`` and ``compare`` keep their
one report in the first trace's entry; every name is made with the other traces' entries
(``kept.token``). The next such run of the same command on the same files as typed, with the same
options, shows that in the format and width it asks for. Anything else runs as always.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat

import click

from .. import kept, replay
from ..options import LoadOptions
from ..selection import Selection
from .common import Output, said

#: the formats drawn from what a run showed (CSV and HTML are drawn from the Report's tables)
FORMATS = ("table", "markdown", "json")


def applies(traces, sel: Selection, options: LoadOptions, out: Output) -> bool:
    """Whether this run may be shown from, and kept in, its traces' entries (the caller has checked
    the command's own options)."""
    return (
        out.path is None
        and out.fmt in FORMATS
        and sel == Selection()
        and options == LoadOptions()
        and all(_file(p) for p in traces)
    )


def show(command: str, traces, asked: dict, out: Output) -> bool:
    """Print what an earlier run of ``command`` on ``traces`` with options ``asked`` kept, as
    ``emit`` prints the reports; False (nothing printed) when any of it is missing or no longer
    holds."""
    from ..render import render
    from ..render.jsonout import render_documents
    from ..render.shown import from_data

    places = _places(command, traces, asked)
    if places is None:
        return False
    found = []
    for path, name in places:
        value = kept.read(path, name)
        if value is None:
            return False
        try:
            found.append((from_data(value["shown"]), _document(value["json"])))
        except (KeyError, TypeError, ValueError):
            return False
    if out.fmt == "json":
        click.echo(render_documents([doc for _, doc in found]), nl=False)
    else:
        click.echo(render([s for s, _ in found], out.fmt, width=None if out.wide else -1), nl=False)
    return True


def keep(command: str, traces, seen: list, asked: dict, reports) -> None:
    """Keep what ``reports`` (just printed) show, when this run said nothing on stderr and read
    nothing beyond its traces. ``seen``: the traces' identities taken before they were read."""
    reports = reports if isinstance(reports, list) else [reports]
    if said() or replay.spoiled() or replay.depends():
        return
    from ..cache import current_stamp
    from ..render.jsonout import document
    from ..render.shown import as_data, shown

    stamp = current_stamp()
    places = _places(command, traces, asked)
    if stamp is None or places is None or len(places) != len(reports):
        return
    if kept.identities(traces) != seen:  # a trace changed meanwhile: the others' names would lie
        return
    for (path, name), report in zip(places, reports, strict=True):
        value = {"shown": as_data(shown(report)), "json": document(report)}
        kept.write(path, seen[traces.index(path)], stamp, name, value)


def _places(command: str, traces, asked: dict) -> list[tuple[str, str]] | None:
    """(trace, name) of each value kept: summary's in each trace's entry; diff's and compare's one,
    in the first trace's entry. Each is named with the other traces' entries (a summary of several
    traces says on stderr when they look like the ranks of one job); None when one has none."""
    tokens = [kept.token(p) for p in traces] if len(traces) > 1 else [None]
    if len(traces) > 1 and any(t is None for t in tokens):
        return None
    places = [(i, p) for i, p in enumerate(traces)] if command == "summary" else [(0, traces[0])]
    return [
        (p, _name(command, traces, {**asked, "at": i}, [t for j, t in enumerate(tokens) if j != i]))
        for i, p in places
    ]


def _name(command: str, paths, asked: dict, others: list) -> str:
    """What was asked: the command, its options, the paths as typed (the reports show them), the
    other traces' entries, and traceview's own environment variables (the cache's among them)."""
    env = sorted((k, v) for k, v in os.environ.items() if k.startswith(("TRACEVIEW_", "_TRACEVIEW")))
    what = {
        "command": command,
        "asked": asked,
        "paths": [os.fspath(p) for p in paths],
        "others": others,
        "env": env,
    }
    text = json.dumps(what, sort_keys=True).encode("utf-8", "surrogateescape")
    return hashlib.sha256(text).hexdigest()[:32]


def _file(path) -> bool:
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False


def _document(doc) -> dict:
    if not isinstance(doc, dict) or doc.get("schema") != "traceview.report":
        raise ValueError("not a report document")
    return doc
