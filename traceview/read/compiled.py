"""The compiled decoder: chunks of the events text scanned by C (``src/cscan``) on threads.

The C scanner fills a chunk's columns directly from its bytes, with no Python object per
event, and releases the GIL while it scans, so plain threads use every core: no ``fork``,
so it runs the same in a notebook, on macOS and on Windows. The chunks are the serial
path's (``chunks.chunk_bounds``) and each becomes the ``ChunkPart`` the msgspec path would
make (``columns.decode_chunk``), appended in order by the same ``ColumnBuilder``: the
result is identical. Where the scanner meets anything outside the grammar it is sure of
(a field of an unusual type, an inexact number, bad UTF-8, ...) it bails and that chunk is
decoded by msgspec, which keeps every rule of what is dropped and what is an error.

The extension is optional: where it was not built (no compiler at install time) or
``TRACEVIEW_DECODER=python`` is set, ``available()`` is false and the reader uses msgspec.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass

import numpy as np

from ..errors import TraceReadError
from ..limits import give_back_freed_memory
from . import chunks
from .chunks import address, chunk_bounds, cut
from .codes import Codes, IntColumn
from .columns import (
    FLOW_FIELDS,
    INT_ARGS,
    X_STRINGS,
    ChunkPart,
    ColumnBuilder,
    EventColumns,
    RefusedChunk,
    decode_chunk,
    drain,
    on_threads,
)
from .events import MEMORY_ARGS, TEXT_ARGS
from .parallel import usable_cores, wanted_workers
from .scan import skip_ws
from .source import CHANGED, file_stamp, read_into

try:
    from ._cscan import Block as _Block  # type: ignore[import-not-found]
    from ._cscan import join as _join_blocks
    from ._cscan import scan as _scan
except ImportError:  # not built: the msgspec decoder runs
    _scan = _join_blocks = _Block = None

ENV = "TRACEVIEW_DECODER"
COMPILED, PYTHON = "compiled", "python"
MAX_THREADS = 8
_WS = np.frombuffer(b" \t\r\n", dtype=np.uint8)  # JSON's whitespace
_WS_BLOCK = 1 << 20
# the scanner's tables, in its order (scan.h): X fields, flow fields, [memory] fields
_X_KEYS = (*X_STRINGS, *("arg_" + a for a in TEXT_ARGS))
_M_KEYS = ("pid", "tid")


def built() -> bool:
    """Whether the compiled scanner was built into this install."""
    return _scan is not None


def available() -> bool:
    """Whether the reader uses the compiled decoder: built, and not turned off by TRACEVIEW_DECODER."""
    return built() and os.environ.get(ENV, "").strip().lower() != PYTHON


def describe() -> str:
    """Which decoder loads traces here, in words (``traceview --version``)."""
    if available():
        return f"decoder: {COMPILED}"
    why = f"{ENV}={PYTHON}" if built() else "the compiled decoder is not built in this install"
    return f"decoder: {PYTHON} (msgspec; {why})"


@dataclass(frozen=True)
class Region:
    """Where the events text lies in a plain file (``offset``, ``length``), and the file's
    ``source.file_stamp`` when it was read whole."""

    path: str
    offset: int
    length: int
    stamp: tuple


def region_of(path: str, data, events_raw, stamp: tuple | None) -> Region | None:
    """The events text's place in the file, when ``data`` is the file's text as read (``stamp``
    set) and ``events_raw`` lies in it (not in a copy with events blanked); else None."""
    if stamp is None or not len(events_raw) or not hasattr(os, "preadv"):  # no preadv on Windows
        return None
    at = address(events_raw) - address(data)
    if not 0 <= at <= len(data) - len(events_raw):
        return None
    return Region(path, at, len(events_raw), stamp)


def event_columns(held: list, path: str, region: Region | None = None) -> EventColumns:
    """The columns of the events text ``held[0]`` (their ``decoder`` says how many chunks
    msgspec took). Raises ``RefusedChunk`` where msgspec refused a chunk, with the text in
    ``held[0]``. Once every chunk is scanned ``held`` is emptied, so that the text can be freed
    before the chunks' columns are joined.

    With the events' ``region`` of a plain file, and more chunks than threads, the text is let
    go as soon as it is cut into chunks and each chunk is read again from the file as its
    thread comes to it: the text is never held together with the chunks' columns (the peak of
    memory is the larger of the two, not their sum). A file that changes meanwhile is an error."""
    bounds = _bounds(held[0])
    threads = threads_for(len(bounds))
    if region is None or len(bounds) <= 2 * threads:
        parts = _scan_chunks(lambda bound: (held[0], bound), bounds, threads, path)
    else:
        held.clear()
        parts = _scan_region(region, bounds, threads, held)
    if parts is None:
        raise RefusedChunk
    held.clear()
    return merge(parts)


def _bounds(events_raw) -> list:
    n = len(events_raw)  # chunks.CHUNK_BYTES read now, not imported: tests shrink it
    return chunk_bounds(events_raw) if n > chunks.CHUNK_BYTES else [(0, n, b"", b"")]


def _scan_region(region: Region, bounds: list, threads: int, held: list):
    """``_scan_chunks`` with each chunk read from the file; where msgspec refused a chunk the
    whole events text is read again into ``held``. Raises TraceReadError if the file is not as
    it was when read."""
    with open(region.path, "rb", buffering=0) as fh:
        fd = fh.fileno()
        _same_file(region, fd)

        buffers = ThreadBuffers()

        def text(bound):
            lo, hi, head, tail = bound
            buf = buffers.get(hi - lo)
            read_into(fd, buf, region.offset + lo, region.path)
            return buf, (0, hi - lo, head, tail)

        parts = _scan_chunks(text, bounds, threads, region.path)
        if parts is None:  # in a loop: one read stops short of 2 GiB on Linux
            whole = bytearray(region.length)
            read_into(fd, memoryview(whole), region.offset, region.path)
            held.append(whole)
        _same_file(region, fd)
    return parts


class ThreadBuffers:
    """One buffer per thread, reused from chunk to chunk: fresh pages for every chunk cost more."""

    def __init__(self):
        self.mine = threading.local()

    def get(self, n: int) -> memoryview:
        """This thread's buffer, grown to at least ``n`` bytes, as a view of its first ``n``.
        Grown by a sixteenth more than asked: chunks differ by a few events, and a buffer
        grown to each new longest chunk faulted in a quarter of a gigabyte more at 1 GB."""
        buf = getattr(self.mine, "buf", None)
        if buf is None or len(buf) < n:
            self.mine.buf = None  # the old buffer goes before the new one is made
            buf = self.mine.buf = bytearray(n + n // 16)
        return memoryview(buf)[:n]


def _same_file(region: Region, fd: int) -> None:
    if file_stamp(os.fstat(fd)) != region.stamp:
        raise TraceReadError(region.path, CHANGED)


def _scan_chunks(text, bounds: list, threads: int, path: str):
    """Every chunk's (part, by the scanner?), in order; None if msgspec refused one.
    ``text(bound)``: the text a chunk lies in, and the chunk's bound in it."""

    def one(bound):
        return _chunk(*text(bound), path)

    parts = on_threads(one, bounds, threads)
    return None if any(part is None for part, _ in parts) else parts


