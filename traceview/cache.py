"""Columnar cache of loaded traces: the second load of an unchanged trace reads Parquet.

``load(path)`` (``cache=None``, the default) looks in the default folder:
``$TRACEVIEW_CACHE_DIR`` if set, else the platform's user cache folder (``platformdirs``):
``$XDG_CACHE_HOME/traceview`` or ``~/.cache/traceview`` on Linux, ``~/Library/Caches/traceview``
on macOS, ``%LOCALAPPDATA%\\traceview\\Cache`` on Windows -- never next to the trace.
``cache="/some/dir"`` uses that folder, ``cache=False`` bypasses the cache.

One entry per trace path (a folder named by a hash of the absolute path) holds the
four DataFrames as Arrow IPC (Feather v2) files plus ``entry.json`` (meta, warnings, stats, dtypes,
the key and a checksum of each table file). The key is the identity of the trace as it was
read (``identity``: size, mtime_ns, ctime_ns, inode, device and a hash of its first and last
64 KiB; taken before the trace is read and checked again after, see ``load``), the traceview
version, a digest of traceview's code and kernel rules (so a classification change
invalidates), the cache format and the pandas/pyarrow versions. The change time is what
``touch -r`` cannot restore: a trace edited in place at the same size with its mtime put
back is a miss. The sampled bytes cover file systems whose ctime follows mtime (FAT) and,
for gzip, the trailer's CRC-32 of the whole text; reading them costs two small reads. What
the key cannot see: a same-size rewrite in place, within one tick of the file system's
clock of the previous change, that leaves the sampled bytes alone.

Every entry is verified before it is served: ``entry.json`` starts with a line holding the
CRC-32 of the rest, which holds the size and CRC-32 of each table file, and each table is
checked as it is read (once, from the bytes that are then parsed: ~9% of a cached load). An
entry that fails (a flipped bit, a truncated file, a damaged ``entry.json``) is removed and
the load rebuilds it from the trace with a warning; a stale one (changed trace, other
traceview) is a silent miss. Entries appear whole: a new one is written in a temporary folder
and renamed into place, the one it replaces is first renamed away, and a reader reads all of
an entry's files through one open handle on its folder, so it sees one entry, never a mix.
Nothing is fsynced: an entry whose data never reached the disk (a crash, a power cut) fails
verification at its next load and is rebuilt.

Caching needs pyarrow (the optional extra ``traceview[cache]``); without it there
is simply no cache. Failures to write (read-only folder, full disk) never break a
load: the entry is skipped.

Size: after each store the folder is trimmed. Entries written by another traceview
version or code (their ``stamp`` differs; they can never be hit again) go first, then
the least recently used entries (a hit touches the entry's ``stamp`` file) until the
folder fits the cap: ``$TRACEVIEW_CACHE_MAX_MB`` mebibytes, default 2048; 0 turns
caching off. The default folder only stores trace files of ``$TRACEVIEW_CACHE_MIN_MB``
(default 1) mebibytes or more: smaller ones parse about as fast as an entry reads.
``info()`` and ``clear()`` (``traceview cache info|clear``) show and empty the folder;
they only ever touch folders named like entries, never anything else that may live there.

Why Arrow IPC and not Parquet: a reload is dominated by fixed costs, and
``import pyarrow.parquet`` alone takes ~25 ms (``pyarrow.feather`` ~2 ms, pyarrow
itself is already imported by pandas); uncompressed IPC also needs no decoding.
On the 28 MB corpus trace a fresh-process reload took 56-86 ms with Parquet and
~30 ms with IPC (parsing the JSON: ~1 s). Categoricals are stored as their codes
with the categories (and their dtype) in ``entry.json``, so dtypes come back exactly.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import math
import os
import re
import secrets
import shutil
import threading
import time
from pathlib import Path

import msgspec
import numpy as np
import pandas as pd

from ._version import __version__
from .deferred import Deferred
from .entry_files import FORMAT
from .entry_files import STAMP as _STAMP
from .entry_files import Damaged as _Damaged
from .entry_files import Folder as _Folder
from .entry_files import crc as _crc
from .entry_files import entry_folder as _entry
from .entry_files import min_bytes as _min_bytes
from .entry_files import sum_line as _sum_line
from .entry_files import verified_info as _verified_info
from .entry_files import whole as _whole
from .entry_files import write_json as _write_json
from .errors import TraceviewError
from .filenames import as_text
from .fingerprint import SAMPLE as _SAMPLE  # noqa: F401  (the identity's sample size, read by tests)
from .fingerprint import _code_digest, cache_dir, identity
from .plain import decode as plain_decode
from .plain import encode as plain_encode
from .replay import clear as replays_clear
from .replay import info as replays_info
from .replay import spoil
from .temporaries import temporary, track, untrack

_CHUNK = 1 << 20
_TABLES = ("events", "kernels", "ops", "steps", "memory")
DEFAULT_MAX_MB = 2048
MAX_ENV = "TRACEVIEW_CACHE_MAX_MB"
_ENTRY_NAME = re.compile(r"[0-9a-f]{32}")
_TMP_NAME = re.compile(r"[0-9a-f]{32}\.tmp-[A-Za-z0-9_]+")
_TMP_MAX_AGE_S = 3600  # a half-written entry older than this was left by a crash


def available() -> bool:
    try:
        import pyarrow
        import pyarrow.feather  # noqa: F401
    except ImportError:
        return False
    return True


def lookup(path, cache, seen: dict | None = None, *, notes: list | None = None, rebuild=None):
    """The cached Trace of ``path`` if its entry verifies and was stored for ``seen`` (the trace's
    ``identity`` taken before this load; now if None), else None. An entry that fails
    verification is removed, and a note saying so goes to ``notes``.

    The events, ops and kernels tables are read, checked and made only when first used (``_DEFERRED``);
    should that fail then (the file damaged since), the entry is removed and ``rebuild(name,
    note)`` gives the table from the trace itself (None: the error is raised)."""
    try:
        folder = cache_dir(cache)
        if folder is None or not available():
            return None
        seen = identity(path) if seen is None else seen
        if seen is None:
            return None
        entry = _entry(folder, path)
        trace = _lookup(entry, _key(path, seen), path, _DeferredTables(entry, path, rebuild))
    except _Damaged as exc:
        _discard(entry)
        spoil("a cache entry was rebuilt")  # the note is this run's alone: not replayed
        if notes is not None:
            notes.append(f"{path}: its cache entry failed verification ({exc}); rebuilt from the trace")
        return None
    except Exception:  # missing, unfinished, removed meanwhile, stale: a miss; the next store replaces it
        return None
    if trace is not None:
        with contextlib.suppress(OSError):
            os.utime(entry / _STAMP)  # least recently used goes first
    return trace


def _lookup(entry: Path, key: dict, path, deferred: _DeferredTables):
    with _Folder(entry) as d:
        try:
            stamp = d.read(_STAMP).decode().strip()
        except (FileNotFoundError, NotADirectoryError):
            return None
        if stamp != _stamp(key):  # another traceview's entry: stale, not damaged
            return None
        raw = d.read("entry.json")
        info = _verified_info(raw)
        if info.get("key") != key:  # the trace changed: stale
            return None
        trace = _read(d, info, path, deferred)
        _mark(trace, entry, bytes(raw).partition(b"\n")[2])
        return trace


def store(trace, cache, seen: dict | None) -> None:
    """Write ``trace``'s entry, keyed on ``seen``: the trace's ``identity`` taken before it was
    read (None: not stored). Any failure just means no cache."""
    tmp = None
    try:
        folder = cache_dir(cache)
        if folder is None or seen is None or not available():
            return
        try:
            cap = max_bytes()
        except TraceviewError:  # a load never fails over the cache; `traceview cache info` says what is wrong
            cap = DEFAULT_MAX_MB * 2**20
        if cap <= 0 or (cache is None and seen["size"] < _min_bytes()):
            return
        key = _key(trace.path, seen)
        folder.mkdir(parents=True, exist_ok=True)
        entry = _entry(folder, trace.path)
        # removed on SIGTERM or SIGHUP too (tracked from before it exists), as the finally below
        # removes it on Ctrl-C
        tmp = _claim_folder(folder, entry.name + ".tmp-")
        body = _write(tmp, trace, key)
        (tmp / _STAMP).write_text(_stamp(key))
        _put(tmp, entry)
        untrack(tmp)  # renamed into place: the entry now, never removed on a signal
        tmp = None
        _mark(trace, entry, body)
        _keep_made(trace)
        evict(folder, cap)
    except Exception:
        return
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
            untrack(tmp)


def _claim_folder(folder: Path, prefix: str) -> Path:
    """A new empty folder ``prefix`` + a random part in ``folder``, registered for removal on
    SIGTERM or SIGHUP before it is made: a signal between its making and its use (it may come
    while another thread makes it: the second trace of a diff) finds it registered."""
    for _ in range(100):
        name = folder / f"{prefix}{secrets.token_hex(6)}"
        track(name)
        try:
            name.mkdir(mode=0o700)
            return name
        except FileExistsError:  # another writer's folder: never removed
            untrack(name)
        except BaseException:
            untrack(name)
            raise
    raise FileExistsError(f"no free temporary name in {folder}")


def _put(tmp: Path, entry: Path) -> None:
    """Rename the complete entry ``tmp`` into place. An entry already there is renamed away first
    (to a name ``_scan`` knows as temporary) and then removed: a reader holding it open keeps
    reading it whole. Two writers at once: one wins, the other's rename fails and it stores nothing."""
    try:
        os.replace(tmp, entry)
        return
    except OSError:  # an entry is there (a folder is only renamed over an empty one)
        pass
    aside = entry.with_name(f"{entry.name}.tmp-old{secrets.token_hex(4)}")
    old: Path | None = aside
    with temporary(aside):  # SIGTERM or SIGHUP from here on: the old entry goes too (a miss, not a leftover)
        try:
            os.replace(entry, aside)
        except FileNotFoundError:  # another process moved it meanwhile
            old = None
        try:
            os.replace(tmp, entry)  # fails when another writer's entry got there first: theirs stays
        finally:
            if old is not None:
                shutil.rmtree(old, ignore_errors=True)


