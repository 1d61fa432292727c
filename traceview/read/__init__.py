"""Bytes -> raw event columns: the first stage of the pipeline.

``read(path)`` decodes a trace's events by the first of an ordered list of strategies that
does not decline (``strategies``: each gives the columns or declines, chosen in one place).
Where the compiled scanner was built, a plain file's events are decoded in chunks on threads
straight from the file, never held whole, and a gzip file's from its inflated text
(``direct``). Where that is not sure, the file's text is read (plain or gzip, ``source``),
optionally repaired where cut (``salvage``), split into metadata and the raw events array
(``document``), and the events decoded into columns: with the compiled scanner where it was
built (``compiled``, on threads, every core; a chunk it leaves goes to msgspec), else with
msgspec (``columns``, on several cores for large traces: ``parallel``). All give identical
columns. Everything a user can get wrong raises ``TraceReadError`` with a one-line message;
readable JSON that is not a profiler trace raises its subclass ``NotATraceError``.

An event that msgspec refuses on its own (a lone surrogate escape, nesting a thousand
deep) is blanked by ``unfit`` and dropped with a count, not the whole trace.

Imports go one way, with no loop: this package imports its modules; ``strategies`` uses
``direct``, ``compiled``, ``parallel``, ``columns``, ``document``, ``salvage`` and ``source``;
``direct`` uses
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
from . import strategies
from .codes import Codes, IntColumn, int_values
from .columns import EventColumns
from .document import NOT_A_TRACE, split_document
from .source import DEFAULT_MAX_BYTES, DEFAULT_MAX_RATIO, opened, read_bytes, read_source

__all__ = [
    "DEFAULT_MAX_BYTES",
    "DEFAULT_MAX_RATIO",
    "Codes",
    "IntColumn",
    "RawTrace",
    "int_values",
    "read",
    "read_bytes",
    "read_source",
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
    """Read and decode one trace file into raw columns, by the first of ``strategies.STRATEGIES``
    that does not decline: where the compiled decoder is built, a plain file's events are
    decoded straight from the file and a gzip file's from its inflated text, in chunks on
    threads; else, or where that is not sure, the whole text is split by msgspec and its
    events decoded."""
    path = os.fspath(path)
    with opened(path) as fh:  # opened once, whichever strategy reads it
        reading = strategies.Reading(path, fh, max_bytes, max_ratio, salvage, held=[])
        decoded = strategies.decode(reading)
    return _raw_trace(path, reading.meta or {}, decoded, reading.json_bytes, reading.warnings)


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


def read_together(paths: list) -> bool:
    """Whether ``paths`` may be read two at a time, on threads (``api.Loader.pair``,
    ``scale.gather``): only with the compiled decoder (the msgspec fallback forks worker
    processes, which a second reading thread must not be running beside), and only where the
    memory check every load makes up front passes for the two largest together (each load's own
    check sees memory before the other has taken any); a gzip file counts its size on disk, its
    text being checked as it inflates."""
    from ..limits import memory_cap
    from .compiled import available

    if not available():
        return False
    try:
        total = sum(sorted(os.stat(p).st_size for p in paths)[-2:])
    except (OSError, TypeError, ValueError):
        return False  # the loads say what is wrong, one after the other
    cap = memory_cap()
    return cap is not None and total <= cap