def merge(parts: list) -> EventColumns:
    builder = ColumnBuilder()
    n_chunks, fallback = len(parts), sum(not by_c for _, by_c in parts)
    while parts:  # each part dropped once added: the builder holds its arrays, nothing else does
        builder.add(parts.pop(0)[0])
    got = builder.finish(threads_for(n_chunks), join=join_parts)
    give_back_freed_memory()  # the chunks' columns, freed by the join, held by glibc's arenas
    got.decoder = COMPILED if not fallback else f"{COMPILED} ({fallback} of {n_chunks} chunks by msgspec)"
    return got


def join_parts(arrays: list, empty_dtype) -> np.ndarray:
    """``columns.drain`` of one column's parts; where each part is the whole of a scanner's
    Block (``part_of``), by ``_cscan.join``: the parts' pages are moved into the result as they
    are copied from (fresh pages for a gigabyte's columns cost more than the copy). The list is
    emptied first, so that the Blocks are held by nothing else and may give their memory up."""
    if len(arrays) < 2 or not all(_whole_block(a, arrays[0].dtype) for a in arrays):
        return drain(arrays, empty_dtype)
    dtype, blocks = arrays[0].dtype, [a.base for a in arrays]
    arrays.clear()
    return np.frombuffer(_join_blocks(blocks), dtype=dtype)


def _whole_block(part, dtype) -> bool:
    return (
        _Block is not None
        and type(getattr(part, "base", None)) is _Block
        and part.dtype == dtype
        and part.flags.c_contiguous
        and part.nbytes == memoryview(part.base).nbytes
    )


