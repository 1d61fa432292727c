"""Bytes -> raw event columns.

The first stage of the pipeline: open a trace file (plain or gzip, detected by
magic bytes), decode its JSON with msgspec into typed structs that hold only
the fields traceview uses, and hand back plain column arrays plus the
trace-level metadata. Everything a user can get wrong here raises
``TraceReadError`` with a one-line message.
"""
from __future__ import annotations

import os
import zlib
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any

import msgspec
import numpy as np

from .errors import TraceReadError
from .numbers import FLOAT_EXACT_LIMIT_US, MISSING, float_us_to_ns, us_to_ns

GZIP_MAGIC = b"\x1f\x8b"
DEFAULT_MAX_BYTES = 16 * 2**30  # decompressed-size cap; a gzip bomb stops here
_READ_CHUNK = 1 << 22


class Args(msgspec.Struct, omit_defaults=True):
    correlation: int | None = None
    external_id: int | None = msgspec.field(default=None, name="External id")
    external_id_2021: int | None = msgspec.field(default=None, name="external id")
    device: int | str | None = None
    stream: int | str | None = None
    bytes: Any = None
    name: Any = None
    input_dims: msgspec.Raw = msgspec.field(default=msgspec.Raw(b""), name="Input Dims")


class Event(msgspec.Struct):
    ph: str = ""
    cat: str | None = None
    name: Any = None
    pid: int | str | None = None
    tid: int | str | None = None
    ts: int | float | None = None
    dur: int | float | None = None
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
    events, dropped, kept = decode_events(events_raw, path)
    if dropped:
        warnings.append(f"{path}: skipped {dropped} malformed event(s)")
    columns = event_columns(events, _Exact(events_raw, kept))
    return RawTrace(path=path, meta=meta, columns=columns, n_events=len(events), warnings=warnings)


def read_bytes(path: str, *, max_bytes: int = DEFAULT_MAX_BYTES, salvage: bool = False) -> bytes:
    """The file's JSON text, decompressed if it is gzip whatever its suffix."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(2)
            fh.seek(0)
            if head == GZIP_MAGIC:
                return _gunzip(fh, path, max_bytes, salvage)
            data = fh.read(max_bytes + 1)
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


def _gunzip(fh, path: str, max_bytes: int, salvage: bool) -> bytes:
    out = bytearray()
    decomp = zlib.decompressobj(wbits=31)
    consumed = 0
    while True:
        chunk = fh.read(_READ_CHUNK)
        if not chunk:
            break
        while chunk:
            try:
                out += decomp.decompress(chunk, max_bytes + 1 - len(out))
            except zlib.error:
                if salvage and out:
                    return bytes(out)
                raise TraceReadError(path, f"corrupt gzip data near compressed byte {consumed}") from None
            if len(out) > max_bytes:
                raise TraceReadError(
                    path, f"decompresses to more than the {_human(max_bytes)} limit (raise max_bytes / --max-size)")
            consumed += len(chunk) - len(decomp.unconsumed_tail)
            chunk = decomp.unconsumed_tail
            if decomp.eof:  # concatenated gzip members are legal
                chunk = decomp.unused_data + chunk
                if not chunk:
                    chunk = fh.read(_READ_CHUNK)
                    if not chunk:
                        return bytes(out)
                decomp = zlib.decompressobj(wbits=31)
    if not decomp.eof:
        if salvage and out:
            return bytes(out)
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
    if "traceEvents" not in top:
        keys = ", ".join(list(top)[:6]) or "none"
        raise TraceReadError(path, f"JSON is not a trace: no traceEvents key (top-level keys: {keys})")
    events_raw = top.pop("traceEvents")
    meta = {}
    for key, raw in top.items():
        meta[key] = msgspec.json.decode(raw)
    return meta, events_raw


def _json_problem(exc: Exception, size: int) -> str:
    text = str(exc)
    if "truncated" in text.lower():
        return f"truncated JSON: the text ends at byte {size} in the middle of the document (try --salvage)"
    return f"not valid JSON: {text}"


def decode_events(events_raw, path: str) -> tuple[list[Event], int, np.ndarray | None]:
    """Typed decode; on a type error fall back to event-by-event and count drops."""
    try:
        return msgspec.json.decode(events_raw, type=list[Event]), 0, None
    except msgspec.ValidationError:
        pass
    except msgspec.DecodeError as exc:
        raise TraceReadError(path, _json_problem(exc, len(events_raw))) from None
    try:
        items = msgspec.json.decode(events_raw, type=list[msgspec.Raw])
    except msgspec.ValidationError:
        raise TraceReadError(path, "not a trace: traceEvents is not a list") from None
    decoder = msgspec.json.Decoder(Event)
    events, dropped = [], 0
    kept = np.ones(len(items), dtype=bool)
    for item in items:
        try:
            events.append(decoder.decode(item))
        except (msgspec.ValidationError, msgspec.DecodeError):
            kept[len(events) + dropped] = False
            dropped += 1
    return events, dropped, kept


def event_columns(events: list[Event], exact: "_Exact") -> dict:
    """Arrays per field for the duration (X) events, the flow events and phase counts."""
    phases = list(map(attrgetter("ph"), events))
    ph = np.array(phases, dtype=object) if phases else np.empty(0, dtype=object)
    counts = dict(zip(*np.unique(ph.astype(str), return_counts=True))) if len(ph) else {}
    ts_all = _times(list(map(attrgetter("ts"), events)), exact, "ts")
    x = np.flatnonzero(ph == "X")
    xs = [events[i] for i in x] if len(x) != len(events) else events
    cols: dict[str, Any] = {"counts": {k: int(v) for k, v in counts.items()}}
    for name in ("cat", "name", "pid", "tid"):
        cols[name] = list(map(attrgetter(name), xs))
    cols["ts_ns"] = ts_all[x]
    cols["dur_ns"] = _times(list(map(attrgetter("dur"), xs)), exact.subset(x), "dur")
    args = [a if a is not None else _NO_ARGS for a in map(attrgetter("args"), xs)]
    for name in ("correlation", "external_id", "external_id_2021", "device", "stream", "bytes"):
        cols["arg_" + name] = list(map(attrgetter(name), args))
    cols["arg_input_dims"] = list(map(attrgetter("input_dims"), args))
    f = np.flatnonzero(np.isin(ph, ("s", "f", "t")))
    fs = [events[i] for i in f]
    cols["flows"] = {name: list(map(attrgetter(name), fs)) for name in ("ph", "cat", "id", "pid", "tid")}
    cols["flows"]["ts_ns"] = ts_all[f]
    return cols


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
        items = msgspec.json.decode(self.events_raw, type=list[struct])
        if self.kept is not None:
            items = [item for item, keep in zip(items, self.kept) if keep]
        if self.rows is not None:
            items = [items[i] for i in self.rows]
        return list(map(attrgetter(key), items))


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
