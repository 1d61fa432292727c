"""Events -> columns: the column-building API shared by the serial and parallel decoders.

A chunk of the traceEvents text is decoded on its own into a ``ChunkPart``:
numpy arrays, and per-chunk factorized codes plus their distinct values. A
``ColumnBuilder`` appends the parts in chunk order, mapping each part's codes
onto one table of distinct values in order of first appearance, so the result
does not depend on how the text was cut or which process decoded which chunk.

Columns kept: the duration (X) events' strings, times and integer args, the
flow (s/f/t) events' fields, the ``[memory]`` instant events' thread, time and
integer args, and a count of every phase. A chunk without instant events skips
the memory columns at no cost (the phase count says so first).
"""

from __future__ import annotations

import gc
import threading
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from operator import attrgetter
from typing import Any

import numpy as np

from ..errors import TraceReadError
from .chunks import checked_event_chunks, event_chunks
from .codes import Codes, Factorizer, IntColumn, int_values
from .events import MEMORY_ARGS, MEMORY_NAME, NO_ARGS, TEXT_ARGS, TYPED_INT_ARGS, DecodedEvents, decode_events
from .times import NumberTexts, times_ns

X_STRINGS = ("cat", "name", "pid", "tid")  # factorized fields of X events (plus the TEXT_ARGS)
FLOW_FIELDS = ("ph", "cat", "id", "pid", "tid")
INT_ARGS = (
    "correlation",
    "external_id",
    "external_id_2021",
    "device",
    "stream",
    "bytes",
    "python_id",
    "python_parent_id",
)
ARRAYS = ("ts_ns", "dur_ns", "flow_ts_ns", *("arg_" + a for a in INT_ARGS))
MEMORY_FIELDS = ("pid", "tid")  # factorized fields of [memory] events
MEMORY_ARRAYS = ("ts_ns", *("arg_" + a for a in MEMORY_ARGS))


@dataclass
class ChunkPart:
    """One chunk's columns. ``arrays``: int64 ns arrays and ``IntColumn``s (the ``arg_`` keys)."""

    n_events: int
    dropped: int
    counts: dict  # phase -> number of events
    x_codes: dict  # X_STRINGS + "arg_<TEXT_ARGS>" -> Codes
    flow_codes: dict  # FLOW_FIELDS -> Codes
    arrays: dict
    memory_codes: dict = field(default_factory=dict)  # MEMORY_FIELDS -> Codes; empty: no [memory] event
    memory_arrays: dict = field(default_factory=dict)  # MEMORY_ARRAYS


@dataclass
class EventColumns:
    """The decoded columns, and how many events were kept and dropped as malformed."""

    columns: dict
    n_events: int
    dropped: int
    decoder: str = "python"  # which decoder made them: "python" (msgspec) or "compiled" (compiled.py)


def decode_chunk(chunk, path: str) -> ChunkPart:
    """One JSON array of events as columns; ``TraceReadError`` if it is not valid JSON."""
    decoded = decode_events(chunk, path)
    return chunk_part(decoded, NumberTexts(chunk, decoded.kept))


def chunk_part(decoded: DecodedEvents, texts: NumberTexts) -> ChunkPart:
    events = decoded.events
    phases = list(map(attrgetter("ph"), events))
    ph = np.fromiter(phases, dtype=object, count=len(phases))
    ts_all = times_ns(list(map(attrgetter("ts"), events)), texts, "ts")
    x = np.flatnonzero(ph == "X")
    xs = events if len(x) == len(events) else list(map(events.__getitem__, x.tolist()))
    f = np.flatnonzero((ph == "s") | (ph == "f") | (ph == "t"))
    fs = list(map(events.__getitem__, f.tolist()))
    x_codes, arrays = _x_columns(xs, texts.subset(x))
    arrays["ts_ns"] = ts_all[x]
    arrays["flow_ts_ns"] = ts_all[f]
    counts = dict(Counter(phases))
    part = ChunkPart(
        len(events),
        decoded.dropped,
        counts,
        x_codes,
        {name: _codes(fs, name) for name in FLOW_FIELDS},
        arrays,
    )
    if counts.get("i") or counts.get("I"):  # only instant events can be [memory] ones
        _memory_columns(part, events, ph, ts_all)
    return part