def _discard(entry: Path) -> None:
    old = entry.with_name(f"{entry.name}.tmp-bad{secrets.token_hex(4)}")
    try:
        os.replace(entry, old)
    except OSError:
        return
    shutil.rmtree(old, ignore_errors=True)


def _key(path, seen: dict) -> dict:
    import pyarrow

    return {
        "path": as_text(os.path.abspath(os.fspath(path))),  # a file name is untrusted text: stored escaped
        **seen,
        "version": __version__,
        "code": _code_digest(),
        "format": FORMAT,
        "pandas": pd.__version__,
        "pyarrow": pyarrow.__version__,
    }


def _stamp(key: dict) -> str:
    """What an entry's code version is: every part of the key but the trace's own."""
    return " ".join(str(key[k]) for k in ("version", "code", "format", "pandas", "pyarrow"))


def current_stamp() -> str | None:
    """The stamp an entry this process stores gets; None without pyarrow."""
    if not available():
        return None
    import pyarrow

    return _stamp(
        {
            "version": __version__,
            "code": _code_digest(),
            "format": FORMAT,
            "pandas": pd.__version__,
            "pyarrow": pyarrow.__version__,
        }
    )


# --------------------------------------------------------------------------
# size cap, eviction, info, clear


def max_bytes() -> int:
    """The cap on the cache folder's size, from ``$TRACEVIEW_CACHE_MAX_MB`` (MiB; default 2048)."""
    raw = os.environ.get(MAX_ENV, "").strip()
    if not raw:
        return DEFAULT_MAX_MB * 2**20
    try:
        mib = float(raw)
    except ValueError:
        mib = math.nan
    if not math.isfinite(mib) or mib < 0:
        raise TraceviewError(
            f"{MAX_ENV}={raw!r} is not a size in MiB (a number such as {DEFAULT_MAX_MB}; "
            "0 turns the cache off)"
        )
    return int(mib * 2**20)


