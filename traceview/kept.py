"""What a command showed of one trace, kept in the trace's cache entry, read back before pandas is
imported (issue 35).

A ``summary`` of a cached trace works nothing out: what it shows is kept in the entry by the first
run (``cache.derived_value`` and ``derived_frame``). Showing it still cost the imports of pandas,
numpy and pyarrow (0.3-0.6 s on this project's machine: most of a warm summary). So a run that
showed a trace also keeps *what it showed*, before any width, colour or format was applied
(``render.shown``), as one JSON file in the entry; a later run with the same analysis options
shows that, in whichever format and width it asks for, without importing them.

The file is valid for the entry it was written in, and only while everything that made it is
unchanged, each checked when it is read:

* the trace: its identity now equals the one its entry was stored for (``fingerprint.identity``),
  and equalled it before and after the run that kept the file (so the entry is the trace the
  report was made from);
* the entry: the file's name holds the hash of the entry's ``entry.json`` (a rebuilt entry has
  another), and its ``stamp`` (traceview's version and code digest, the cache format, the pandas
  and pyarrow versions) is the one it was written under;
* what runs: traceview's version, code and compiled parts, the interpreter, its flags and the
  folders it imports from (``replay.interpreter``: installing or upgrading pandas changes them);
* what was asked: ``name``, a hash the caller makes of the command, its options and the path as
  given (the report shows it as given).

Anything else is a miss, and the command runs as it always did. Reading touches the entry's stamp,
as a hit does (the least recently used entries go first).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from pathlib import Path

import msgspec

from . import fingerprint, replay
from ._version import __version__
from .entry_files import FORMAT, STAMP, Folder, entry_folder, verified_info, whole, write_json
from .filenames import as_text

_PREFIX = "shown-"  # after ``derived-<token>-``: apart from the analyses' kept values
MAX_BYTES = 8 * 2**20  # larger is neither kept nor read (a diff with --top 0 of large traces)
#: whether this process showed what an entry kept: its output read its traces through the cache,
#: and a replay may record it as it records a run that loaded them (``_entry``)
_SERVED: list[bool] = []


def served() -> bool:
    """Whether this process read back anything an entry kept (``read``)."""
    return bool(_SERVED)


def identities(paths) -> list[dict | None]:
    """Each path's identity now (None: not a regular file, unreadable)."""
    return [fingerprint.identity(p) for p in paths]


def folder() -> Path | None:
    """The cache folder, or None when the cache is off (``replay.folder`` decides it alike)."""
    where = replay.folder()
    return None if where is None else where.parent


def read(path, name: str):
    """The value kept as ``name`` in ``path``'s entry, or None (a miss: anything changed)."""
    with contextlib.suppress(Exception):
        where = folder()
        seen = fingerprint.identity(path)
        if where is None or seen is None:
            return None
        entry = entry_folder(where, path)
        with Folder(entry) as d:
            found = _entry(d, path, seen)
            if found is None:
                return None
            token, stamp = found
            with d.open(f"derived-{token}-{_PREFIX}{name}.json") as fh:
                if os.fstat(fh.fileno()).st_size > MAX_BYTES:
                    return None
                kept = verified_info(whole(fh, name))
        if kept.get("stamp") != stamp or kept.get("interpreter") != _interpreter():
            return None
        with contextlib.suppress(OSError):
            os.utime(entry / STAMP)  # least recently used goes first
        _SERVED.append(True)
        return kept["value"]
    return None


def token(path) -> str | None:
    """The hash that names what ``path``'s entry keeps (``cache._mark``), while the entry is the one
    stored for the trace as it is now by this code; else None. What a command kept of several traces
    is kept in the first one's entry under a name made with the others' tokens: a rebuilt or
    changed trace among them has another."""
    with contextlib.suppress(Exception):
        where = folder()
        seen = fingerprint.identity(path)
        if where is None or seen is None:
            return None
        with Folder(entry_folder(where, path)) as d:
            found = _entry(d, path, seen)
        return None if found is None else found[0]
    return None


def write(path, seen: dict | None, stamp: str, name: str, value) -> None:
    """Keep ``value`` (JSON's types only) as ``name`` in ``path``'s entry, if the entry is the one
    stored for identity ``seen`` (taken before the run read the trace) under ``stamp`` (this
    process's ``cache.current_stamp``) and the trace is still that one. Never fails the command."""
    with contextlib.suppress(Exception):
        where = folder()
        if where is None or seen is None or fingerprint.identity(path) != seen:
            return
        entry = entry_folder(where, path)
        with Folder(entry) as d:
            found = _entry(d, path, seen)
        if found is None or found[1] != stamp:
            return
        body = msgspec.json.encode(
            {"stamp": stamp, "interpreter": _interpreter(), "value": value}, enc_hook=_as_text
        )
        if len(body) <= MAX_BYTES:
            write_json(entry, f"derived-{found[0]}-{_PREFIX}{name}", body)


def _entry(d: Folder, path, seen: dict) -> tuple[str, str] | None:
    """(the entry's token, its stamp) when the entry in ``d`` was stored for ``path`` as ``seen``
    by this traceview's code; else None."""
    stamp = d.read(STAMP).decode().strip()
    if stamp.split(" ")[:3] != [__version__, fingerprint._code_digest(), str(FORMAT)]:
        return None
    raw = d.read("entry.json")
    key = verified_info(raw).get("key", {})
    mine = {"path": as_text(os.path.abspath(os.fspath(path))), **seen}
    if any(key.get(k) != v for k, v in mine.items()):
        return None
    # the name the entry's kept values carry (``cache._mark``): a rebuilt entry has another
    token = hashlib.sha256(bytes(raw).partition(b"\n")[2]).hexdigest()[:32]
    return token, stamp


def _as_text(obj):
    """A text of a str subclass (a finding: ``report.Finding``) as the JSON output writes it."""
    if isinstance(obj, str):
        return str(obj)
    raise NotImplementedError(f"{type(obj).__name__} is not kept")


def _interpreter() -> dict:
    """``replay.interpreter`` as JSON reads it back (lists, not tuples)."""
    return msgspec.json.decode(msgspec.json.encode(replay.interpreter()))
