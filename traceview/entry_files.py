"""The files of a cache entry and their checks, without its tables (``traceview.cache`` reads
and writes the tables; this module needs no pandas, so that what an entry keeps of a command's
output, ``traceview.kept``, is read before pandas is imported).

An entry is a folder named by a hash of the trace's absolute path (``entry_folder``), holding
``stamp`` (the code version that wrote it; its mtime is the entry's last use), ``entry.json``
(its first line the CRC-32 of the rest: ``sum_line``, ``verified_info``) and the files of its
tables and kept values, each JSON one written to a temporary name and renamed (``write_json``).
A reader opens every file relative to one handle on the folder (``Folder``), so it sees one
entry whole even while a store renames a new one into its place.
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import os
import secrets
import zlib
from pathlib import Path

import msgspec

from .temporaries import temporary

FORMAT = 2  # 2: identity with ctime/inode/sample, checksums
STAMP = "stamp"  # the code version that wrote the entry; its mtime is the entry's last use
DEFAULT_MIN_MB = 1.0  # smaller trace files load about as fast as an entry reads back
MIN_ENV = "TRACEVIEW_CACHE_MIN_MB"


def min_bytes() -> float:
    """With the default cache, only trace files of ``$TRACEVIEW_CACHE_MIN_MB`` (default 1 MiB)
    or more are stored: a small one parses in milliseconds, and storing it would only fill
    the user's cache folder (a folder given explicitly caches every trace)."""
    try:
        mib = float(os.environ.get(MIN_ENV, "") or DEFAULT_MIN_MB)
    except ValueError:
        return math.inf
    return mib * 2**20 if not math.isnan(mib) else math.inf


class Damaged(Exception):
    """An entry of this traceview that fails verification: discarded, rebuilt, noted."""


def entry_folder(folder: Path, path) -> Path:
    name = hashlib.sha256(os.path.abspath(os.fspath(path)).encode("utf-8", "surrogateescape")).hexdigest()[
        :32
    ]
    return folder / name


def crc(data, start: int = 0) -> int:
    return zlib.crc32(data, start)


def sum_line(body: bytes) -> bytes:
    return b"crc32:%08x\n" % crc(body)


def verified_info(data: bytearray) -> dict:
    """``entry.json``'s content, once its first line has been checked against the rest."""
    line, sep, body = bytes(data).partition(b"\n")
    if not sep or line + sep != sum_line(body):
        raise Damaged("entry.json does not match its checksum")
    info = msgspec.json.decode(body)
    if not isinstance(info, dict):
        raise Damaged("entry.json is not an entry")
    return info


class Folder:
    """An entry's folder, held open: every file is opened relative to that one handle, so a
    reader sees one entry whole even while a store renames a new one into its place. (Where
    the platform cannot open relative to a folder handle, plain paths.)"""

    def __init__(self, path: Path):
        self.path, self.fd = path, None

    def __enter__(self):
        if os.open in os.supports_dir_fd and hasattr(os, "O_DIRECTORY"):
            self.fd = os.open(self.path, os.O_RDONLY | os.O_DIRECTORY)
        return self

    def __exit__(self, *exc):
        if self.fd is not None:
            os.close(self.fd)

    def open(self, name: str):
        """The file ``name``, open (unbuffered): it reads as it was, whatever becomes of its name."""
        fd = (
            os.open(name, os.O_RDONLY, dir_fd=self.fd)
            if self.fd is not None
            else os.open(self.path / name, os.O_RDONLY)
        )
        return os.fdopen(fd, "rb", buffering=0)

    def read(self, name: str, size: int | None = None, on_read=None) -> bytearray:
        """The whole file ``name`` (``whole``)."""
        with self.open(name) as fh:
            return whole(fh, name, size, on_read)


def whole(fh, name: str, size: int | None = None, on_read=None) -> bytearray:
    """The whole of the open file ``fh`` (a bytearray: frames built on it stay writable); a file of
    another ``size`` than the entry recorded fails verification before it is read.
    ``on_read``: called with each piece (a memoryview) as soon as it is read."""
    have = os.fstat(fh.fileno()).st_size
    if size is not None and have != size:
        raise Damaged(f"{name} is {have} bytes, not {size}")
    buf = bytearray(have)
    view, got = memoryview(buf), 0
    while got < have:
        n = fh.readinto(view[got : got + PIECE])
        if not n:
            raise Damaged(f"{name} ended early")
        if on_read is not None:
            on_read(view[got : got + n])
        got += n
    return buf


PIECE = 8 << 20  # a table file is read in pieces, each checksummed on a thread while the next is read


def write_json(entry: Path, stem: str, body: bytes) -> None:
    """``<stem>.json`` in ``entry``, its checksum line first: written to a temporary name, renamed
    when complete (a write that failed half way leaves nothing behind)."""
    tmp = entry / f"{stem}.json.tmp-{secrets.token_hex(4)}"
    try:
        with temporary(tmp):
            tmp.write_bytes(sum_line(body) + body)
            os.replace(tmp, entry / f"{stem}.json")
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink()