class _Found:
    """One folder of the cache: an entry (``tmp`` False) or a half-written one."""

    __slots__ = ("path", "size", "stamp", "tmp", "used")

    def __init__(self, path: Path, tmp: bool):
        self.path, self.tmp = path, tmp
        self.size, self.stamp = 0, None
        self.used = path.stat().st_mtime_ns
        with os.scandir(path) as it:
            for f in it:
                st = f.stat(follow_symlinks=False)
                self.size += st.st_size
                self.used = max(self.used, st.st_mtime_ns) if tmp else self.used  # a writer is busy
        if not tmp:
            try:
                self.used = (path / _STAMP).stat().st_mtime_ns
                self.stamp = (path / _STAMP).read_text().strip()
            except OSError:  # written before stamps existed, or half removed: stale
                pass


def _scan(folder: Path) -> list[_Found]:
    """The cache's own folders in ``folder`` (entries and half-written ones); nothing else."""
    found = []
    with os.scandir(folder) as it:
        for d in it:
            if not d.is_dir(follow_symlinks=False):
                continue
            tmp = bool(_TMP_NAME.fullmatch(d.name))
            if not tmp and not _ENTRY_NAME.fullmatch(d.name):
                continue
            try:
                found.append(_Found(Path(d.path), tmp))
            except OSError:  # removed meanwhile by another process
                continue
    return found


