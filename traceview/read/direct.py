"""A trace's events decoded in chunks on threads without msgspec's pass over the whole text
first: the reader's first try where the compiled decoder is built.

The serial path reads the whole text, has msgspec check and split the document (about a
second per gigabyte, on one core, before any event is decoded), then scans the events.
Here only the text's head is read, to find where traceEvents opens (``_cscan.find_events``).
The events are cut into chunks at ``},{`` found in small windows, as ``chunks.chunk_bounds``
cuts a text. Each thread scans its chunks (``_cscan.scan_open``): the scanner checks their
JSON as it goes and finds the array's own ``]``. The document without its events (head,
``[]``, tail) is then checked and split by msgspec. The text is a plain file, read where it
is needed into each thread's buffer and never whole (``read_direct``: the peak of memory is
the columns), or a gzip file's inflated text, scanned in place (``read_held``).

What this path is not sure of gives None, and the reader starts again on its serial path,
so every error message and every rule of what is dropped stay that path's: a head it cannot
walk, a chunk neither the scanner nor msgspec takes (a cut that fell inside a string, a
document that is not valid JSON), a document without its events that msgspec refuses. A
file that changes while it is read is an error.
"""

from __future__ import annotations

import os
import stat
import zlib
from collections import deque
from concurrent.futures import ThreadPoolExecutor

import msgspec

from ..errors import TraceReadError
from ..limits import memory_cap
from . import chunks, compiled
from .columns import EventColumns, decode_chunk, gc_paused, on_threads
from .document import meta_of
from .source import CHANGED, GZIP_MAGIC, STREAM_STEP, file_stamp, inflated_pieces, os_errors, read_into

try:
    from ._cscan import find_events, scan_open  # type: ignore[import-not-found]
except ImportError:  # not built: compiled.available() is false and this path is not taken
    find_events = scan_open = None

HEAD_BYTES = 1 << 20  # traceEvents must open within this much of the file (Kineto: a few KB)
WINDOW = 1 << 16  # bytes read at a time to find a cut
_FAILED = object()  # a chunk neither the scanner nor msgspec took
Decoded = tuple[dict, EventColumns, int]  # metadata, event columns, size of the text


def read_direct(fd: int, path: str, max_bytes: int) -> tuple[dict, EventColumns, int] | None:
    """(metadata, event columns, size of the text) of the plain file open at ``fd`` (read with
    ``pread``: its position does not move), or None where the serial path must read it. Raises
    TraceReadError if the file changes while it is read."""
    if not compiled.available() or not hasattr(os, "preadv"):  # no preadv on Windows
        return None
    with os_errors(path):
        before = os.fstat(fd)
        if not stat.S_ISREG(before.st_mode) or not 0 < before.st_size <= max_bytes:
            return None  # a pipe is not read from here: its bytes would be gone
        cap = memory_cap()  # too large for this machine's memory: the serial path says so
        if cap is not None and before.st_size > cap:
            return None
        got = _decode(_FileText(fd, before.st_size, path), path)
        if file_stamp(os.fstat(fd)) != file_stamp(before):
            raise TraceReadError(path, CHANGED)
        return got


def read_gzip(
    fh, path: str, max_bytes: int, max_ratio: float | None
) -> tuple[dict, EventColumns, int] | None:
    """``read_direct`` for a gzip file (``fh`` unbuffered, at its start), its text scanned as it
    is inflated and never held whole: chunks are cut from the inflated pieces and scanned on
    threads while the next ones inflate. None where this path is not sure (any problem with
    the stream or the text: the serial path, from the file's start again, says what it is).
    Raises TraceReadError if the file changes while it is read."""
    if not compiled.available():
        return None
    with os_errors(path):
        fd = fh.fileno()
        before = os.fstat(fd)
        if not stat.S_ISREG(before.st_mode):
            return None
        magic = fh.read(2)
        fh.seek(0)
        if magic != GZIP_MAGIC:
            return None
        try:
            got = _Stream(inflated_pieces(fh, path, max_bytes, max_ratio), path).decode()
        except (TraceReadError, zlib.error):
            got = None
        if file_stamp(os.fstat(fd)) != file_stamp(before):
            raise TraceReadError(path, CHANGED)
        if got is None:
            fh.seek(0)
        return got