def _memory_columns(part: ChunkPart, events: list, ph: np.ndarray, ts_all: np.ndarray) -> None:
    """The [memory] events' thread, time and args into ``part`` (nothing when there are none)."""
    inst = np.flatnonzero((ph == "i") | (ph == "I"))
    names = np.fromiter((events[k].name for k in inst.tolist()), dtype=object, count=len(inst))
    m = inst[names == MEMORY_NAME]
    if not len(m):
        return
    ms = list(map(events.__getitem__, m.tolist()))
    part.memory_codes = {name: _codes(ms, name) for name in MEMORY_FIELDS}
    args = [e.args if e.args is not None else NO_ARGS for e in ms]
    part.memory_arrays = {"ts_ns": ts_all[m]}
    for name in MEMORY_ARGS:
        part.memory_arrays["arg_" + name] = int_values(list(map(attrgetter(name), args)))


def _x_columns(xs: list, texts: NumberTexts) -> tuple[dict, dict]:
    """Factorized strings and arrays (durations, integer args) of the X events."""
    codes = {name: _codes(xs, name) for name in X_STRINGS}
    arrays: dict[str, np.ndarray | IntColumn] = {
        "dur_ns": times_ns(list(map(attrgetter("dur"), xs)), texts, "dur")
    }
    args = list(map(attrgetter("args"), xs))
    if None in args:
        args = [a if a is not None else NO_ARGS for a in args]
    for name in INT_ARGS:
        values = list(map(attrgetter(name), args))
        arrays["arg_" + name] = int_values(values, ints_or_none=name in TYPED_INT_ARGS)
    for name in TEXT_ARGS:
        words = Factorizer(empty_is_missing=True)  # not ``texts``, the number texts read above
        words.add(list(map(bytes, map(attrgetter(name), args))))
        codes["arg_" + name] = words.finish()
    return codes, arrays


def _codes(events: list, name: str) -> Codes:
    f = Factorizer()
    f.add(list(map(attrgetter(name), events)))
    return f.finish()


@dataclass
class ColumnBuilder:
    """Appends ``ChunkPart``s in chunk order; ``finish`` gives the whole trace's columns."""

    counts: Counter = field(default_factory=Counter)
    x: dict = field(
        default_factory=lambda: {
            name: Factorizer() for name in (*X_STRINGS, *("arg_" + a for a in TEXT_ARGS))
        }
    )
    flows: dict = field(default_factory=lambda: {name: Factorizer() for name in FLOW_FIELDS})
    arrays: dict = field(default_factory=lambda: {key: [] for key in ARRAYS})
    memory: dict = field(default_factory=lambda: {name: Factorizer() for name in MEMORY_FIELDS})
    memory_arrays: dict = field(default_factory=lambda: {key: [] for key in MEMORY_ARRAYS})
    n_events: int = 0
    dropped: int = 0

    def add(self, part: ChunkPart) -> None:
        self.n_events += part.n_events
        self.dropped += part.dropped
        self.counts.update(part.counts)
        for name, codes in part.x_codes.items():
            self.x[name].add_codes(codes)
        for name, codes in part.flow_codes.items():
            self.flows[name].add_codes(codes, narrow=True)
        for key, value in part.arrays.items():
            self.arrays[key].append(value)
        for name, codes in part.memory_codes.items():
            self.memory[name].add_codes(codes)
        for key, value in part.memory_arrays.items():
            self.memory_arrays[key].append(value)

    def finish(self, threads: int = 1, join: Callable | None = None) -> EventColumns:
        """The joined columns. ``threads``: columns joined at once (numpy's copies and gathers
        release the GIL: the join of a gigabyte's columns is mostly fresh pages to fill).
        ``join``: what joins one column's parts, as ``drain`` does (``drain`` when None)."""
        join = join or drain
        jobs: dict[tuple, Callable] = {("x", name): f.finish for name, f in self.x.items()}
        jobs.update({("memory", name): f.finish for name, f in self.memory.items()})
        jobs.update({("arrays", key): partial(_join, key, got, join) for key, got in self.arrays.items()})
        jobs.update(
            {
                ("memory_arrays", key): partial(_join, key, got, join)
                for key, got in self.memory_arrays.items()
            }
        )
        done = dict(zip(jobs, on_threads(_call, list(jobs.values()), threads), strict=True))
        cols: dict[str, Any] = {"counts": {k: self.counts[k] for k in sorted(self.counts)}}
        cols.update({name: done["x", name] for name in self.x})
        cols.update({key: done["arrays", key] for key in self.arrays if key != "flow_ts_ns"})
        cols["flows"] = LazyColumns(self.flows, {"ts_ns": done["arrays", "flow_ts_ns"]})
        cols["memory"] = {name: done["memory", name] for name in self.memory}
        cols["memory"].update({key: done["memory_arrays", key] for key in self.memory_arrays})
        return EventColumns(cols, self.n_events, self.dropped)