def evict(folder, cap: int | None = None) -> list[Path]:
    """Trim ``folder`` to ``cap`` bytes: entries of other code versions first, then the least
    recently used; half-written entries left by a crash go too. Returns what was removed."""
    folder = Path(folder)
    cap = max_bytes() if cap is None else cap
    current = current_stamp()
    now_ns = time.time_ns()
    removed = []
    keep = []
    for f in _scan(folder):
        if f.tmp:
            if now_ns - f.used > _TMP_MAX_AGE_S * 10**9:
                removed.append(f)
        elif f.stamp != current:
            removed.append(f)
        else:
            keep.append(f)
    keep.sort(key=lambda f: (f.used, f.path.name), reverse=True)  # most recently used first
    total = 0
    for f in keep:
        total += f.size
        if total > cap:
            removed.append(f)
    for f in removed:
        shutil.rmtree(f.path, ignore_errors=True)
    return [f.path for f in removed]


def _folder(cache) -> Path:
    folder = cache_dir(cache)
    if folder is None:
        raise TraceviewError("cache=False names no cache folder")
    if folder.exists() and not folder.is_dir():
        raise TraceviewError(f"{folder}: the cache folder is not a folder (check TRACEVIEW_CACHE_DIR)")
    return folder


def info(cache=None) -> dict:
    """The cache folder and what it holds: a dict with ``folder``, ``exists``, ``entries``,
    ``writable``, ``other_versions`` (entries no current load can hit; removed at the next store),
    ``replays`` (recorded outputs of repeated commands, ``traceview.replay``), ``bytes``,
    ``size_mib``, ``max_bytes``, ``max_mib`` and ``enabled`` (pyarrow is installed, the cap is not 0
    and the folder is writable). Raises ``TraceviewError`` (one line) for a folder it cannot read or
    a bad cap."""
    folder = _folder(cache)
    cap = max_bytes()
    found = []
    if folder.is_dir():
        try:
            found = _scan(folder)
        except OSError as exc:
            raise TraceviewError(f"{folder}: cannot read the cache folder: {exc.strerror or exc}") from None
    current = current_stamp()
    entries = [f for f in found if not f.tmp]
    replays = replays_info(folder)  # the recorded outputs of repeated commands (traceview.replay)
    total = sum(f.size for f in found) + replays["bytes"]
    writable = _writable(folder)
    return {
        "folder": str(folder),
        "exists": folder.is_dir(),
        "writable": writable,
        "entries": len(entries),
        "other_versions": sum(f.stamp != current for f in entries),
        "replays": replays["records"],
        "bytes": total,
        "size_mib": round(total / 2**20, 1),
        "max_bytes": cap,
        "max_mib": round(cap / 2**20, 1),
        "enabled": available() and cap > 0 and writable,
    }


def _writable(folder: Path) -> bool:
    """Whether a store could write there: the folder, else the nearest folder above that exists."""
    for d in (folder, *folder.parents):
        if d.exists():
            return d.is_dir() and os.access(d, os.W_OK | os.X_OK)
    return False


def clear(cache=None) -> dict:
    """Remove every entry (and half-written one) and every recorded output (``traceview.replay``)
    from the cache folder, nothing else: a dict with ``folder``, ``removed`` (entries), ``replays``
    (records) and ``bytes`` freed. Raises ``TraceviewError`` (one line) when the folder cannot be
    read or an entry cannot be removed."""
    folder = _folder(cache)
    if not folder.is_dir():
        return {"folder": str(folder), "removed": 0, "replays": 0, "bytes": 0}
    try:
        found = _scan(folder)
    except OSError as exc:
        raise TraceviewError(f"{folder}: cannot read the cache folder: {exc.strerror or exc}") from None
    removed = freed = 0
    for f in found:
        try:
            shutil.rmtree(f.path)
        except FileNotFoundError:  # another process removed it first
            continue
        except OSError as exc:
            raise TraceviewError(f"{f.path}: cannot remove this cache entry: {exc.strerror or exc}") from None
        removed += not f.tmp
        freed += f.size
    replays = replays_clear(folder)
    return {
        "folder": str(folder),
        "removed": removed,
        "replays": replays["records"],
        "bytes": freed + replays["bytes"],
    }


def _enc_hook(obj):
    if isinstance(obj, np.generic):
        return obj.item()
    raise NotImplementedError(type(obj))


