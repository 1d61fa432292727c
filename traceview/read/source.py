"""File -> JSON text: plain or gzip (detected by magic bytes, whatever the suffix).

Size caps live here: a plain file over the cap is refused before it is read; a
gzip stream is inflated in bounded steps and stopped as soon as its output passes
the size cap, the memory guard (checked again as the output grows) or the
expansion ratio. The ratio is what stops a gzip bomb early: real traces expand
10-40x (35x at most over the 48 corpus traces), deflate can reach ~1000x, so past
``RATIO_FLOOR`` of output a stream expanding more than ``max_ratio`` times the
compressed bytes read so far is refused there: ~64 MiB of output, well under a second.
"""

from __future__ import annotations

import os
import re
import stat
import zlib
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass

from ..errors import TraceReadError
from ..limits import DEFAULT_MAX_BYTES, DEFAULT_MAX_RATIO, memory_cap, memory_problem

GZIP_MAGIC = b"\x1f\x8b"
RATIO_FLOOR = 64 << 20  # less output than this is never refused for its ratio: it costs little
INFLATE_STEP = 16 << 20  # most output one decompress call makes, so every check runs often
STREAM_STEP = 1 << 20  # the same, where the text is consumed as it is inflated (inflated_pieces)
GUARD_STEP = 256 << 20  # output between two looks at available memory
READ_CHUNK = 1 << 22
SPACES = re.compile(rb"[ \t\n\r\x0b\x0c]*")  # what bytes.strip() strips: JSON's spaces and \v \f
LOCATE_STEP = 64  # compressed bytes per replay call when locating damage: the reported offset's precision


@dataclass(frozen=True)
class StreamCut:
    """Where a gzip stream stopped early (salvage mode only): ``reason`` is ``"cut"``
    (the file ends mid-stream) or ``"corrupt"``."""

    compressed_at: int
    reason: str

    def describe(self, path: str, recovered: int) -> str:
        if self.reason == "corrupt":
            return (
                f"{path}: gzip data is corrupt at compressed byte {self.compressed_at}; "
                f"recovered {recovered} bytes of decompressed text before it"
            )
        return (
            f"{path}: the gzip stream was cut at compressed byte {self.compressed_at}; "
            f"recovered {recovered} bytes of decompressed text"
        )


@dataclass(frozen=True)
class Decompressed:
    """A file's JSON text; ``cut`` says where its gzip stream stopped early, if it did. A
    gzip file's text stays the bytearray it was inflated into: ``bytes()`` of it would be a
    second copy of the whole text at the peak of memory (the reader takes any buffer)."""

    data: bytes | bytearray
    cut: StreamCut | None = None
    stamp: tuple | None = None  # a plain regular file's identity when read: see ``file_stamp``
    inflated: bool = False  # a whole gzip stream's text (not a plain file's, nor a cut stream's)


def read_source(
    path: str,
    *,
    max_bytes: int = DEFAULT_MAX_BYTES,
    max_ratio: float | None = DEFAULT_MAX_RATIO,
    salvage: bool = False,
    fh=None,
) -> Decompressed:
    """The file's text. With ``salvage`` a damaged gzip stream gives what came before
    the damage (``cut`` set) instead of an error. ``max_ratio`` None: no ratio limit.
    ``fh``: the file already ``opened`` (at its start), so that it is opened once."""
    with nullcontext(fh) if fh is not None else opened(path) as fh, os_errors(path):
        head = _read_head(fh, 2)
        if head == GZIP_MAGIC:
            return _gunzip(fh, head, path, _Inflater(path, max_bytes, max_ratio), salvage)
        before = os.fstat(fh.fileno())
        data = _read_plain(fh, head, path, max_bytes)
        stamp = _stamp_if_unchanged(before, os.fstat(fh.fileno()))
    if len(data) > max_bytes:
        raise TraceReadError(path, over_cap("larger than", max_bytes))
    if _blank(data):
        raise TraceReadError(path, "empty file")
    return Decompressed(data, stamp=stamp)


