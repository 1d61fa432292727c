"""An annotated trace: the original JSON with each GPU activity's classification in its
``args`` (keys ``traceview.category``, ``traceview.tensor_core``,
``traceview.attention_backend``, ``traceview.launched_by``) and counter tracks (``"ph": "C"``)
of GPU time per step by category, so Perfetto UI and chrome://tracing show them.

Every other byte of the file is written back as it was: the trace is re-read as text
(``read.source``: gzip found by its magic bytes, the same size and memory caps as a load)
and copied span by span; only the annotated events are re-encoded (their values kept as
written, numbers included), and the counters go in before the array's closing bracket.
The events are visited a chunk at a time and the output is streamed, so memory stays
about the trace's text on top of the loaded trace (a load needs more than that). The
output is written atomically (``traceview.atomic``): a failure or Ctrl-C leaves no file,
an existing file untouched, and the input is never opened for writing.
"""

from __future__ import annotations

import codecs
import contextlib
import gzip
import re
from dataclasses import dataclass, field
from pathlib import Path

import msgspec
import numpy as np
import pandas as pd

from ..analyses.trace.annotate import PREFIX
from ..atomic import InputTargetError, atomic_path, refuse_inputs
from ..errors import TraceviewError
from ..read import DEFAULT_MAX_BYTES, read_source, split_document
from ..read.chunks import address
from ..read.document import fit_events, raw_items
from ..read.events import decode_events
from ..read.salvage import salvage_prefix
from ..read.source import DEFAULT_MAX_RATIO

COUNTER = "GPU time by category in this step (us, traceview)"
CHUNK_EVENTS = 1 << 14  # events decoded at a time: bounds the Python objects alive at once
FLUSH_BYTES = 1 << 22  # output gathered before each write (gzip compresses better, fewer calls)
_OBJECT = msgspec.json.Decoder(dict[str, msgspec.Raw])  # an event, each value kept as written
_ENCODE = msgspec.json.Encoder()


class SameFileError(TraceviewError):
    """The output named is the input trace itself (same path, or a link to it)."""

    def __init__(self, trace_path, out):
        super().__init__(
            f"{out}: is the input trace {trace_path} itself; write the annotated copy to "
            "another file (the original stays as it is)"
        )


def check_output(trace_path, out) -> Path:
    """The output path, refused when it cannot hold an annotated trace or is the input."""
    out = Path(out)
    if not out.name.endswith((".json", ".json.gz")):
        raise TraceviewError(f"{out}: the annotated trace must end in .json or .json.gz")
    try:
        refuse_inputs([out], [trace_path])  # the one guard of every output (traceview.atomic)
    except InputTargetError:
        raise SameFileError(trace_path, out) from None
    return out


def write_annotated(
    trace,
    report,
    out,
    *,
    max_bytes: int = DEFAULT_MAX_BYTES,
    max_ratio: float | None = DEFAULT_MAX_RATIO,
    salvage: bool = False,
) -> dict:
    """Write ``trace`` with ``report`` (``analyses.trace.annotate.annotations``) to ``out``
    (``.json`` or ``.json.gz``: the output's suffix picks its compression). ``max_bytes``,
    ``max_ratio`` and ``salvage`` as for the load. Returns counts: activities annotated,
    counter events, activities left unannotated because their ``args`` is not an object
    (``skipped``), and complete events of the file that the load skipped, copied as they
    are (``not_loaded``)."""
    out = check_output(trace.path, out)
    data = _reread(trace.path, max_bytes, max_ratio, salvage)
    text = fit_events(data)  # what the load decoded: events msgspec refuses blanked, offsets the same
    _, events_raw = split_document(text, trace.path)
    at = address(events_raw) - address(text)  # the events array's place in the document
    plan = _Plan.of(trace, report)
    with atomic_path(out) as tmp, open(tmp, "wb") as raw_fh, _compressed(raw_fh, out) as fh:
        sink = _Sink(fh, repair=not _is_utf8(data))
        view = memoryview(data)
        sink.write(view[:at])
        _write_events(sink, memoryview(events_raw), plan, trace.path, view[at : at + len(events_raw)])
        sink.write(view[at + len(events_raw) :])
        sink.flush()
    return {
        "activities": plan.annotated,
        "counter_events": plan.counter_events,
        "skipped": plan.skipped,
        "not_loaded": plan.not_loaded,
    }