def _write(folder: Path, trace, key: dict) -> bytes:
    import pyarrow as pa
    import pyarrow.feather as feather

    from .model import lists_as_text

    dtypes, files = {}, {}
    for name in _TABLES:
        frame = lists_as_text(getattr(trace, name))  # ops.input_dims' lists: JSON text, parsed again by Trace
        dtypes[name] = _describe(frame)
        plain = frame.copy(deep=False)
        for col, dtype in frame.dtypes.items():  # categoricals as their codes; categories in entry.json
            if isinstance(dtype, pd.CategoricalDtype):
                plain[col] = frame[col].cat.codes.to_numpy()
        table = pa.Table.from_pandas(plain, preserve_index=None)
        feather.write_feather(table, folder / f"{name}.arrow", compression="uncompressed")
        files[name] = _file_sum(folder / f"{name}.arrow")  # what is on disk, read back in bounded memory
        files[name]["rows"] = len(frame)  # a deferred table's length before it is read (Trace's repr)
    info = {
        "key": key,
        "meta": trace.meta,
        "warnings": [as_text(w) for w in trace.warnings],  # they may quote a name that is not UTF-8
        "stats": trace.stats,
        "dtypes": dtypes,
        "files": files,
    }
    body = msgspec.json.encode(info, enc_hook=_enc_hook)
    (folder / "entry.json").write_bytes(_sum_line(body) + body)
    return body


# Checksums are CRC-32: they guard against damage (a flipped bit, a cut file), not against an
# attacker, who could write a matching checksum of any strength into the user's own cache
# folder. CRC-32 catches every burst of up to 32 flipped bits and every one- or two-bit error
# in files under 512 MiB, else misses one damage in 2**32; it hashes ~3 GB/s here where SHA-256
# does ~1.4 GB/s (with SHA instructions; ~0.4 without): +9% on a cached load instead of +20%.


def _file_sum(path: Path) -> dict:
    crc, size = 0, 0
    with open(path, "rb") as fh:
        while chunk := fh.read(_CHUNK):
            crc = _crc(chunk, crc)
            size += len(chunk)
    return {"size": size, "crc32": crc}


class _RunningCrc:
    """The CRC-32 of a file's pieces in order, each worked out on ``pool``'s one thread as soon as
    it is read (the pool runs its tasks in the order given), so that a file's checksum is ready
    about when its last piece is."""

    def __init__(self, pool):
        self.pool, self.value, self.steps = pool, 0, []

    def add(self, piece: memoryview) -> None:
        self.steps.append(self.pool.submit(self._step, piece))

    def _step(self, piece: memoryview) -> None:
        self.value = _crc(piece, self.value)

    def result(self) -> int:
        for step in self.steps:
            step.result()
        return self.value


def _describe(frame: pd.DataFrame) -> dict:
    """What Parquet may not bring back by itself: the exact dtype of each column."""
    out = {}
    for col, dtype in frame.dtypes.items():
        d: dict[str, object] = {"dtype": str(dtype)}
        if isinstance(dtype, pd.CategoricalDtype):
            d["categories_dtype"] = str(dtype.categories.dtype)
            d["categories"] = dtype.categories.tolist()
            d["ordered"] = bool(dtype.ordered)
        out[str(col)] = d
    return {"columns": [str(c) for c in frame.columns], "dtypes": out, "index": str(frame.index.dtype)}


def _read(d: _Folder, info: dict, path, deferred: _DeferredTables) -> object:
    from .model import Trace, lists_parsed

    frames = _tables(d, info, deferred)
    if isinstance(frames["ops"], Deferred):  # made as a Trace's ops are: its list args parsed
        ops = frames["ops"]
        frames["ops"] = Deferred(functools.partial(_made_with, ops, lists_parsed), ops.length)
    try:
        return Trace(
            path=os.fspath(path),
            events=frames["events"],
            kernels=frames["kernels"],
            ops=frames["ops"],
            steps=frames["steps"],
            meta=info["meta"],
            warnings=info["warnings"],
            stats=info["stats"],
            memory=frames["memory"],
        )
    except Exception as exc:
        raise _Damaged(f"entry.json: {type(exc).__name__}") from None


