"""Bytes -> raw event columns: the first stage of the pipeline.

``read(path)`` first tries to decode the events in chunks on threads without msgspec's pass
over the whole text (``direct``, where the compiled scanner was built): a plain file straight
from the file, never held whole; a gzip file from its inflated text. Where that path is not
sure, it opens a trace file (plain or gzip, ``source``), optionally repairs
a cut one (``salvage``), splits the JSON document into metadata and the raw
events array (``document``) and decodes the events into columns: with the compiled
scanner where it was built (``compiled``, on threads, every core; a chunk it leaves goes
to msgspec), else with msgspec (``columns``, on several cores for large traces:
``parallel``). Both give identical columns. Everything a user can get wrong
raises ``TraceReadError`` with a one-line message; readable JSON that is not a
profiler trace raises its subclass ``NotATraceError``.

An event that msgspec refuses on its own (a lone surrogate escape, nesting a thousand
deep) is blanked by ``unfit`` and dropped with a count, not the whole trace.

Imports go one way, with no loop: this package imports its modules; ``direct`` uses
``compiled``, ``chunks``, ``columns``, ``document`` and ``source``; ``compiled`` uses the C
extension ``_cscan`` (optional), ``columns``, ``chunks``, ``codes``, ``events``, ``parallel``
(its core count), ``scan`` and ``source`` (its file reads); ``parallel`` uses ``columns``,
``chunks`` and ``codes``; ``columns`` uses ``chunks``, ``events``, ``codes`` and ``times``;
``chunks`` and ``events`` use ``document``; ``document`` uses ``source`` (its whitespace) and
``unfit``, which uses ``scan``; ``salvage`` uses ``scan``, ``unfit`` and ``source``. No
module imports another's private (``_x``) names.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from ..errors import NotATraceError
from . import columns, compiled, parallel
from .codes import Codes, IntColumn, int_values
from .columns import EventColumns
from .direct import read_direct, read_held
from .document import NOT_A_TRACE, split_document
from .salvage import salvage_prefix
from .source import DEFAULT_MAX_BYTES, DEFAULT_MAX_RATIO, Decompressed, opened, read_bytes, read_source

__all__ = [
    "DEFAULT_MAX_BYTES",
    "DEFAULT_MAX_RATIO",
    "Codes",
    "IntColumn",
    "RawTrace",
    "int_values",
    "read",
    "read_bytes",
    "split_document",
]


@dataclass
class RawTrace:
    """What the reader hands to the model: columns of the decoded events."""

    path: str
    meta: dict
    columns: dict
    n_events: int
    json_bytes: int = 0  # size of the (decompressed) JSON text: what --max-size limits
    warnings: list = field(default_factory=list)
    decoder: str = "python"  # EventColumns.decoder


def read(
    path,
    *,
    max_bytes: int = DEFAULT_MAX_BYTES,
    max_ratio: float | None = DEFAULT_MAX_RATIO,
    salvage: bool = False,
) -> RawTrace:
    """Read and decode one trace file into raw columns. Where the compiled decoder is built,
    a plain file's events are decoded straight from the file and a gzip file's from its
    inflated text, in chunks on threads (``direct``); else, or where that path is not sure,
    the whole text is split by msgspec and its events decoded."""
    path = os.fspath(path)
    with opened(path) as fh:  # opened once, whichever path reads it
        got = None if salvage else read_direct(fh.fileno(), path, max_bytes)
        if got is not None:
            return _raw_trace(path, *got, [])
        text = read_source(path, max_bytes=max_bytes, max_ratio=max_ratio, salvage=salvage, fh=fh)
    if text.inflated and not salvage:  # a gzip file's text: a plain file's was declined above already
        held = [text.data]
        del text
        got = read_held(held, path)  # empties held where it takes the text
        if got is not None:
            return _raw_trace(path, *got, [])
        text = Decompressed(held.pop())
    warnings: list[str] = []
    data = text.data
    json_bytes = len(data)
    if salvage:
        data, note = salvage_prefix(data, path, text.cut)
        if note:
            warnings.append(note)
    stamp = text.stamp if data is text.data else None  # the file's own text: its chunks can be read again
    del text
    meta, events_raw = split_document(data, path)
    region = compiled.region_of(path, data, events_raw, stamp)
    del data  # events_raw keeps the text alive only until the columns are built
    held = [events_raw]  # handed over: the compiled decoder frees the text before joining columns
    del events_raw
    decoded = event_columns(held, path, region)
    del held
    return _raw_trace(path, meta, decoded, json_bytes, warnings)


def _raw_trace(path: str, meta: dict, decoded: EventColumns, json_bytes: int, warnings: list) -> RawTrace:
    _check_is_trace(decoded, path)
    if decoded.dropped:
        warnings.append(f"{path}: skipped {decoded.dropped} malformed event(s)")
    return RawTrace(
        path=path,
        meta=meta,
        columns=decoded.columns,
        n_events=decoded.n_events,
        json_bytes=json_bytes,
        warnings=warnings,
        decoder=decoded.decoder,
    )


def event_columns(held: list, path: str, region: compiled.Region | None = None) -> EventColumns:
    """The columns of the events text ``held[0]``: from the compiled decoder where it is built
    (it empties ``held`` once the text is scanned, or once it is cut into chunks where it can
    read them again from the file's ``region``: a lower peak of memory), else from msgspec
    (the parallel decoder where it pays, else the serial one)."""
    with columns.gc_paused():
        if compiled.available():
            got = compiled.event_columns(held, path, region)
            if got is compiled.RECHECK:
                return columns.event_columns(held[0], path, checked=True)
            return got
        events_raw = held[0]
        got = parallel.event_columns(events_raw, path)  # looked up at call time: tests replace it
        if got is parallel.RECHECK:
            return columns.event_columns(events_raw, path, checked=True)
        if got is not None:
            return got
        return columns.event_columns(events_raw, path)


def _check_is_trace(decoded: EventColumns, path: str) -> None:
    """Events that are all junk, or objects without a phase, are not a profiler trace.
    An empty events array is a trace: the profiler writes one for an empty capture."""
    if decoded.dropped and not decoded.n_events:  # e.g. [1, 2, 3]: JSON, but not one event object in it
        raise NotATraceError(
            path, f"{NOT_A_TRACE}: none of the {decoded.dropped} items in traceEvents is an event object"
        )
    if decoded.n_events and not any(decoded.columns["counts"].keys()):  # only "": no event has a phase
        raise NotATraceError(
            path, f"{NOT_A_TRACE}: no trace events (objects with a 'ph' field) in traceEvents"
        )