def _compressed(fh, out: Path):
    """gzip when the output's name ends in .gz (the name in its header is the output's, not
    the temporary file's); else ``fh`` itself."""
    if out.name.endswith(".gz"):
        return gzip.GzipFile(filename=out.name, mode="wb", fileobj=fh, compresslevel=6)
    return contextlib.nullcontext(fh)


def _reread(path: str, max_bytes: int, max_ratio: float | None, salvage: bool) -> bytes | bytearray:
    """The trace's JSON text as the load read it (magic bytes decide gzip, same caps)."""
    text = read_source(path, max_bytes=max_bytes, max_ratio=max_ratio, salvage=salvage)
    if not salvage:
        return text.data
    data, _ = salvage_prefix(text.data, path, text.cut)  # the note was shown by the load
    return data


@dataclass
class _Plan:
    """What to write into which event: ``row_of[i]`` is the activities row of the loaded
    event ``i`` (-1: none), plus the values per row. ``names`` (the loaded events' name codes
    and a name -> code map) is set when the load skipped complete events (no usable ts, exact
    duplicates, ...): the file's events are then matched to the loaded ones in order by name,
    and the skipped ones are copied unannotated (counted)."""

    path: str
    n_events: int
    names: tuple | None
    row_of: np.ndarray
    values: list  # per activities row: the four traceview.* values
    per_step: pd.DataFrame
    step_of: np.ndarray  # per activities row: its step (-1: none)
    ts_us: np.ndarray  # per activities row, as written in the file (for the counters)
    end_us: np.ndarray
    checks: np.ndarray = field(default_factory=lambda: np.empty(0, object))  # per activities row: its name
    pid: object = 0
    annotated: int = 0
    skipped: int = 0
    counter_events: int = 0
    seen_x: int = 0  # complete events of the file visited so far
    matched: int = 0  # loaded events matched to them so far

    @classmethod
    def of(cls, trace, report) -> _Plan:
        acts = report["activities"]
        n = len(trace.events)
        rows = acts["event"].to_numpy(np.int64)
        row_of = np.full(n, -1, np.int64)
        row_of[rows] = np.arange(len(rows))
        attn = acts["attention_backend"].tolist()
        values = list(
            zip(
                acts["category"].astype(str).tolist(),
                map(_flag, acts["tensor_core"].tolist()),
                [a if isinstance(a, str) else None for a in attn],
                acts["launched_by"].astype(str).tolist(),
                acts["source"].tolist() if "source" in acts else [None] * len(acts),
                strict=False,
            )
        )
        k = trace.kernels  # the activities table is made from it, row for row
        step = k["step"].fillna(-1).astype(np.int64).to_numpy() if len(k) else np.empty(0, np.int64)
        nan = np.full(len(rows), np.nan)
        read = trace.stats.get("phases", {}).get("X") if isinstance(trace.stats, dict) else None
        codes, names = _name_codes(trace.events["name"])
        return cls(
            trace.path,
            n,
            None if read == n else (codes, {name: i for i, name in enumerate(names)}),
            row_of,
            values,
            report["per_step"],
            step,
            nan,
            nan.copy(),
            checks=names[codes[rows]],
        )

    @property
    def not_loaded(self) -> int:
        """Complete events in the file that the load skipped (left unannotated)."""
        return self.seen_x - self.matched

    def loaded_rows(self, x_events: list) -> np.ndarray:
        """The loaded event row of each of the next complete events of the file (-1: skipped by the load)."""
        first = self.seen_x
        self.seen_x += len(x_events)
        if self.names is None:  # the load kept every one: the i-th of the file is row i
            self.matched = min(self.seen_x, self.n_events)
            return np.arange(first, self.seen_x)
        out = np.full(len(x_events), -1, np.int64)
        j, n, (codes, code_of) = self.matched, self.n_events, self.names
        # in order: the loaded events are a subsequence of the file's. A skipped event with no
        # start is never a loaded one; one skipped for another reason (an exact duplicate, a
        # corrupt time) may take the annotations of a same-named neighbour, which is alike
        for i, event in enumerate(x_events):
            if j < n and event.ts is not None and code_of.get(str(event.name), -2) == codes[j]:
                out[i] = j
                j += 1
        self.matched = j
        return out


