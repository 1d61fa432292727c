"""Bytes -> raw event columns.

The first stage of the pipeline: open a trace file (plain or gzip, detected by
magic bytes), decode its JSON with msgspec into typed structs that hold only
the fields traceview uses, and hand back plain column arrays plus the
trace-level metadata. Everything a user can get wrong here raises
``TraceReadError`` with a one-line message.
"""
from __future__ import annotations

import os
import re
import zlib
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any

import msgspec
import numpy as np

from .errors import TraceReadError
from .limits import memory_cap, memory_problem
from .salvage import gzip_cut
from .numbers import FLOAT_EXACT_LIMIT_US, MISSING, float_us_to_ns, us_to_ns

GZIP_MAGIC = b"\x1f\x8b"
DEFAULT_MAX_BYTES = 16 * 2**30  # decompressed-size cap; a gzip bomb stops here
_READ_CHUNK = 1 << 22


# gc=False: these structs never hold cycles, and untracked objects make the
# collector skip millions of them (3-4x faster decode of large traces).
class Args(msgspec.Struct, omit_defaults=True, gc=False):
    correlation: int | None = None
    external_id: int | None = msgspec.field(default=None, name="External id")
    external_id_2021: int | None = msgspec.field(default=None, name="external id")
    device: int | str | None = None
    stream: int | str | None = None
    bytes: Any = None
    name: Any = None
    input_dims: msgspec.Raw = msgspec.field(default=msgspec.Raw(b""), name="Input Dims")


class Event(msgspec.Struct, gc=False):
    ph: str = ""
    cat: str | None = None
    name: Any = None
    pid: int | str | None = None
    tid: int | str | None = None
    ts: int | float | str | None = None  # a str is re-read from the JSON text ("12.5" works)
    dur: int | float | str | None = None
    id: int | str | None = None
    bp: str | None = None
    args: Args | None = None


class _ExactTs(msgspec.Struct):
    ts: msgspec.Raw = msgspec.Raw(b"")


@dataclass
class RawTrace:
    """What the reader hands to the model: columns of the decoded events."""

    path: str
    meta: dict
    columns: dict
    n_events: int
    warnings: list = field(default_factory=list)


def read(path, *, max_bytes: int = DEFAULT_MAX_BYTES, salvage: bool = False) -> RawTrace:
    """Read and decode one trace file into raw columns."""
    path = os.fspath(path)
    data = read_bytes(path, max_bytes=max_bytes, salvage=salvage)
    warnings: list[str] = []
    if salvage:
        from .salvage import salvage_prefix

        data, note = salvage_prefix(data, path)
        if note:
            warnings.append(note)
    meta, events_raw = split_document(data, path)
    del data  # events_raw keeps the text alive only until the columns are built
    columns, n_events, dropped = event_columns(events_raw, path)
    del events_raw
    if dropped and not n_events:  # e.g. [1, 2, 3]: JSON, but not one event object in it
        raise TraceReadError(path, f"not a trace: none of the {dropped} items in traceEvents is an event object")
    if dropped:
        warnings.append(f"{path}: skipped {dropped} malformed event(s)")
    return RawTrace(path=path, meta=meta, columns=columns, n_events=n_events, warnings=warnings)