def threads_for(n_chunks: int) -> int:
    """TRACEVIEW_WORKERS threads where it is set, else one per core (as the fork pool counts them)."""
    wanted = wanted_workers()
    if wanted is not None:
        return max(1, min(wanted, n_chunks))
    return max(1, min(usable_cores(), MAX_THREADS, n_chunks))


def _chunk(events_raw, bound: tuple, path: str) -> tuple[ChunkPart | None, bool]:
    """One chunk's part, and whether the scanner made it (False: msgspec did). (None, False):
    msgspec refused the chunk too."""
    inner = _inner(events_raw, bound)
    got = _scan(events_raw, *inner) if inner is not None else None
    if got is not None:
        return part_of(got), True
    try:
        return decode_chunk(cut(events_raw, bound), path), False
    except TraceReadError:
        return None, False


def _inner(events_raw, bound: tuple) -> tuple[int, int] | None:
    """The bounds of the chunk's items (without the array's own brackets), or None when its
    first or last chunk does not open or close the array (msgspec then says what is wrong).
    A bare array may have any amount of whitespace around it: skipped at C speed."""
    lo, hi, head, tail = bound
    text = memoryview(events_raw)
    if not head:  # the array's first chunk: its '[' (after any spaces) is the array's
        lo = skip_ws(text, lo)
        if lo >= hi or text[lo] != ord("["):
            return None
        lo += 1
    if not tail:  # the last chunk: its ']' (before any spaces) closes the array
        hi = _before_trailing_ws(text, lo, hi)
        if hi <= lo or text[hi - 1] != ord("]"):
            return None
        hi -= 1
    return lo, hi


def _before_trailing_ws(text: memoryview, lo: int, hi: int) -> int:
    """Where ``text[lo:hi]`` ends without its trailing JSON whitespace, looked for a block at a
    time with numpy: a hostile file may end in a gigabyte of spaces."""
    while hi > lo:
        start = max(lo, hi - _WS_BLOCK)
        solid = np.flatnonzero(~np.isin(np.frombuffer(text[start:hi], dtype=np.uint8), _WS))
        if len(solid):
            return start + int(solid[-1]) + 1
        hi = start
    return lo


def part_of(got: tuple) -> ChunkPart:
    """The scanner's result (module.c: build) as the ``ChunkPart`` the msgspec path makes."""
    n_events, tables, counts, x_ts, x_dur, x_codes, x_ints, f_ts, f_codes, m_ts, (m_codes, m_ints) = got
    phases = tables[-1]
    x = {key: _codes(c, tables[k]) for k, (key, c) in enumerate(zip(_X_KEYS, x_codes, strict=True))}
    base = len(_X_KEYS)
    flows = {
        key: _codes(c, tables[base + k]) for k, (key, c) in enumerate(zip(FLOW_FIELDS, f_codes, strict=True))
    }
    arrays: dict[str, np.ndarray | IntColumn] = {
        "ts_ns": _i64(x_ts),
        "dur_ns": _i64(x_dur),
        "flow_ts_ns": _i64(f_ts),
    }
    arrays.update({"arg_" + name: _ints(pair) for name, pair in zip(INT_ARGS, x_ints, strict=True)})
    part = ChunkPart(n_events, 0, dict(zip(phases, _i64(counts).tolist(), strict=True)), x, flows, arrays)
    m_ts = _i64(m_ts)
    if len(m_ts):  # as the msgspec path: no [memory] event, no memory columns
        base += len(FLOW_FIELDS)
        part.memory_codes = {
            key: _codes(c, tables[base + k]) for k, (key, c) in enumerate(zip(_M_KEYS, m_codes, strict=True))
        }
        memory: dict[str, np.ndarray | IntColumn] = {"ts_ns": m_ts}
        memory.update({"arg_" + name: _ints(pair) for name, pair in zip(MEMORY_ARGS, m_ints, strict=True)})
        part.memory_arrays = memory
    return part


def _i64(buf) -> np.ndarray:
    return np.frombuffer(buf, dtype=np.int64)


def _codes(buf, uniques: list) -> Codes:
    return Codes(np.frombuffer(buf, dtype=np.int32), uniques)


def _ints(pair: tuple) -> IntColumn:
    values, mask = _i64(pair[0]), np.frombuffer(pair[1], dtype=np.bool_)
    if len(values) < len(mask):  # every value 0: the scanner kept none (push_int in scan.c)
        values = np.broadcast_to(np.int64(0), len(mask))  # no memory; the join copies nothing of it
    return IntColumn(values, mask)