def _write_events(sink, events_raw: memoryview, plan: _Plan, path: str, written: memoryview) -> None:
    """The events array with the planned events rewritten and the counters appended; the rest
    is copied from ``written``, the array as the file has it (``events_raw`` may have blanks)."""
    pos = 0
    bounds = _chunk_bounds(events_raw, path)
    for lo, hi in bounds:
        chunk = b"".join((b"[", events_raw[lo:hi], b"]"))
        base = address(chunk) + 1 - lo  # an item's offset in events_raw: its address minus this
        for raw, new in _rewritten(chunk, plan, path):
            start = address(raw) - base
            sink.write(written[pos:start])
            sink.write(new)
            pos = start + len(raw)
    if plan.matched != plan.n_events or plan.seen_x < plan.n_events:
        raise TraceviewError(
            f"{path}: {plan.seen_x} complete events in the file, {plan.n_events} loaded, "
            f"{plan.matched} of them found in order (changed since it was loaded?): "
            "cannot annotate it exactly"
        )
    close = _closing_bracket(events_raw)
    sink.write(written[pos:close])
    counters = _counters(plan)
    if counters:
        sink.write(b"," if bounds else b"")
        sink.write(b",".join(map(_ENCODE.encode, counters)))
    sink.write(written[close:])


def _rewritten(chunk: bytes, plan: _Plan, path: str):
    """(original item, new text) for each event of ``chunk`` that gets annotations, in order.
    Events are counted as the reader counts them (its decoder, its notion of a dropped event)."""
    decoded = decode_events(chunk, path)
    events = decoded.events
    ph = np.fromiter((e.ph == "X" for e in events), dtype=bool, count=len(events))
    kept = np.arange(len(ph)) if decoded.kept is None else np.flatnonzero(decoded.kept)
    x_items, x_events = kept[ph], np.flatnonzero(ph)
    loaded = plan.loaded_rows([events[i] for i in x_events.tolist()])
    if plan.matched > plan.n_events or (len(loaded) and loaded[-1] >= plan.n_events):
        raise TraceviewError(
            f"{path}: more complete events in the file than loaded (changed since it was "
            "loaded?): cannot annotate it exactly"
        )
    rows = np.where(loaded >= 0, plan.row_of[np.maximum(loaded, 0)] if len(plan.row_of) else -1, -1)
    hit = np.flatnonzero(rows >= 0)
    if not len(hit):
        return
    items = raw_items(chunk, path)
    for j in hit.tolist():
        row = int(rows[j])
        event = events[x_events[j]]
        if str(event.name) != plan.checks[row]:
            raise TraceviewError(
                f"{path}: event {int(loaded[j])} does not match the loaded trace "
                "(changed since it was loaded?)"
            )
        new = _annotated_item(items[x_items[j]], plan.values[row])
        _note_times(plan, row, event)
        if new is None:
            plan.skipped += 1
            continue
        plan.annotated += 1
        yield items[x_items[j]], new


def _annotated_item(raw, values) -> bytes | None:
    """The event's text with the traceview.* keys in its args, ``source`` only where known (None: args
    is not an object, so there is nowhere to put them). Other values are copied as written."""
    event = _decoded(raw)
    args_raw = event.get("args")
    args: dict[str, object]  # the values as written, then ours (text) beside them
    if args_raw is None or bytes(args_raw) == b"null":
        args = {}
    elif bytes(args_raw)[:1] == b"{":
        args = dict(_decoded(args_raw))
    else:
        return None
    for key, value in zip(
        ("category", "tensor_core", "attention_backend", "launched_by", "source"), values, strict=True
    ):
        if key != "source" or value is not None:  # a line of the user's code, only where one is known
            args[PREFIX + key] = value
    return _ENCODE.encode({**event, "args": args})


def _decoded(raw) -> dict:
    """An object's members as raw values; a key holding bytes that are not UTF-8 (the loader kept
    the event: its fields read) is read with them written as ``\\xNN`` (``_valid_text``), as the
    output writes them, instead of failing (a fuzz case: exit 3)."""
    try:
        return _OBJECT.decode(raw)
    except msgspec.DecodeError:
        return _OBJECT.decode(_valid_text(bytes(raw)))


def _note_times(plan: _Plan, row: int, event) -> None:
    """Start and end (us, as in the file) of an annotated activity, and the counters' pid."""
    ts, dur = _float(event.ts), _float(event.dur)
    plan.ts_us[row] = ts
    plan.end_us[row] = ts + (dur if dur == dur else 0.0)
    if row == 0:
        plan.pid = event.pid if event.pid is not None else 0


def _float(value) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return float("nan")