def read_bytes(path: str, *, max_bytes: int = DEFAULT_MAX_BYTES, salvage: bool = False) -> bytes:
    """The file's JSON text, decompressed if it is gzip whatever its suffix."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(2)
            fh.seek(0)
            if head == GZIP_MAGIC:
                return _gunzip(fh, path, max_bytes, salvage)
            size = os.fstat(fh.fileno()).st_size
            _check_size(path, size, max_bytes)
            data = fh.read() if size else _read_capped(fh, max_bytes)  # read(n) allocates n bytes up front
    except FileNotFoundError:
        raise TraceReadError(path, "no such file") from None
    except IsADirectoryError:
        raise TraceReadError(path, "is a directory, not a trace file") from None
    except PermissionError:
        raise TraceReadError(path, "permission denied") from None
    except OSError as exc:
        raise TraceReadError(path, f"cannot read: {exc.strerror or exc}") from None
    if len(data) > max_bytes:
        raise TraceReadError(path, f"larger than the {_human(max_bytes)} limit (raise max_bytes / --max-size)")
    if not data.strip():
        raise TraceReadError(path, "empty file")
    return data


def _read_capped(fh, max_bytes: int) -> bytes:
    """A pipe or special file (no size known): read in chunks, stop past the cap."""
    chunks, total = [], 0
    while total <= max_bytes and (chunk := fh.read(_READ_CHUNK)):
        chunks.append(chunk)
        total += len(chunk)
    return b"".join(chunks)


def _check_size(path: str, size: int, max_bytes: int) -> None:
    """Refuse before reading a file over the cap or too large for available memory."""
    if size > max_bytes:
        raise TraceReadError(path, f"larger than the {_human(max_bytes)} limit (raise max_bytes / --max-size)")
    cap = memory_cap()
    if cap is not None and size > cap:
        raise TraceReadError(path, memory_problem(size))


def _gunzip(fh, path: str, max_bytes: int, salvage: bool) -> bytes:
    mem_cap = memory_cap()
    cap = max_bytes if mem_cap is None else min(max_bytes, mem_cap)
    out = bytearray()
    decomp = zlib.decompressobj(wbits=31)
    consumed = 0
    while True:
        chunk = fh.read(_READ_CHUNK)
        if not chunk:
            break
        while chunk:
            try:
                out += decomp.decompress(chunk, cap + 1 - len(out))
            except zlib.error:
                if salvage and out:
                    return gzip_cut(out, consumed, "corrupt")
                raise TraceReadError(path, f"corrupt gzip data near compressed byte {consumed}") from None
            if len(out) > max_bytes:
                raise TraceReadError(
                    path, f"decompresses to more than the {_human(max_bytes)} limit (raise max_bytes / --max-size)")
            if len(out) > cap:
                raise TraceReadError(path, memory_problem(len(out), at_least=True))
            consumed += len(chunk) - len(decomp.unconsumed_tail)
            chunk = decomp.unconsumed_tail
            if decomp.eof:  # concatenated gzip members are legal
                chunk = (decomp.unused_data + chunk).lstrip(b"\0")  # zero padding after a member is legal
                while not chunk:
                    chunk = fh.read(_READ_CHUNK)
                    if not chunk:
                        break
                    chunk = chunk.lstrip(b"\0")
                if not chunk:
                    break  # end of file: the empty-text check below still applies
                decomp = zlib.decompressobj(wbits=31)
    if not decomp.eof:
        if salvage and out:
            return gzip_cut(out, consumed, "cut")
        raise TraceReadError(path, f"truncated gzip file (compressed stream ends at byte {consumed}; "
                                   "try --salvage)")
    if not out.strip():
        raise TraceReadError(path, "empty file (gzip holds no data)")
    return bytes(out)


def split_document(data: bytes, path: str) -> tuple[dict, msgspec.Raw]:
    """Top-level metadata (decoded) and the raw ``traceEvents`` array."""
    start = data.lstrip()[:1]
    if start == b"[":  # legacy Chrome format: a bare array of events
        return {}, msgspec.Raw(data)
    if start != b"{":
        raise TraceReadError(path, f"not JSON: starts with {data.lstrip()[:12]!r}")
    try:
        top = msgspec.json.decode(data, type=dict[str, msgspec.Raw])
    except msgspec.DecodeError as exc:
        raise TraceReadError(path, _json_problem(exc, len(data))) from None
    except msgspec.ValidationError as exc:
        raise TraceReadError(path, f"not a trace: {exc}") from None
    except RecursionError:
        raise TraceReadError(path, _TOO_DEEP) from None
    if "traceEvents" not in top:
        keys = ", ".join(list(top)[:6]) or "none"
        raise TraceReadError(path, f"JSON is not a trace: no traceEvents key (top-level keys: {keys})")
    events_raw = top.pop("traceEvents")
    meta = {}
    for key, raw in top.items():
        try:
            meta[key] = _META_DECODER.decode(raw)
        except (msgspec.DecodeError, msgspec.ValidationError, RecursionError) as exc:
            problem = _TOO_DEEP if isinstance(exc, RecursionError) else str(exc).replace("\n", " ")
            raise TraceReadError(path, f"metadata key {key[:60]!r}: {problem}") from None
    return meta, events_raw


_TOO_DEEP = "JSON nested too deeply to decode (thousands of levels; not a trace)"
_META_DECODER = msgspec.json.Decoder(float_hook=float)  # 1e400 -> inf rather than an error


def _ends_mid_token(text: str, size: int) -> bool:
    """msgspec calls a cut inside a number ("12.", "1e", "-") invalid, at the byte where the text ends."""
    at = text.rfind("(byte ")
    return at >= 0 and "trailing" not in text and text[at + 6:].rstrip(")").isdigit() \
        and int(text[at + 6:].rstrip(")")) >= size


def _json_problem(exc: Exception, size: int) -> str:
    text = str(exc)
    if "truncated" in text.lower() or _ends_mid_token(text, size):
        return f"truncated JSON: the text ends at byte {size} in the middle of the document (try --salvage)"
    return f"not valid JSON: {text}"


def raw_items(events_raw, path: str) -> list:
    """The events array as a list of undecoded items; a JSON problem is a TraceReadError."""
    try:
        return msgspec.json.decode(events_raw, type=list[msgspec.Raw])
    except msgspec.ValidationError:
        raise TraceReadError(path, "not a trace: traceEvents is not a list") from None
    except msgspec.DecodeError as exc:
        raise TraceReadError(path, _json_problem(exc, len(events_raw))) from None
    except RecursionError:
        raise TraceReadError(path, _TOO_DEEP) from None


def decode_events(events_raw, path: str) -> tuple[list[Event], int, np.ndarray | None]:
    """Typed decode; on a type error fall back to event-by-event and count drops."""
    try:
        return msgspec.json.decode(events_raw, type=list[Event]), 0, None
    except (msgspec.ValidationError, msgspec.DecodeError, RecursionError):
        pass  # e.g. invalid UTF-8 in one event's string: drop that event, not the trace
    items = raw_items(events_raw, path)
    decoder = msgspec.json.Decoder(Event)
    events, dropped = [], 0
    kept = np.ones(len(items), dtype=bool)
    for item in items:
        try:
            events.append(decoder.decode(item))
        except (msgspec.ValidationError, msgspec.DecodeError, RecursionError):
            kept[len(events) + dropped] = False
            dropped += 1
    return events, dropped, kept


_CHUNK_EVENTS = 1 << 17  # events decoded to Python objects at a time (bounds their memory)
_CHUNK_BYTES = 1 << 25  # ... or bytes of event text at a time (about 100k events)
_INT_ARGS = ("correlation", "external_id", "external_id_2021", "device", "stream", "bytes")
_TYPED_INTS = ("correlation", "external_id", "external_id_2021")  # Args declares them int | None


@dataclass
class Codes:
    """A factorized column: int64 ``codes`` (-1 = missing) into ``uniques``, which are
    the distinct raw values in order of first appearance (what ``pd.factorize`` gives)."""

    codes: np.ndarray
    uniques: list

    def __len__(self) -> int:
        return len(self.codes)

    def take(self, rows) -> "Codes":
        """The rows' values, uniques again in order of first appearance among them."""
        codes = self.codes[np.asarray(rows, dtype=np.int64)]
        present = codes[codes >= 0]
        if not len(present):
            return Codes(np.full(len(codes), -1, dtype=np.int64), [])
        used, first = np.unique(present, return_index=True)
        used = used[np.argsort(first, kind="stable")]
        remap = np.full(len(self.uniques), -1, dtype=np.int64)
        remap[used] = np.arange(len(used))
        return Codes(np.where(codes >= 0, remap[np.clip(codes, 0, None)], -1),
                     [self.uniques[i] for i in used])