def read_held(held: list, path: str) -> tuple[dict, EventColumns, int] | None:
    """``read_direct`` for a text already in memory, ``held[0]`` (a gzip file's, inflated): the
    same cuts and scans on slices of it, without msgspec's pass over the whole text first.
    ``held`` is emptied once the text is scanned, so that it is freed before the chunks'
    columns are joined; where this path declines it is left as it was."""
    if not compiled.available():
        return None
    return _decode(_HeldText(held), path)


class _FileText:
    """A plain file's text, read where it is needed (``pread``: one buffer per thread)."""

    def __init__(self, fd: int, size: int, path: str):
        self.fd, self.size, self.path = fd, size, path
        self.buffers = compiled.ThreadBuffers()

    def bytes_at(self, offset: int, n: int) -> bytes:
        buf = bytearray(n)
        read_into(self.fd, memoryview(buf), offset, self.path)
        return bytes(buf)

    def chunk(self, lo: int, hi: int) -> tuple:
        """A buffer that holds ``text[lo:hi]``, and where in it."""
        buf = self.buffers.get(hi - lo)
        read_into(self.fd, buf, lo, self.path)
        return buf, 0, hi - lo

    def release(self) -> None:
        """Nothing is held."""


class _HeldText:
    """A text in memory: its chunks are scanned where they lie."""

    def __init__(self, held: list):
        self.held, self.size = held, len(held[0])

    def bytes_at(self, offset: int, n: int) -> bytes:
        return bytes(memoryview(self.held[0])[offset : offset + n])

    def chunk(self, lo: int, hi: int) -> tuple:
        return self.held[0], lo, hi

    def release(self) -> None:
        """Let the text go: the caller's list was its last holder."""
        self.held.clear()


def _decode(text, path: str) -> tuple[dict, EventColumns, int] | None:
    head = text.bytes_at(0, min(text.size, HEAD_BYTES))
    if head[:2] == GZIP_MAGIC:
        return None
    at = find_events(head)
    if at < 0:
        return None
    with gc_paused():
        scanned = _scan(text, _bounds(text, at + 1), path)
        if scanned is None:
            return None
        parts, end = scanned
        meta = _meta(head[:at] + b"[]" + text.bytes_at(end + 1, text.size - end - 1), at, path)
        if meta is None:
            return None
        text.release()
        return meta, compiled.merge(parts), text.size


def _bounds(text, lo: int) -> list:
    """(start, stop) in the text per chunk, from ``lo`` to the end of the text (the array ends
    in one of them): cut at the first ``},{`` after each multiple of ``chunks.CHUNK_BYTES``."""
    step = chunks.CHUNK_BYTES  # read now, not imported: tests shrink it
    bounds, start, pos = [], lo, lo + step
    while pos < text.size:
        found = _next_cut(text, pos)
        if found is None:
            break
        bounds.append((start, found[0]))
        start = found[1]
        pos = start + step
    bounds.append((start, text.size))
    return bounds


def _next_cut(text, pos: int) -> tuple[int, int] | None:
    """``chunks.next_cut`` in the text, a window at a time. A cut that spans two windows is
    found from its ``}`` in the next; one with more whitespace than a window may be missed,
    which only makes a chunk longer."""
    while pos < text.size:
        window = text.bytes_at(pos, min(WINDOW, text.size - pos))
        found = chunks.next_cut(window)
        if found is not None:
            return pos + found[0], pos + found[1]
        last = window.rfind(b"}")
        pos += last if last > 0 else len(window)
    return None