def _counters(plan: _Plan) -> list:
    """One counter sample per step at its first GPU activity (GPU time per category, us),
    and zeros after the last activity."""
    per = plan.per_step
    if not len(plan.ts_us) or not len(per):
        return []
    step = per["step"].to_numpy()
    cats = sorted(per["category"].unique().tolist())
    first = _step_starts(plan)
    out = []
    for s, g in per[step >= 0].groupby("step", sort=True):
        if not np.isfinite(first.get(s, np.nan)):
            continue
        values = dict.fromkeys(cats, 0.0) | {
            c: round(v / 1000.0, 3) for c, v in zip(g["category"], g["time_ns"], strict=True)
        }
        out.append({"ph": "C", "name": COUNTER, "pid": plan.pid, "ts": first[s], "args": values})
    end = np.nanmax(plan.end_us) if np.isfinite(plan.end_us).any() else np.nan
    if out and np.isfinite(end):
        out.append(
            {"ph": "C", "name": COUNTER, "pid": plan.pid, "ts": float(end), "args": dict.fromkeys(cats, 0.0)}
        )
    plan.counter_events = len(out)
    return out


def _step_starts(plan: _Plan) -> dict:
    """Step -> the earliest start (us) of its activities."""
    frame = pd.DataFrame({"step": plan.step_of, "ts": plan.ts_us}).dropna()
    return frame.groupby("step")["ts"].min().to_dict()


def _name_codes(names: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """Each event's name as a code into the distinct names (as str): no string per event."""
    cat = names if isinstance(names.dtype, pd.CategoricalDtype) else names.astype("category")
    distinct = [str(c) for c in cat.cat.categories] + ["nan"]  # a missing name (code -1) reads as "nan"
    codes = cat.cat.codes.to_numpy()
    return np.where(codes < 0, len(distinct) - 1, codes), np.asarray(distinct, dtype=object)


def _flag(value):
    """True/False, or None when unknown (NA, NaN, None)."""
    if value is None or value is pd.NA or (isinstance(value, float) and value != value):
        return None
    return bool(value)


def _chunk_bounds(events_raw: memoryview, path: str) -> list:
    """(start, stop) byte ranges of runs of at most ``CHUNK_EVENTS`` items of the array,
    found by one full parse (which also checks the JSON)."""
    items = raw_items(events_raw, path)
    base = address(events_raw)
    bounds = []
    for lo in range(0, len(items), CHUNK_EVENTS):
        last = items[min(lo + CHUNK_EVENTS, len(items)) - 1]
        bounds.append((address(items[lo]) - base, address(last) - base + len(last)))
    return bounds


def _closing_bracket(events_raw: memoryview) -> int:
    """Offset of the array's closing ``]`` (a bare-array document may end in whitespace)."""
    end = len(events_raw) - 1
    while end > 0 and events_raw[end] in b" \t\r\n":
        end -= 1
    return end


def _is_utf8(data) -> bool:
    if isinstance(data, (bytes, bytearray)) and data.isascii():
        return True
    try:
        codecs.utf_8_decode(data, "strict", True)
    except UnicodeDecodeError:
        return False
    return True


#: a byte that is not UTF-8, as ``surrogateescape`` decodes it (U+DC80..U+DCFF: the byte + 0xDC00)
_STRAY = re.compile("[\udc80-\udcff]")


def _valid_text(piece):
    """``piece`` with any byte that is not UTF-8 written as ``\\xNN``. The loader skips an event
    holding one (counted in its warning) but the copy would carry it: such bytes can only sit
    inside a JSON string (msgspec checked the structure and every escape), where this keeps the
    document valid JSON and valid UTF-8 for every other reader."""
    if _is_utf8(piece):
        return piece
    text = bytes(piece).decode("utf-8", "surrogateescape")
    # the JSON text of a backslash, then x and the hex: a string reading \xNN
    return _STRAY.sub(lambda m: f"\\\\x{ord(m.group()) - 0xDC00:02x}", text).encode("utf-8")


class _Sink:
    """Gathers small pieces into writes of about ``FLUSH_BYTES``; ``repair``: the trace holds
    bytes that are not UTF-8, escaped on the way out (``_valid_text``)."""

    def __init__(self, fh, repair: bool = False):
        self.fh, self.size, self.repair = fh, 0, repair
        self.parts: list = []

    def write(self, piece) -> None:
        if self.repair:
            piece = _valid_text(piece)
        if len(piece) >= FLUSH_BYTES:
            self.flush()
            self.fh.write(piece)
            return
        self.parts.append(piece)
        self.size += len(piece)
        if self.size >= FLUSH_BYTES:
            self.flush()

    def flush(self) -> None:
        if self.parts:
            self.fh.write(b"".join(self.parts))
            self.parts, self.size = [], 0