@dataclass
class IntColumn:
    """Integer values with a mask of the rows that held no int (None, strings, junk)."""

    values: np.ndarray
    mask: np.ndarray


class _Factorizer:
    """Factorizes a column chunk by chunk against one growing table of distinct values."""

    def __init__(self, empty_is_missing: bool = False):
        self.index: dict = {}
        self.parts: list = []
        self.empty_is_missing = empty_is_missing

    def add(self, values: list) -> None:
        if not values:
            return
        import pandas as pd

        arr = None
        if type(values[0]) is int:  # pids, tids, flow ids: hash machine ints, not objects
            try:
                ints = np.array(values)
            except (OverflowError, ValueError):
                ints = None
            if ints is not None and ints.dtype == np.int64 and ints.ndim == 1:
                codes, uniq = pd.factorize(ints, use_na_sentinel=True)
                uniq = uniq.tolist()
                arr = ints
        if arr is None:
            arr = np.fromiter(values, dtype=object, count=len(values))
        try:
            if arr.dtype == object:
                codes, uniq = pd.factorize(arr, use_na_sentinel=True)
        except TypeError:  # unhashable values (a list as a name): their text stands for them
            arr = np.fromiter((v if v is None or isinstance(v, (str, int, float, bytes)) else str(v)
                               for v in values), dtype=object, count=len(values))
            codes, uniq = pd.factorize(arr, use_na_sentinel=True)
        index, skip = self.index, self.empty_is_missing
        glob = np.array([-1 if skip and not len(u) else index.setdefault(u, len(index)) for u in uniq]
                        + [-1], dtype=np.int64)
        self.parts.append(glob[codes])  # code -1 picks the trailing -1

    def add_codes(self, codes: np.ndarray, uniques: list) -> None:
        """Append another factorizer's finished part (codes into its own ``uniques``,
        first-appearance order): the same as having ``add``-ed its values here."""
        index = self.index
        glob = np.array([index.setdefault(u, len(index)) for u in uniques] + [-1], dtype=np.int64)
        self.parts.append(glob[codes])  # code -1 picks the trailing -1

    def finish(self) -> Codes:
        codes = np.concatenate(self.parts) if self.parts else np.empty(0, dtype=np.int64)
        return Codes(codes, list(self.index))