def _scan(text, bounds: list, path: str) -> tuple[list, int] | None:
    """The parts of the chunks up to the one that holds the array's ``]``, and where it is."""

    def one(bound):
        lo, hi = bound
        return _chunk(*text.chunk(lo, hi), lo, path)

    done = on_threads(one, bounds, compiled.threads_for(len(bounds)))
    closing = next((k for k, (_, _, end) in enumerate(done) if end >= 0), None)
    if closing is None or any(part is _FAILED for part, _, _ in done[: closing + 1]):
        return None
    return [(part, by_c) for part, by_c, _ in done[: closing + 1]], done[closing][2]


def _chunk(buf, a: int, b: int, lo: int, path: str) -> tuple:
    """(part, by the scanner?, offset of the array's ``]`` in the text or -1) of the chunk at
    ``lo`` in the text, ``buf[a:b]``. A chunk the scanner leaves goes to msgspec, as an array
    of its own: it then cannot hold the ``]``."""
    got = scan_open(buf, a, b)
    if got is not None:
        end, columns = got
        return compiled.part_of(columns), True, lo + end - a if end >= 0 else -1
    try:
        return decode_chunk(b"".join((b"[", memoryview(buf)[a:b], b"]")), path), False, -1
    except TraceReadError:
        return _FAILED, False, -1


def _meta(outside: bytes, at: int, path: str) -> dict | None:
    """The decoded top-level members of the document with its events array emptied (``[]``
    at ``at``), or None where msgspec refuses it or its traceEvents is not that ``[]`` (a
    second traceEvents key)."""
    try:
        top = msgspec.json.decode(outside, type=dict[str, msgspec.Raw])
        events = top.pop("traceEvents")
        if chunks.address(events) - chunks.address(outside) != at or len(events) != 2:
            return None
        return meta_of(top, path)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError, KeyError, TraceReadError):
        return None