def _tables(d: _Folder, info: dict, deferred: _DeferredTables) -> dict:
    """The entry's tables, in order, each read into a frame once its file's checksum matches; each
    file's checksum is worked out on a thread (zlib lets go of the GIL) piece by piece as it is
    read, the next file read meanwhile. Those of ``_DEFERRED``: a ``Deferred`` that reads, checks
    and makes the table when it is first used (``_DeferredTables``)."""
    from concurrent.futures import ThreadPoolExecutor

    frames: dict = {name: deferred.deferred(d, name, info) for name in _DEFERRED}
    now = [name for name in _TABLES if name not in frames]
    with ThreadPoolExecutor(max_workers=1) as pool:

        def start(name: str):
            # read, not mapped: the bytes checked are the bytes used, and a file cut or rewritten in
            # place by another program afterwards cannot fault a frame still built on its pages
            crc = _RunningCrc(pool)
            return d.read(f"{name}.arrow", info["files"][name]["size"], crc.add), crc

        ahead = start(now[0])
        for i, name in enumerate(now):
            data, crc = ahead
            if crc.result() != info["files"][name]["crc32"]:
                raise _Damaged(f"{name}.arrow does not match its checksum")
            if i + 1 < len(now):
                ahead = start(now[i + 1])
            frames[name] = _table(name, data, info)
    return frames


def _made_with(deferred: Deferred, then):
    return then(deferred.value())


#: tables a cache hit reads only when they are used: what the analyses of a warm summary ask of
#: them is kept in the entry (``derived_frame``, ``derived_value``, the stats), and the ops and GPU
#: activities of a region are cut only when used (``analyses.select.region``); a warm diff reads
#: the kernels table, neither of the others
_DEFERRED = ("events", "ops", "kernels")


#: how many deferred tables' files may be open at once (three a trace), well within the usual limit
#: of 1,024 descriptors; past it a hit reads its tables at once
_HELD_FILES = threading.BoundedSemaphore(256)


class _HeldFile:
    """An open file held for a deferred table, its place in ``_HELD_FILES`` given back once closed:
    after the table is read, or when the Trace goes unread."""

    def __init__(self, fh):
        self.fh, self._open = fh, True

    def close(self) -> None:
        if self._open:
            self._open = False
            self.fh.close()
            _HELD_FILES.release()

    def __del__(self):
        # at interpreter exit this module may be half torn down (contextlib gone): nothing to give back
        try:  # noqa: SIM105
            self.close()
        except Exception:
            pass


class _DeferredTables:
    """The deferred tables of the entry at ``entry``. Each file is opened with the entry, so it reads
    as it was then whatever a store does to the entry meanwhile; it is read and checked, as every
    table is, when first used. Where that fails (the file damaged in place since), the entry goes
    (the next load writes a new one), this run's output is not replayed, and ``rebuild(name,
    note)`` (the loader's: the table from the trace itself, the note said) gives the table."""

    def __init__(self, entry: Path, path, rebuild):
        self.entry, self.path, self.rebuild = entry, path, rebuild

    def deferred(self, d: _Folder, name: str, info: dict):
        """A ``Deferred`` of the table ``name``; the table itself, read now as every other one is,
        where ``_HELD_FILES`` files are held open already (a process holding hundreds of traces)."""
        if not _HELD_FILES.acquire(blocking=False):
            return _checked_table(name, d.read(f"{name}.arrow", info["files"][name]["size"]), info)
        try:
            held = _HeldFile(d.open(f"{name}.arrow"))
        except BaseException:
            _HELD_FILES.release()
            raise
        rows = info["files"][name].get("rows")  # absent from an entry stored before it was kept
        known = rows if type(rows) is int and rows >= 0 else None
        return Deferred(functools.partial(self._later, name, info, held), known)

    def _later(self, name: str, info: dict, held: _HeldFile) -> pd.DataFrame:
        try:
            return _checked_table(name, _whole(held.fh, f"{name}.arrow", info["files"][name]["size"]), info)
        except (_Damaged, OSError) as exc:
            if self.rebuild is None:
                raise
            why = str(exc) if isinstance(exc, _Damaged) else f"{name}.arrow: {type(exc).__name__}"
        finally:
            held.close()
        _discard(self.entry)
        spoil("a cache entry was rebuilt")
        note = f"{self.path}: its cache entry failed verification ({why}); rebuilt from the trace"
        return self.rebuild(name, note)


def _checked_table(name: str, data, info: dict) -> pd.DataFrame:
    if _crc(data) != info["files"][name]["crc32"]:
        raise _Damaged(f"{name}.arrow does not match its checksum")
    return _table(name, data, info)


def _table(name: str, data, info: dict) -> pd.DataFrame:
    """The frame of the entry's table ``name`` from its file's verified bytes."""
    import pyarrow as pa
    import pyarrow.feather as feather

    try:  # verified bytes that still do not read back: this entry is no good either
        frame = feather.read_table(pa.BufferReader(pa.py_buffer(data))).to_pandas()
        return _restore(frame, info["dtypes"][name])
    except MemoryError:
        raise
    except Exception as exc:
        raise _Damaged(f"{name}.arrow: {type(exc).__name__}") from None