def int_values(values: list, *, ints_or_none: bool = False) -> IntColumn:
    """Python ints (others -> masked) as int64 values + mask, without a Python-level loop.

    ``ints_or_none``: the decoder guarantees every value is an int or None (a field
    typed ``int | None``), which allows a faster path."""
    n = len(values)
    if not n:
        return IntColumn(np.empty(0, dtype=np.int64), np.empty(0, dtype=bool))
    if ints_or_none:
        arr = np.fromiter(values, dtype=object, count=n)
        missing = arr == None  # noqa: E711  (elementwise)
        out = np.zeros(n, dtype=np.int64)
        try:
            out[~missing] = arr[~missing].astype(np.int64)
            return IntColumn(out, missing)
        except OverflowError:
            pass
    try:
        arr = np.array(values)
    except (OverflowError, ValueError):
        arr = np.fromiter(values, dtype=object, count=n)
    if arr.dtype == np.int64 and type(values[0]) is int:
        return IntColumn(arr, np.zeros(n, dtype=bool))
    if arr.dtype != object or arr.ndim != 1:
        arr = np.fromiter(values, dtype=object, count=n)
    ok = np.fromiter(map(type, values), dtype=object, count=n) == int
    out = np.zeros(n, dtype=np.int64)
    if ok.any():
        try:
            out[ok] = arr[ok].astype(np.int64)
        except OverflowError:  # ints beyond int64 are not ids we can hold
            fits = np.fromiter((type(v) is int and -2**63 <= v < 2**63 for v in values), dtype=bool, count=n)
            ok &= fits
            out[ok] = arr[ok].astype(np.int64)
    return IntColumn(out, ~ok)


def event_chunks(events_raw, path: str, size: int = _CHUNK_BYTES):
    """The traceEvents array as JSON arrays of about ``size`` bytes each, so that only
    one chunk's worth of decoded Python objects exists at a time.

    Cuts are placed at the first ``},{`` (any whitespace) after each multiple of
    ``size``. A cut that is not between two events (inside a string or a nested
    object) leaves a chunk that is not valid JSON; ``event_columns`` then starts
    over with ``checked_event_chunks``.
    """
    if len(events_raw) <= size:
        yield events_raw
        return
    text = memoryview(events_raw)
    for lo, hi, head, tail in chunk_bounds(events_raw, size):
        yield b"".join((head, text[lo:hi], tail))