@contextmanager
def opened(path: str):
    """The file, unbuffered: a buffered reader's read() joins what it buffered to the rest, a
    second copy of the whole file at the peak of memory (2x the file at 1 GB). An error
    opening it is a TraceReadError."""
    with os_errors(path):
        fh = open(path, "rb", buffering=0)  # noqa: SIM115 (closed by the with below, outside os_errors)
    with fh:
        yield fh


@contextmanager
def os_errors(path: str):
    """What the system says about a file as one line naming it (a TraceReadError)."""
    try:
        yield
    except FileNotFoundError:
        raise TraceReadError(path, "no such file") from None
    except IsADirectoryError:
        raise TraceReadError(path, "is a directory, not a trace file") from None
    except PermissionError:
        raise TraceReadError(path, "permission denied") from None
    except OSError as exc:
        raise TraceReadError(path, f"cannot read: {exc.strerror or exc}") from None


def read_bytes(
    path: str,
    *,
    max_bytes: int = DEFAULT_MAX_BYTES,
    max_ratio: float | None = DEFAULT_MAX_RATIO,
    salvage: bool = False,
) -> bytes:
    """The file's JSON text, decompressed if it is gzip whatever its suffix."""
    data = read_source(path, max_bytes=max_bytes, max_ratio=max_ratio, salvage=salvage).data
    return data if isinstance(data, bytes) else bytes(data)


CHANGED = "the file changed while it was being read: load it again once it is written"


def read_into(fd: int, buf: memoryview, offset: int, path: str) -> None:
    """Fill ``buf`` from ``offset``: a read may return less than asked (a signal, some network
    file systems; one read stops short of 2 GiB on Linux); only the end of the file (the file
    got shorter) is an error."""
    got = 0
    while got < len(buf):
        n = os.preadv(fd, [buf[got:]], offset + got)
        if n == 0:
            raise TraceReadError(path, CHANGED)
        got += n


def file_stamp(st: os.stat_result) -> tuple:
    """What changes when a file is replaced or written to: device, inode, size, modification time."""
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def _stamp_if_unchanged(before: os.stat_result, after: os.stat_result) -> tuple | None:
    """A regular file's stamp, if it did not change while it was read (else None: its text may
    mix old and new bytes, and nothing should be read from it again as if it matched)."""
    if not stat.S_ISREG(after.st_mode) or file_stamp(before) != file_stamp(after):
        return None
    return file_stamp(after)


def _blank(data) -> bool:
    """Whether ``data`` is all whitespace, found without ``data.strip()``'s copy of the text
    (a gigabyte at the peak of memory: real traces end in a newline)."""
    return SPACES.fullmatch(data) is not None


def _read_head(fh, n: int) -> bytes:
    """The first ``n`` bytes (fewer only at the end of the file): a raw read of a pipe may
    return less than asked."""
    head = b""
    while len(head) < n and (more := fh.read(n - len(head))):
        head += more
    return head


def _read_plain(fh, head: bytes, path: str, max_bytes: int) -> bytes:
    """``head``: the bytes already read (a pipe cannot seek back to them)."""
    size = os.fstat(fh.fileno()).st_size
    _check_size(path, size, max_bytes)
    if size:  # a regular file: read() allocates its size up front, known and checked above
        fh.seek(0)
        return fh.readall()  # one buffer of the file's size, filled in place
    return _read_capped(fh, head, path, max_bytes)


def _read_capped(fh, head: bytes, path: str, max_bytes: int) -> bytes:
    """A pipe or special file (no size known): read in chunks, stop past the size cap, or
    past the memory guard (``/dev/zero`` never ends)."""
    chunks, total, cap = [head], len(head), _guard_cap(max_bytes, 0)
    while total <= max_bytes and (chunk := fh.read(READ_CHUNK)):
        chunks.append(chunk)
        total += len(chunk)
        if total > cap:
            raise TraceReadError(path, memory_problem(total, at_least=True))
        if total % GUARD_STEP < len(chunk):  # crossed a GUARD_STEP boundary: look again
            cap = _guard_cap(max_bytes, total)
    return b"".join(chunks)


