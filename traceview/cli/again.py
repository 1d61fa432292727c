"""``traceview summary`` of cached traces, shown again from what an earlier run kept in each
trace's cache entry (``traceview.kept``) before pandas, numpy or pyarrow is imported.

A summary whose every trace is a file, with no selection and the default load options, printed to
stdout as a table, markdown or JSON, keeps for each trace what it showed (``render.shown``: the
texts and cells before any width or colour, and the JSON document) when it said nothing on stderr,
wrote no file and read no source file (``replay``: the advice's line to edit comes from files the
entry does not cover). The next such summary of the same files, with the same ``--top``, as typed,
shows that in the format and width it asks for. Anything else runs the summary as always.
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


def applies(traces, sel: Selection, options: LoadOptions, out: Output, run: bool) -> bool:
    """Whether this summary may be shown from, and kept in, its traces' entries."""
    return (
        not run
        and out.path is None
        and out.fmt in FORMATS
        and sel == Selection()
        and options == LoadOptions()
        and all(_file(p) for p in traces)
    )


def show(traces, top: int, out: Output) -> bool:
    """Print what earlier runs kept for every trace, as ``emit`` prints the reports; False (nothing
    printed) when one of them has nothing kept, or nothing that still holds."""
    from ..render import render
    from ..render.jsonout import render_documents
    from ..render.shown import from_data

    found = []
    for path in traces:
        value = kept.read(path, _name(path, top))
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


def keep(traces, seen: list, top: int, reports: list) -> None:
    """Keep what ``reports`` (one per trace, just printed) show, in each trace's entry, when this
    run said nothing on stderr and read nothing beyond its traces. ``seen``: the traces'
    identities taken before they were read."""
    if said() or replay.spoiled() or replay.depends() or len(reports) != len(traces):
        return
    from ..cache import current_stamp
    from ..render.jsonout import document
    from ..render.shown import as_data, shown

    stamp = current_stamp()
    if stamp is None:
        return
    for path, ident, report in zip(traces, seen, reports, strict=True):
        value = {"shown": as_data(shown(report)), "json": document(report)}
        kept.write(path, ident, stamp, _name(path, top), value)


def _name(path, top: int) -> str:
    """What was asked: the command, its options and the path as typed (the report shows it), and
    traceview's own environment variables (the cache's place and size among them)."""
    env = sorted((k, v) for k, v in os.environ.items() if k.startswith(("TRACEVIEW_", "_TRACEVIEW")))
    asked = {"command": "summary", "top": top, "path": os.fspath(path), "env": env}
    text = json.dumps(asked, sort_keys=True).encode("utf-8", "surrogateescape")
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