class _Stream:
    """The events of an inflating text, chunk by chunk: ``buf[:fill]`` holds the text from
    offset ``base`` on, up to what is inflated so far. A chunk is scanned in the buffer it was
    inflated into, the text after it copied into a buffer the scanner is done with (``spare``):
    the same few buffers are filled again and again (fresh pages for every chunk, and a copy of
    each, cost more than the scan)."""

    def __init__(self, pieces, path: str):
        self.pieces, self.path = pieces, path
        self.spare: list = []
        self.buf, self.fill, self.base = self._spare(0), 0, 0

    def _spare(self, n: int) -> bytearray:
        """A buffer of at least ``n`` bytes (grown as it is filled, up to a chunk's room)."""
        for k, buf in enumerate(self.spare):
            if len(buf) >= n:
                return self.spare.pop(k)
        return bytearray(max(n, STREAM_STEP))

    def more(self) -> bool:
        piece = next(self.pieces, None)
        if piece is None:
            return False
        end = self.fill + len(piece)
        if end > len(self.buf):  # doubled, up to the room of a chunk and what follows its cut
            step = chunks.CHUNK_BYTES  # read now, not imported: tests shrink it
            room = step + step // 8 + WINDOW + STREAM_STEP
            grown = bytearray(max(end + end // 8, min(2 * len(self.buf), room)))
            grown[: self.fill] = memoryview(self.buf)[: self.fill]
            self.buf = grown
        self.buf[self.fill : end] = piece  # as long as the slice: in place
        self.fill = end
        return True

    def decode(self) -> Decoded | None:
        while self.fill < HEAD_BYTES and self.more():
            pass
        head = bytes(self.buf[: min(self.fill, HEAD_BYTES)])
        at = find_events(head) if head[:2] != GZIP_MAGIC else -1
        if at < 0:
            return None
        threads = compiled.threads_for(1 << 20)
        with gc_paused(), ThreadPoolExecutor(threads) as pool:
            done = self._scan(pool, threads, at + 1)
        if done is None:
            return None
        parts, tail = done
        while self.more():  # the rest of the stream: checked whole, and the document's tail
            pass
        tail += memoryview(self.buf)[: self.fill]
        meta = _meta(head[:at] + b"[]" + bytes(tail), at, self.path)
        if meta is None:
            return None
        size = self.base + self.fill
        self.buf = self.spare = None  # type: ignore[assignment]
        return meta, compiled.merge(parts), size

    def _scan(self, pool, threads: int, lo: int) -> tuple[list, bytearray] | None:
        """The parts of the chunks up to the one that holds the array's ``]``, and the text
        after it that was cut into chunks (the rest is in ``buf``); None where a chunk failed
        or none holds the end. At most a chunk per thread is scanned or waits while the next
        one inflates: the text is never held whole."""
        parts: list = []
        pending: deque = deque()  # (future, buffer, the chunk's bounds in it, its offset, separator)
        for buf, a, b, start, sep in self._chunks(lo):
            pending.append((pool.submit(_chunk, buf, a, b, start, self.path), buf, a, b, start, sep))
            while len(pending) > threads or (pending and pending[0][0].done()):
                got = self._take(pending, parts)
                if got is not None:
                    return got or None
        while pending:
            got = self._take(pending, parts)
            if got is not None:
                return got or None
        return None

    def _chunks(self, lo: int):
        """(buffer, start and stop in it, offset in the text, separator after it) of each
        chunk from ``lo``, cut as ``_bounds`` cuts; the last one runs to the end of the text."""
        step = chunks.CHUNK_BYTES
        while (cut := self._cut(lo + step)) is not None:
            a, b, c = lo - self.base, cut[0] - self.base, cut[1] - self.base
            chunk, self.buf = self.buf, self._spare(self.fill - c)
            self.buf[: self.fill - c] = memoryview(chunk)[c : self.fill]
            start, self.fill, self.base, lo = lo, self.fill - c, cut[1], cut[1]
            yield chunk, a, b, start, bytes(chunk[b:c])
        while self.more():
            pass
        chunk, a, b = self.buf, lo - self.base, self.fill
        self.buf, self.fill, self.base = bytearray(), 0, self.base + self.fill
        yield chunk, a, b, lo, b""

    def _cut(self, pos: int) -> tuple[int, int] | None:
        """``chunks.next_cut`` at or after ``pos`` in the text, inflating more as needed."""
        while self.base + self.fill < pos + WINDOW and self.more():
            pass
        search = pos
        while True:
            at = search - self.base
            found = chunks.next_cut(memoryview(self.buf)[: self.fill], at) if at < self.fill else None
            if found is not None:
                return self.base + found[0], self.base + found[1]
            # a cut that spans what is inflated so far starts at its last "}", looked for only in
            # the last WINDOW bytes: else text without a cut (a long string) is searched again with
            # every piece inflated, quadratic in its length; a cut missed there only makes a chunk longer
            last = self.buf.rfind(b"}", max(0, at, self.fill - WINDOW), self.fill)
            search = self.base + (last if last >= 0 else self.fill)
            if not self.more():
                return None

    def _take(self, pending: deque, parts: list):
        """The oldest chunk's result into ``parts``: None to go on; (parts, the text after the
        array's end that was cut into chunks) where it holds the end; () where it failed."""
        future, buf, a, b, start, sep = pending.popleft()
        part, by_c, end = future.result()
        if part is _FAILED:
            return ()
        parts.append((part, by_c))
        if end < 0:
            self.spare.append(buf)  # the scanner is done with it
            return None
        tail = bytearray(buf[end - start + a + 1 : b])
        tail += sep
        for other, text, c, d, _, other_sep in pending:  # cut after the array's end: the document's tail
            other.cancel()
            tail += memoryview(text)[c:d]
            tail += other_sep
        pending.clear()
        return parts, tail