def _guard_cap(max_bytes: int, held: int) -> int:
    """The most text to hold: the size cap, or less when memory (with ``held`` bytes of
    text already read) cannot take more."""
    mem_cap = memory_cap(held)
    return max_bytes if mem_cap is None else min(max_bytes, mem_cap)


def _check_size(path: str, size: int, max_bytes: int) -> None:
    """Refuse before reading a file over the cap or too large for available memory."""
    if size > max_bytes:
        raise TraceReadError(path, over_cap("larger than", max_bytes))
    cap = memory_cap()
    if cap is not None and size > cap:
        raise TraceReadError(path, memory_problem(size))


def over_cap(what: str, max_bytes: int) -> str:
    """The one wording of "over the size limit", for the reader and for a cached trace alike."""
    return f"{what} the {_human(max_bytes)} size limit (--max-size MIB raises it)"


class _Inflater:
    """Decompresses gzip members one after another into ``out``, in steps of at most
    ``INFLATE_STEP`` bytes, enforcing the size cap, the memory guard and the ratio after each."""

    def __init__(self, path: str, max_bytes: int, max_ratio: float | None, step: int = INFLATE_STEP):
        self.path, self.max_bytes, self.max_ratio = path, max_bytes, max_ratio
        self.step = step
        self.cap = _guard_cap(max_bytes, 0)
        self.out = bytearray()
        self.total = 0  # bytes inflated so far: ``out`` holds them all unless a streaming reader took some
        self.decomp = zlib.decompressobj(wbits=31)
        self.consumed = 0  # compressed bytes inflated so far: the ratio's base, where a cut is reported
        self.full = False  # the last step filled its room: output may be pending without input

    def feed(self, chunk: bytes) -> bytes:
        """Inflate one step of ``chunk``; return what is left of it."""
        room = min(self.cap + 1 - self.total, self.step)
        before = len(self.out)
        saved = self.decomp.copy()  # the state before this step, to find the damage if zlib refuses it
        try:
            self.out += self.decomp.decompress(chunk, room)
        except zlib.error:  # corrupt: report where, not where the step began; keep the text before it
            at, text = _damage_offset(saved, chunk)
            self.consumed += at
            self.out += text[:room]
            raise
        left = self.decomp.unused_data if self.decomp.eof else self.decomp.unconsumed_tail
        self.consumed += len(chunk) - len(left)  # bytes after a member's end are the next member's
        made = len(self.out) - before
        self.full = made == room
        self.total += made
        self._check(self.total - made)
        return self.decomp.unconsumed_tail

    def _check(self, before: int) -> None:
        n = self.total
        if n > self.max_bytes:
            raise TraceReadError(self.path, over_cap("decompresses to more than", self.max_bytes))
        # the ratio before the memory guard: for a bomb it is the cause, and the clearer message
        if self.max_ratio is not None and n > RATIO_FLOOR and n > self.max_ratio * self.consumed:
            raise TraceReadError(self.path, over_ratio(self.max_ratio, n, self.consumed))
        if n // GUARD_STEP != before // GUARD_STEP:  # memory may have gone elsewhere meanwhile
            self.cap = _guard_cap(self.max_bytes, n)
        if n > self.cap:
            raise TraceReadError(self.path, memory_problem(n, at_least=True))

    def next_member(self, fh, rest: bytes) -> bytes:
        """After a member ends: the start of the next one (b"" at end of file).
        Concatenated members and zero padding after a member are both legal gzip."""
        chunk = (self.decomp.unused_data + rest).lstrip(b"\0")
        while not chunk:
            chunk = fh.read(READ_CHUNK)
            if not chunk:
                return b""
            chunk = chunk.lstrip(b"\0")
        self.decomp = zlib.decompressobj(wbits=31)
        return chunk


def _corrupt(zlib_message: str, at: int) -> str:
    """Most damage inside deflate data still decodes, to wrong text, until the checksum at the
    member's end: then only the end is known, and saying "near" it would point at the wrong place."""
    why = zlib_message.split(": ", 1)[-1]  # "Error -3 while decompressing data: invalid block type"
    if why in ("incorrect data check", "incorrect length check"):
        return (
            f"corrupt gzip data: the checksum that ends the stream at compressed byte {at} does not "
            "match the data, so the damage lies somewhere before it"
        )
    return f"corrupt gzip data near compressed byte {at} ({why})"