class LazyColumns(Mapping):
    """Factorized columns joined when first looked up: the flow events' (link reads them only
    for an activity without a launch by correlation, which is rare, and joining their ids, a
    million distinct ones at 1 GB, costs ~0.3 s)."""

    def __init__(self, factorizers: dict, done: dict):
        self._pending = dict(factorizers)
        self._done = dict(done)
        self._order = [*factorizers, *done]

    def __getitem__(self, name: str):
        if name not in self._done and name in self._pending:
            self._done[name] = self._pending.pop(name).finish()
        return self._done[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._order)

    def __len__(self) -> int:
        return len(self._order)


def on_threads(fn: Callable, items: list, threads: int) -> list:
    """``list(map(fn, items))``, on ``threads`` threads where more than one (the decoder's
    work releases the GIL: C scans, numpy copies), results in the items' order."""
    if threads <= 1:
        return list(map(fn, items))
    with ThreadPoolExecutor(max_workers=threads) as pool:
        return list(pool.map(fn, items))


def _call(job: Callable):
    return job()


def _join(key: str, got: list, join: Callable | None = None) -> np.ndarray | IntColumn:
    """One key's per-chunk arrays (or ``IntColumn``s, for the ``arg_`` keys) as one, by ``join``
    (``drain`` when None). The list is emptied as it is joined, so each chunk's array is freed
    once copied."""
    join = join or drain
    if key.startswith("arg_"):
        values, masks = [p.values for p in got], [p.mask for p in got]
        got.clear()
        return IntColumn(join(values, np.int64), join(masks, np.bool_))
    return join(got, np.int64)


def drain(arrays: list, empty_dtype) -> np.ndarray:
    """``np.concatenate(arrays)``, emptying the list as it copies: a part is freed once copied
    (where nothing else holds it), so the peak is the result and one part, not twice the data.
    Parts of zeros that hold no memory (``compiled.part_of``) are not copied: the result is
    made of zeros then (``calloc``: pages untouched until written)."""
    if not arrays:
        return np.empty(0, dtype=empty_dtype)
    total, dtype = sum(map(len, arrays)), np.result_type(*arrays)
    out = np.zeros(total, dtype) if any(map(_no_memory_zeros, arrays)) else np.empty(total, dtype)
    at = 0
    while arrays:
        part = arrays.pop(0)
        if not _no_memory_zeros(part):
            out[at : at + len(part)] = part
        at += len(part)
    return out


def _no_memory_zeros(part: np.ndarray) -> bool:
    return part.strides == (0,) and not part[:1].any()


class RefusedChunk(Exception):
    """msgspec refused a chunk of a fast cut (at ``},{``): the JSON is bad, or the cut fell
    inside a string. No other fast cut can do better: the checked decoder runs next, and says
    what is wrong where something is."""


def fast_cut_columns(events_raw, path: str) -> EventColumns:
    """The serial decoder: the fast cut's chunks, one by one in this process. Raises
    ``RefusedChunk`` for a chunk msgspec refuses, or the error itself where that chunk is the
    whole text (the checked decoder would find the same)."""
    builder = ColumnBuilder()
    for chunk in event_chunks(events_raw):
        try:
            part = decode_chunk(chunk, path)
        except TraceReadError:
            if len(chunk) == len(events_raw):
                raise
            raise RefusedChunk from None
        builder.add(part)
    return builder.finish()


def checked_columns(events_raw, path: str) -> EventColumns:
    """The serial decoder on chunks cut only between events found by a full parse, which
    also checks the JSON: a problem is a ``TraceReadError`` saying what it is."""
    builder = ColumnBuilder()
    for chunk in checked_event_chunks(events_raw, path):
        builder.add(decode_chunk(chunk, path))
    return builder.finish()


_GC_LOCK = threading.Lock()
_GC_PAUSE = {"depth": 0, "was_enabled": False}  # pauses open now (any thread), and the state before the first


@contextmanager
def gc_paused():
    """Millions of short-lived containers are built while decoding: collections would only rescan them.
    The collector is process-wide and two loads may run on two threads (``api.Loader.pair``,
    ``scale.gather``): the first pause in turns it off, the last one out turns it back on if it was
    on, counted under a lock (each thread reading and setting it alone could leave it off for good)."""
    with _GC_LOCK:
        if _GC_PAUSE["depth"] == 0:
            _GC_PAUSE["was_enabled"] = gc.isenabled()
            gc.disable()
        _GC_PAUSE["depth"] += 1
    try:
        yield
    finally:
        with _GC_LOCK:
            _GC_PAUSE["depth"] -= 1
            if _GC_PAUSE["depth"] == 0 and _GC_PAUSE["was_enabled"]:
                gc.enable()