def _restore(frame: pd.DataFrame, spec: dict) -> pd.DataFrame:
    if [str(c) for c in frame.columns] != spec["columns"]:
        raise ValueError("columns differ")
    for col in frame.columns:
        want = spec["dtypes"][str(col)]
        have = frame[col].dtype
        if "categories" in want:
            cats = pd.Index(want["categories"], dtype=want["categories_dtype"])
            dtype = pd.CategoricalDtype(cats, ordered=want["ordered"])
            frame[col] = pd.Categorical.from_codes(frame[col].to_numpy(), dtype=dtype, validate=False)
        elif str(have) != want["dtype"]:
            frame[col] = frame[col].astype(want["dtype"])
    if str(frame.index.dtype) != spec["index"]:
        frame.index = frame.index.astype(spec["index"])
    return frame


# ------------------------------------------------------------------ tables derived from a trace

# A cached trace also keeps the tables the analyses work out from it alone (``derived_frame``:
# op_work, ...): a warm diff or summary reads them instead of working them out again. Each is
# two files in the trace's entry, named by a digest of the entry's ``entry.json`` (``_mark``):
# ``derived-<token>-<name>.arrow`` and its ``.json`` (dtypes, size and CRC-32, its own checksum
# line). A table is only ever read for the entry it was made from: a new entry for the path (the
# trace changed, another traceview) is a new folder with another token, and the old folder's
# files go with it. Written after the entry (tmp + rename, the .json last), counted in its size.

_MADE_KEY = "derived_made"  # in Trace.derived: name -> table worked out while it had no entry
_ENTRY_KEY = "cache_entry"  # in Trace.derived: (entry folder, token) of the entry this trace is


def _mark(trace, entry: Path, body: bytes) -> None:
    """Note on ``trace`` which entry it was stored as or read from (its derived tables go there)."""
    with contextlib.suppress(Exception):
        trace.derived[_ENTRY_KEY] = (str(entry), hashlib.sha256(body).hexdigest()[:32])


#: per-trace tables and values the link layer works out and holds in Trace.derived under these
#: names (``launches.launches`` and ``launches.completeness``, which a load asks for its warning):
#: written into the entry when the trace is stored, and handed to a Trace made from a cache hit
#: (``entry_mark``): the values read, the tables a ``Deferred`` read when first used
_LINK_TABLES = ("launches",)
_LINK_VALUES = ("completeness",)


def _keep_made(trace) -> None:
    """Write into the entry ``trace`` was just stored as the derived tables worked out before it had
    one (``derived_frame`` of a trace not stored yet, and the link layer's ``_LINK_TABLES`` and
    ``_LINK_VALUES``)."""
    where = trace.derived.get(_ENTRY_KEY)
    made = trace.derived.pop(_MADE_KEY, {})
    if where is None:
        return
    for name in _LINK_TABLES:
        if isinstance(trace.derived.get(name), pd.DataFrame):
            made[name] = trace.derived[name]
    for name, frame in made.items():
        with contextlib.suppress(Exception):  # a failure to write never fails the load
            _write_derived(Path(where[0]), f"derived-{where[1]}-{name}", frame)
    for name in _LINK_VALUES:
        if name in trace.derived:
            _write_value(Path(where[0]), f"derived-{where[1]}-value-{name}", trace.derived[name])


def entry_mark(trace) -> dict:
    """The ``derived`` a Trace made from the cache hit ``trace`` starts with: which entry it was
    read from (so that its derived tables are read from there), the link layer's tables and values
    the entry keeps (``_LINK_TABLES``: a ``Deferred`` of the table, None where the entry has none;
    ``_LINK_VALUES``), and no table worked out."""
    where = trace.derived.get(_ENTRY_KEY)
    if where is None:
        return {}
    out: dict = {_ENTRY_KEY: where}
    for name in _LINK_TABLES:
        out[name] = Deferred(functools.partial(_kept_frame, Path(where[0]), f"derived-{where[1]}-{name}"))
    for name in _LINK_VALUES:
        with contextlib.suppress(Exception), _Folder(Path(where[0])) as d:  # missing, damaged: made again
            out[name] = _read_value(d, f"derived-{where[1]}-value-{name}")
    return out