def chunk_bounds(events_raw, size: int = _CHUNK_BYTES) -> list:
    """Where ``event_chunks`` cuts: (start, stop, head, tail) per chunk, the chunk being
    ``head + events_raw[start:stop] + tail`` (so that workers can build it themselves)."""
    n = len(events_raw)
    text = memoryview(events_raw)
    bounds = []
    start, pos = 0, size
    while pos < n:
        m = _BETWEEN.search(text, pos)
        if m is None:
            break
        bounds.append((start, m.start() + 1, b"[" if start else b"", b"]"))
        start = m.end() - 1
        pos = start + size
    bounds.append((start, n, b"[" if start else b"", b""))
    return bounds


_BETWEEN = re.compile(rb"\}\s*,\s*\{")


def checked_event_chunks(events_raw, path: str, size: int = _CHUNK_EVENTS):
    """Like ``event_chunks``, but at most ``size`` events a chunk, found by one full
    parse (events as ``msgspec.Raw``) that also checks the JSON: the safe path."""
    items = raw_items(events_raw, path)
    n = len(items)
    if n <= size:
        del items
        yield events_raw
        return
    base = _address(events_raw)
    bounds = []
    for lo in range(0, n, size):
        last = items[min(lo + size, n) - 1]
        bounds.append((_address(items[lo]) - base, _address(last) - base + len(last)))
    del items
    text = memoryview(events_raw)
    for lo, hi in bounds:
        yield b"".join((b"[", text[lo:hi], b"]"))


def _address(buf) -> int:
    return np.frombuffer(buf, dtype=np.uint8).ctypes.data


def event_columns(events_raw, path: str, *, checked: bool = False) -> tuple[dict, int, int]:
    """Columns of the duration (X) events and the flow events, phase counts; number of
    events kept and dropped. String-like fields come back factorized (``Codes``),
    integer args as ``IntColumn``, times as int64 ns arrays."""
    import gc

    counts, fx, ff, parts = _accumulators()
    n_events = dropped = 0
    was_enabled = gc.isenabled()
    gc.disable()  # millions of short-lived containers: collections would only rescan them
    try:
        if not checked:
            from . import parallel

            got = parallel.event_columns(events_raw, path)  # None: not worth it here, or the pool failed
            if got is parallel.RECHECK:
                return event_columns(events_raw, path, checked=True)
            if got is not None:
                return got
        for chunk in (checked_event_chunks if checked else event_chunks)(events_raw, path):
            try:
                events, lost, kept = decode_events(chunk, path)
            except TraceReadError:
                if checked or len(chunk) == len(events_raw):
                    raise
                # a cut fell inside an event, or the JSON is bad: parse it all properly
                return event_columns(events_raw, path, checked=True)
            n_events += len(events)
            dropped += lost
            _chunk_columns(events, _Exact(chunk, kept), counts, fx, ff, parts)
            del events
    finally:
        if was_enabled:
            gc.enable()
    return _finish(counts, fx, ff, parts), n_events, dropped


def _accumulators() -> tuple:
    """Empty (counts, string factorizers, flow factorizers, array parts) for ``_chunk_columns``."""
    from collections import Counter

    counts: Counter = Counter()
    fx = {name: _Factorizer() for name in ("cat", "name", "pid", "tid")}
    fx["arg_input_dims"] = _Factorizer(empty_is_missing=True)
    ff = {name: _Factorizer() for name in ("ph", "cat", "id", "pid", "tid")}
    parts: dict[str, list] = {key: [] for key in ("ts_ns", "dur_ns", "flow_ts_ns", *("arg_" + a for a in _INT_ARGS))}
    return counts, fx, ff, parts


def join_parts(parts: dict) -> dict:
    """Each key's per-chunk arrays (or ``IntColumn``s, for the ``arg_`` keys) as one."""
    out = {}
    for key, got in parts.items():
        if key.startswith("arg_"):
            out[key] = IntColumn(np.concatenate([g.values for g in got]) if got else np.empty(0, np.int64),
                                 np.concatenate([g.mask for g in got]) if got else np.empty(0, bool))
        else:
            out[key] = np.concatenate(got) if got else np.empty(0, dtype=np.int64)
    return out


def _finish(counts, fx: dict, ff: dict, parts: dict) -> dict:
    joined = join_parts(parts)
    cols: dict[str, Any] = {"counts": {k: counts[k] for k in sorted(counts)}}
    cols.update({name: f.finish() for name, f in fx.items()})
    cols.update({key: value for key, value in joined.items() if key != "flow_ts_ns"})
    cols["flows"] = {name: f.finish() for name, f in ff.items()}
    cols["flows"]["ts_ns"] = joined["flow_ts_ns"]
    return cols


