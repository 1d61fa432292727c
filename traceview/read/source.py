"""File -> JSON text: plain or gzip (detected by magic bytes, whatever the suffix).

Size caps live here: a plain file over the cap is refused before it is read, a
gzip stream is stopped as soon as its output passes the cap (a gzip bomb costs
nothing), and both are checked against the memory this machine has now.
"""
from __future__ import annotations

import os
import zlib
from dataclasses import dataclass

from ..errors import TraceReadError
from ..limits import memory_cap, memory_problem

GZIP_MAGIC = b"\x1f\x8b"
DEFAULT_MAX_BYTES = 16 * 2**30  # decompressed-size cap; a gzip bomb stops here
READ_CHUNK = 1 << 22


@dataclass(frozen=True)
class StreamCut:
    """Where a gzip stream stopped early (salvage mode only): ``reason`` is ``"cut"``
    (the file ends mid-stream) or ``"corrupt"``."""

    compressed_at: int
    reason: str

    def describe(self, path: str, recovered: int) -> str:
        if self.reason == "corrupt":
            return (f"{path}: gzip data is corrupt at compressed byte {self.compressed_at}; "
                    f"recovered {recovered} bytes of decompressed text before it")
        return (f"{path}: the gzip stream was cut at compressed byte {self.compressed_at}; "
                f"recovered {recovered} bytes of decompressed text")


@dataclass(frozen=True)
class Decompressed:
    """A file's JSON text; ``cut`` says where its gzip stream stopped early, if it did."""

    data: bytes
    cut: StreamCut | None = None


def read_source(path: str, *, max_bytes: int = DEFAULT_MAX_BYTES, salvage: bool = False) -> Decompressed:
    """The file's text. With ``salvage`` a damaged gzip stream gives what came before
    the damage (``cut`` set) instead of an error."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(2)
            fh.seek(0)
            if head == GZIP_MAGIC:
                return _gunzip(fh, path, max_bytes, salvage)
            data = _read_plain(fh, path, max_bytes)
    except FileNotFoundError:
        raise TraceReadError(path, "no such file") from None
    except IsADirectoryError:
        raise TraceReadError(path, "is a directory, not a trace file") from None
    except PermissionError:
        raise TraceReadError(path, "permission denied") from None
    except OSError as exc:
        raise TraceReadError(path, f"cannot read: {exc.strerror or exc}") from None
    if len(data) > max_bytes:
        raise TraceReadError(path, over_cap("larger than", max_bytes))
    if not data.strip():
        raise TraceReadError(path, "empty file")
    return Decompressed(data)


def read_bytes(path: str, *, max_bytes: int = DEFAULT_MAX_BYTES, salvage: bool = False) -> bytes:
    """The file's JSON text, decompressed if it is gzip whatever its suffix."""
    return read_source(path, max_bytes=max_bytes, salvage=salvage).data


def _read_plain(fh, path: str, max_bytes: int) -> bytes:
    size = os.fstat(fh.fileno()).st_size
    _check_size(path, size, max_bytes)
    return fh.read() if size else _read_capped(fh, max_bytes)  # read(n) allocates n bytes up front


def _read_capped(fh, max_bytes: int) -> bytes:
    """A pipe or special file (no size known): read in chunks, stop past the cap."""
    chunks, total = [], 0
    while total <= max_bytes and (chunk := fh.read(READ_CHUNK)):
        chunks.append(chunk)
        total += len(chunk)
    return b"".join(chunks)


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
    """Decompresses gzip members one after another into ``out``, enforcing the caps."""

    def __init__(self, path: str, max_bytes: int):
        mem_cap = memory_cap()
        self.path, self.max_bytes = path, max_bytes
        self.cap = max_bytes if mem_cap is None else min(max_bytes, mem_cap)
        self.out = bytearray()
        self.decomp = zlib.decompressobj(wbits=31)
        self.consumed = 0  # compressed bytes fed in so far: where a cut is reported

    def feed(self, chunk: bytes) -> bytes:
        """Inflate ``chunk`` up to the cap; return what is left of it (the output was full)."""
        self.out += self.decomp.decompress(chunk, self.cap + 1 - len(self.out))  # zlib.error: corrupt
        if len(self.out) > self.max_bytes:
            raise TraceReadError(self.path, over_cap("decompresses to more than", self.max_bytes))
        if len(self.out) > self.cap:
            raise TraceReadError(self.path, memory_problem(len(self.out), at_least=True))
        self.consumed += len(chunk) - len(self.decomp.unconsumed_tail)
        return self.decomp.unconsumed_tail

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


def _gunzip(fh, path: str, max_bytes: int, salvage: bool) -> Decompressed:
    inflater = _Inflater(path, max_bytes)
    try:
        _inflate_all(fh, inflater)
    except zlib.error:
        if salvage and inflater.out:
            return Decompressed(bytes(inflater.out), StreamCut(inflater.consumed, "corrupt"))
        raise TraceReadError(path, f"corrupt gzip data near compressed byte {inflater.consumed}") from None
    if not inflater.decomp.eof:
        if salvage and inflater.out:
            return Decompressed(bytes(inflater.out), StreamCut(inflater.consumed, "cut"))
        raise TraceReadError(path, f"truncated gzip file (compressed stream ends at byte {inflater.consumed}; "
                                   "try --salvage)")
    if not inflater.out.strip():
        raise TraceReadError(path, "empty file (gzip holds no data)")
    return Decompressed(bytes(inflater.out))


def _inflate_all(fh, inflater: _Inflater) -> None:
    while chunk := fh.read(READ_CHUNK):
        while chunk:
            chunk = inflater.feed(chunk)
            if inflater.decomp.eof:
                chunk = inflater.next_member(fh, chunk)
                if not chunk:
                    return  # end of file: the empty-text check still applies


def _human(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)