def derived_frame(trace, name: str, make) -> pd.DataFrame:
    """``make(trace)``: read from the trace's cache entry when it holds that table, else worked
    out and written there (a trace loaded without the cache: just worked out, and written if the
    trace is stored after). ``make`` must be a function of the trace alone, its columns of plain
    dtypes (numbers, bool, nullable numbers and bool, text or None, categoricals)."""
    where = trace.derived.get(_ENTRY_KEY)
    if where is None:
        frame = trace.derived.setdefault(_MADE_KEY, {})[name] = make(trace)
        return frame
    entry, token = Path(where[0]), where[1]
    stem = f"derived-{token}-{name}"
    kept = _kept_frame(entry, stem)
    if kept is not None:
        return kept
    frame = make(trace)
    with contextlib.suppress(Exception):  # a failure to write never fails the analysis
        _write_derived(entry, stem, frame)
    return frame


def derived_value(trace, name: str, make):
    """``derived_frame`` for a small value of plain data (``plain``: numbers, text, None and their
    containers), kept as one JSON file ``derived-<token>-value-<name>.json`` (its own checksum line) in
    the trace's cache entry; a trace without an entry: ``make(trace)``, nothing kept. A value that is
    not plain data is worked out every time, never kept."""
    where = trace.derived.get(_ENTRY_KEY)
    if where is None:
        return make(trace)
    entry, stem = Path(where[0]), f"derived-{where[1]}-value-{name}"
    with contextlib.suppress(Exception), _Folder(entry) as d:  # missing, half-written, damaged: made again
        return _read_value(d, stem)
    value = make(trace)
    _write_value(entry, stem, value)
    return value


def _read_value(d: _Folder, stem: str):
    return plain_decode(_verified_info(d.read(stem + ".json"))["value"])


def _write_value(entry: Path, stem: str, value) -> None:
    """``value`` as ``<stem>.json`` in ``entry`` (tmp + rename); not plain data, or a failure to
    write: nothing written."""
    with contextlib.suppress(Exception):
        body = msgspec.json.encode({"value": plain_encode(value)})
        if available() and entry.is_dir():
            _write_json(entry, stem, body)


def _kept_frame(entry: Path, stem: str) -> pd.DataFrame | None:
    """The table ``stem`` kept in ``entry``; None where it is missing, half-written or damaged."""
    with contextlib.suppress(Exception):
        with _Folder(entry) as d:
            spec = _verified_info(d.read(stem + ".json"))
            data = d.read(stem + ".arrow", spec["size"])
        if _crc(data) == spec["crc32"]:
            return _derived_frame(data, spec)
    return None


def _derived_frame(data: bytearray, spec: dict) -> pd.DataFrame:
    import pyarrow as pa
    import pyarrow.feather as feather

    table = feather.read_table(pa.BufferReader(pa.py_buffer(data)))
    # an object column's ints come back through pandas' nullable types (no float64 on the way:
    # exact beyond 2**53); every other column as its Arrow schema's pandas metadata says (Int64
    # and boolean there already), not read as nullable and cast back (half the time of op_work)
    nullable = {pa.int64(): pd.Int64Dtype(), pa.bool_(): pd.BooleanDtype()}
    frame = _restore(table.to_pandas(types_mapper=nullable.get if spec["none"] else None), spec["dtypes"])
    for col in spec["none"]:  # text columns whose missing values were None, as they were made
        frame[col] = frame[col].astype(object).where(frame[col].notna(), None)
    return frame


def _write_derived(entry: Path, stem: str, frame: pd.DataFrame) -> None:
    import pyarrow as pa
    import pyarrow.feather as feather

    if not available() or not entry.is_dir():
        return
    none = [str(c) for c, t in frame.dtypes.items() if pd.api.types.is_object_dtype(t)]
    tmp = entry / f"{stem}.tmp-{secrets.token_hex(4)}"
    try:
        with temporary(tmp):
            plain = frame.copy(deep=False)
            for col, dtype in frame.dtypes.items():  # categoricals as their codes, as _write does
                if isinstance(dtype, pd.CategoricalDtype):
                    plain[col] = frame[col].cat.codes.to_numpy()
            table = pa.Table.from_pandas(plain, preserve_index=None)
            feather.write_feather(table, tmp, compression="uncompressed")
            spec = {"dtypes": _describe(frame), "none": none, **_file_sum(tmp)}
            os.replace(tmp, entry / f"{stem}.arrow")
    finally:  # a write that failed half way leaves nothing behind
        with contextlib.suppress(OSError):
            tmp.unlink()
    _write_json(entry, stem, msgspec.json.encode(spec, enc_hook=_enc_hook))