def _chunk_columns(events: list, exact: "_Exact", counts, fx: dict, ff: dict, parts: dict) -> None:
    phases = list(map(attrgetter("ph"), events))
    counts.update(phases)
    ph = np.fromiter(phases, dtype=object, count=len(phases))
    ts_all = _times(list(map(attrgetter("ts"), events)), exact, "ts")
    x = np.flatnonzero(ph == "X")
    xs = events if len(x) == len(events) else list(map(events.__getitem__, x.tolist()))
    for name in ("cat", "name", "pid", "tid"):
        fx[name].add(list(map(attrgetter(name), xs)))
    parts["ts_ns"].append(ts_all[x])
    parts["dur_ns"].append(_times(list(map(attrgetter("dur"), xs)), exact.subset(x), "dur"))
    args = list(map(attrgetter("args"), xs))
    if None in args:
        args = [a if a is not None else _NO_ARGS for a in args]
    for name in _INT_ARGS:
        parts["arg_" + name].append(int_values(list(map(attrgetter(name), args)), ints_or_none=name in _TYPED_INTS))
    fx["arg_input_dims"].add(list(map(bytes, map(attrgetter("input_dims"), args))))
    f = np.flatnonzero((ph == "s") | (ph == "f") | (ph == "t"))
    fs = list(map(events.__getitem__, f.tolist()))
    for name in ("ph", "cat", "id", "pid", "tid"):
        ff[name].add(list(map(attrgetter(name), fs)))
    parts["flow_ts_ns"].append(ts_all[f])


_NO_ARGS = Args()


@dataclass
class _Exact:
    """Where to re-read number texts when floats would lose nanoseconds."""

    events_raw: Any
    kept: np.ndarray | None
    rows: np.ndarray | None = None

    def subset(self, rows: np.ndarray) -> "_Exact":
        return _Exact(self.events_raw, self.kept, rows)

    def tokens(self, key: str) -> list:
        struct = _ExactTs if key == "ts" else _ExactDur
        try:
            items = msgspec.json.decode(self.events_raw, type=list[struct])
        except (msgspec.ValidationError, msgspec.DecodeError, RecursionError):
            one = msgspec.json.Decoder(struct)  # some item was dropped as malformed: one by one
            items = [_exact_item(one, r, struct) for r in msgspec.json.decode(self.events_raw, type=list[msgspec.Raw])]
        if self.kept is not None:
            items = [item for item, keep in zip(items, self.kept) if keep]
        if self.rows is not None:
            items = [items[i] for i in self.rows]
        return list(map(attrgetter(key), items))


def _exact_item(decoder, raw, struct):
    try:
        return decoder.decode(raw)
    except (msgspec.ValidationError, msgspec.DecodeError, RecursionError):
        return struct()  # not an object: this event was dropped, its slot only keeps the rows aligned


def _times(values: list, exact: _Exact, key: str) -> np.ndarray:
    """int64 ns from the decoded numbers; re-read the text where floats would lose digits."""
    arr = np.array(values) if values else np.empty(0, dtype=np.int64)
    if arr.dtype == object:
        kinds = set(map(type, values))
        if kinds <= {int, type(None)}:
            arr = np.array([_MISSING_US if v is None else v for v in values])
        elif kinds <= {int, float, type(None)}:
            arr = np.array([np.nan if v is None else v for v in values], dtype=np.float64)
    if arr.dtype == np.int64:
        return _checked_mul(arr)
    if arr.dtype == np.float64 and np.nanmax(np.abs(arr), initial=0.0) < FLOAT_EXACT_LIMIT_US:
        return float_us_to_ns(arr)[0]
    return us_to_ns(exact.tokens(key))


_MISSING_US = MISSING // 1000 - 1


def _checked_mul(arr: np.ndarray) -> np.ndarray:
    bad = (arr <= _MISSING_US) | (arr >= 2**62 // 1000)
    ns = np.where(bad, 0, arr) * 1000
    ns[bad] = MISSING
    return ns


class _ExactDur(msgspec.Struct):
    dur: msgspec.Raw = msgspec.Raw(b"")


def _human(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)