def _damage_offset(decomp, chunk: bytes) -> tuple[int, bytes | bytearray]:
    """How far into ``chunk`` zlib finds the damage it refused: it does not say, and one step may
    span megabytes, so the step is replayed from the state before it in ``LOCATE_STEP`` slices
    (bounded per call as in the real step). Exact to a slice. Returns the offset and the text
    inflated before it, which --salvage keeps: no more than the failed step would have made."""
    text = bytearray()
    for at in range(0, len(chunk), LOCATE_STEP):
        try:
            left = chunk[at : at + LOCATE_STEP]
            while left and not decomp.eof:
                text += decomp.decompress(left, INFLATE_STEP)
                left = decomp.unconsumed_tail
        except zlib.error:
            return at, text
        if decomp.eof:  # cannot happen for the step that failed; never report past it
            break
    return 0, b""


def over_ratio(max_ratio: float, out: int, consumed: int) -> str:
    """The one wording of "expands too much", for the reader and for a cached trace alike."""
    return (
        f"expands more than {max_ratio:g}x ({_human(out)} of text from {_human(consumed)} of gzip data; "
        f"real traces expand 10-40x): refused as a likely gzip bomb (--max-ratio N raises the limit)"
    )


def _gunzip(fh, head: bytes, path: str, inflater: _Inflater, salvage: bool) -> Decompressed:
    try:
        _inflate_all(fh, head, inflater)
    except zlib.error as exc:
        if salvage and inflater.out:
            return Decompressed(inflater.out, StreamCut(inflater.consumed, "corrupt"))
        raise TraceReadError(path, _corrupt(str(exc), inflater.consumed)) from None
    if not inflater.decomp.eof:
        if salvage and inflater.out:
            return Decompressed(inflater.out, StreamCut(inflater.consumed, "cut"))
        raise TraceReadError(
            path, f"truncated gzip file (compressed stream ends at byte {inflater.consumed}; try --salvage)"
        )
    if _blank(inflater.out):
        raise TraceReadError(path, "empty file (gzip holds no data)")
    return Decompressed(inflater.out, inflated=True)


def _inflate_all(fh, head: bytes, inflater: _Inflater) -> None:
    for _ in _inflate_steps(fh, head, inflater):
        pass


def _inflate_steps(fh, head: bytes, inflater: _Inflater):
    """Inflate the whole stream into ``inflater.out``, yielding after each step (a streaming
    reader may take what is in ``out`` then)."""
    chunk = head + fh.read(READ_CHUNK)
    while chunk:
        # a step that filled its room may leave output inside zlib with no input left: go on
        while chunk or (inflater.full and not inflater.decomp.eof):
            chunk = inflater.feed(chunk)
            yield
            if inflater.decomp.eof:
                chunk = inflater.next_member(fh, chunk)
                if not chunk:
                    return  # end of file: the empty-text check still applies
        chunk = fh.read(READ_CHUNK)


def inflated_pieces(fh, path: str, max_bytes: int, max_ratio: float | None):
    """A gzip file's text (``fh`` at its start) in pieces of ``STREAM_STEP`` bytes as it is
    inflated, with the checks ``read_source`` makes (size cap, memory guard, ratio), so that a
    reader holds only what it keeps. Raises TraceReadError (its figures are this stepping's:
    a reader that must say what is wrong reads the file again with ``read_source``), or
    zlib.error for a corrupt stream; a stream cut short ends in a TraceReadError."""
    inflater = _Inflater(path, max_bytes, max_ratio, STREAM_STEP)
    for _ in _inflate_steps(fh, _read_head(fh, 2), inflater):
        if inflater.out:
            piece, inflater.out = inflater.out, bytearray()
            yield piece
    if not inflater.decomp.eof:
        raise TraceReadError(path, "truncated gzip file")


def _human(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)
