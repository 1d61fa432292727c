"""Cutting the traceEvents text into JSON arrays of bounded size.

Decoding a whole large array at once would hold every event as a Python object
at the same time; decoding it chunk by chunk bounds that memory. The fast cut
(``chunk_bounds``) looks only for ``},{`` and may land inside a string; a chunk
that then fails to decode sends the caller to ``checked_event_chunks``, which
cuts only between events found by a full parse.
"""

from __future__ import annotations

import re

import numpy as np

from .document import raw_items

CHUNK_BYTES = 1 << 25  # bytes of event text a fast-cut chunk holds (about 100k events)
CHUNK_EVENTS = 1 << 17  # events a checked chunk holds
_BETWEEN = re.compile(rb"\}\s*,\s*\{")


def chunk_bounds(events_raw, size: int | None = None) -> list:
    """Where the fast cut falls: (start, stop, head, tail) per chunk, the chunk being
    ``head + events_raw[start:stop] + tail`` (so that workers can build it themselves).
    Cuts are at the first ``},{`` (any whitespace) after each multiple of ``size``."""
    size = size or CHUNK_BYTES  # read at call time: tests shrink it
    n = len(events_raw)
    text = memoryview(events_raw)
    bounds = []
    start, pos = 0, size
    while pos < n:
        found = next_cut(text, pos)
        if found is None:
            break
        bounds.append((start, found[0], b"[" if start else b"", b"]"))
        start = found[1]
        pos = start + size
    bounds.append((start, n, b"[" if start else b"", b""))
    return bounds


def next_cut(text, pos: int = 0) -> tuple[int, int] | None:
    """The first ``},{`` (any whitespace) at or after ``pos``: where the chunk before it ends
    (after its ``}``) and where the next one starts (at its ``{``); None if there is none."""
    m = _BETWEEN.search(text, pos)
    return None if m is None else (m.start() + 1, m.end() - 1)


def cut(events_raw, bound: tuple) -> bytes:
    """One chunk's JSON array text from its ``chunk_bounds`` entry."""
    lo, hi, head, tail = bound
    return b"".join((head, memoryview(events_raw)[lo:hi], tail))


def event_chunks(events_raw, size: int | None = None):
    """The fast cut's chunks, one at a time; a small array is its own single chunk."""
    if len(events_raw) <= (size or CHUNK_BYTES):
        yield events_raw
        return
    for bound in chunk_bounds(events_raw, size):
        yield cut(events_raw, bound)


def checked_event_chunks(events_raw, path: str, size: int = CHUNK_EVENTS):
    """At most ``size`` events a chunk, found by one full parse (events as
    ``msgspec.Raw``) that also checks the JSON: the safe path."""
    items = raw_items(events_raw, path)
    n = len(items)
    if n <= size:
        del items
        yield events_raw
        return
    base = address(events_raw)
    bounds = []
    for lo in range(0, n, size):
        last = items[min(lo + size, n) - 1]
        bounds.append((address(items[lo]) - base, address(last) - base + len(last)))
    del items  # only the offsets are needed: free the item objects before decoding
    text = memoryview(events_raw)
    for lo, hi in bounds:
        yield b"".join((b"[", text[lo:hi], b"]"))


def address(buf) -> int:
    """Memory address of a buffer: a Raw item's offset in the array is its address minus the array's."""
    return np.frombuffer(memoryview(buf), dtype=np.uint8).ctypes.data
