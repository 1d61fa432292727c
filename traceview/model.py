"""Raw columns -> typed DataFrames (events, flows, thread names) and the Trace.

Categories are normalised across Kineto's formats into a ``role`` column
(2021's ``Operator``/``Runtime``/``Kernel`` and today's ``cpu_op``/
``cuda_runtime``/``kernel`` alike) so that later stages never look at format
quirks again. Times are int64 nanoseconds, absolute when the trace gives
``baseTimeNanoseconds``.

Nothing unusable is dropped silently: ``build_events`` returns notes counting the
duration events without a usable start, with a negative or missing duration
(counted as 0 ns), with times too large to compute with or a day away from the rest
of the trace, exact copies of another event, events without a phase or with an
unknown one, and duration events without a category.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import msgspec
import numpy as np
import pandas as pd

from . import schema
from .deferred import Deferred, deferred_fields, held, length
from .filenames import as_text
from .numbers import MISSING
from .read import Codes, IntColumn, int_values
from .read.events import TEXT_ARGS

#: the op args kept per CPU op: ``Input Dims``, ``Input type``, ``Concrete Inputs`` (raw JSON text)
OP_ARGS = TEXT_ARGS
#: the op args a Trace holds parsed, as Python lists (``ops.input_dims``: ``[[2, 3], [3, 4], []]``)
LIST_ARGS = ("input_dims",)

# cat (as written, lower-cased) -> role
ROLES = {
    "cpu_op": "cpu_op",
    "operator": "cpu_op",
    "user_annotation": "annotation",
    "cuda_runtime": "runtime",
    "runtime": "runtime",
    "cuda_driver": "runtime",
    "kernel": "kernel",
    "gpu_memcpy": "memcpy",
    "memcpy": "memcpy",
    "gpu_memset": "memset",
    "memset": "memset",
    "gpu_user_annotation": "gpu_annotation",
    "python_function": "python",
    "cuda_sync": "sync",
}
GPU_ROLES = ("kernel", "memcpy", "memset")
CPU_NEST_ROLES = ("cpu_op", "annotation", "runtime")
FLOW_CATS = ("ac2g", "async_cpu_to_gpu", "async", "flow_event")
STEP_RE = re.compile(r"^ProfilerStep#(\d{1,18})$")  # 19+ digits would overflow int64
_STREAM_RE = re.compile(r"(?<!\d)(\d{1,18})\s*$")


@deferred_fields("events", "ops", "kernels")
@dataclass(frozen=True)
class Trace:
    """One loaded trace: typed, linked, classified DataFrames plus metadata, and the load options
    it was built with. Frozen: a trace with other options is another Trace
    (``dataclasses.replace``, or ``deferred.replaced``, which keeps a deferred table deferred), never this
    one changed. ``events``, ``ops`` and ``kernels`` may be handed a ``Deferred`` (a cache hit's):
    made when first read (``ops`` with its list args parsed as it is made: ``lists_parsed``)."""

    path: str
    events: pd.DataFrame
    kernels: pd.DataFrame
    ops: pd.DataFrame
    steps: pd.DataFrame
    meta: dict
    warnings: list = field(default_factory=list)
    #: how the trace was read: ``n_events``, ``json_bytes`` (its JSON text), ``decoder`` (the
    #: decoder that ran, ``"compiled"`` or ``"python"``: see ``traceview --version``), ``phases``
    #: (events per phase) and the linkage shares
    stats: dict = field(default_factory=dict)
    #: the ``[memory]`` events (``profile_memory=True``), one row per allocation (bytes > 0) or
    #: free (bytes < 0), in time order; empty when the trace recorded none
    memory: pd.DataFrame = field(default_factory=lambda: memory_table({}))
    #: the load options the trace was built with (issue 37: fields, set once, never after):
    #: ``devices``, the user's device table (TOML) beside the built-in one (see traceview.devices);
    #: ``rules``, the kernel rules given (a path or a RuleSet; None: the built-in ones); ``salvage``
    devices: str | None = None
    rules: object = field(default=None, repr=False, compare=False)
    salvage: bool = field(default=False, repr=False, compare=False)
    #: tables worked out from this trace by the analyses (``op_work``, ...), kept with the trace they
    #: come from so that they live and die with it; not part of what the trace is
    derived: dict = field(default_factory=dict, repr=False, compare=False)
    #: whether this load was served from the cache (``tv.load``'s ``cache``); not part of what the
    #: trace is, so two loads of one trace compare equal either way
    cached: bool = field(default=False, repr=False, compare=False)

    def __post_init__(self):
        if not isinstance(held(self, "ops"), Deferred):  # a deferred table is parsed as it is made
            lists_parsed(self.ops)

    @property
    def loaded_with(self) -> dict:
        """The load options that change what a trace holds (``rules``, ``devices``, ``salvage``), as
        ``load`` was given them: an API call given this Trace with other ones refuses (issue 37)."""
        return {"rules": self.rules, "devices": self.devices, "salvage": self.salvage}

    @property
    def info(self) -> dict:
        """How this trace was read: ``path``, ``decoder`` (``"compiled"``, or ``"python"`` for the msgspec
        fallback; with how many chunks msgspec took where the scanner left some), ``cached``
        (served from the cache: the decoder is then the one that read the trace when the entry
        was made), ``n_events`` and ``json_bytes`` (the size of its JSON text)."""
        return {
            "path": self.path,
            "decoder": self.stats.get("decoder"),
            "cached": self.cached,
            "n_events": self.stats.get("n_events"),
            "json_bytes": self.stats.get("json_bytes"),
        }

    @property
    def start_ns(self) -> int:
        """When the trace begins: its first event's start (``first_ns``), the origin of the positions
        the completeness check gives. Kept in ``stats`` by a load (a cache hit need not read the
        events for it); worked out here for a Trace built without one."""
        start = self.stats.get("start_ns")
        return int(start) if start is not None else first_ns(self.events)

    @property
    def label(self) -> str:
        """Collector variant when the trace says one, else the file's stem."""
        info = self.meta.get("traceview")
        if isinstance(info, dict) and info.get("variant"):
            return str(info["variant"])
        name = as_text(self.path.rsplit("/", 1)[-1])  # a file name is untrusted text (traceview.filenames)
        for suffix in (".gz", ".json", ".pt.trace", ".trace"):
            name = name[: -len(suffix)] if name.endswith(suffix) else name
        return name

    @property
    def device_name(self) -> str | None:
        props = self.meta.get("deviceProperties")
        if isinstance(props, list) and props and isinstance(props[0], dict):
            return props[0].get("name")
        info = self.meta.get("traceview")
        return info.get("device_name") if isinstance(info, dict) else None

    def __repr__(self) -> str:
        return (
            f"<Trace {self.label!r}: {length(self, 'events')} events, {length(self, 'kernels')} GPU "
            f"activities, {length(self, 'ops')} CPU ops, {len(self.steps)} steps>"
        )


def lists_parsed(ops: pd.DataFrame) -> pd.DataFrame:
    """``ops`` with its ``LIST_ARGS`` parsed, in place: link and the cache hand over the op args as
    JSON text (a categorical)."""
    for name in LIST_ARGS:
        if name in ops.columns and isinstance(ops[name].dtype, pd.CategoricalDtype):
            ops[name] = parsed_lists(ops[name])
    return ops


def first_ns(events: pd.DataFrame) -> int:
    """The earliest start among ``events`` (0 when there are none)."""
    return int(events["ts_ns"].min()) if len(events) else 0


def categorical(values) -> pd.Categorical:
    """Strings (or mixed str/int ids) as a categorical of strings; None stays missing.

    ``values`` is a list/array, or ``Codes`` the reader already factorized."""
    uniques: list | np.ndarray  # the reader's list, or pandas' array
    if isinstance(values, Codes):
        codes, uniques = values.codes, values.uniques
    else:
        codes, uniques = pd.factorize(np.asarray(values, dtype=object), use_na_sentinel=True)
    labels = pd.Index(list(map(str, uniques)), dtype=object)
    # pandas keeps the answer, so from_codes' own check of the categories costs nothing more
    if not labels.is_unique:  # e.g. tid 7 and "7": merge them
        merged, remap = np.unique(labels.to_numpy(), return_inverse=True)
        codes = np.where(codes >= 0, remap[np.clip(codes, 0, None)], -1)
        labels = pd.Index(list(merged), dtype=object)
    return pd.Categorical.from_codes(codes, categories=labels)


def per_category(col, fn, missing, dtype=object) -> np.ndarray:
    """``fn(category)`` for every row of a categorical, computed once per category
    (rows with no category get ``missing``)."""
    cat = col.cat if isinstance(col, pd.Series) else col
    lookup = np.array([fn(c) for c in cat.categories] + [missing], dtype=dtype)
    codes = np.asarray(cat.codes)
    if codes.dtype == np.int8 and lookup.itemsize == 1 and lookup.dtype != object:
        return _byte_lookup(codes, lookup)
    return lookup[codes]  # code -1 picks the trailing ``missing``


def _byte_lookup(codes: np.ndarray, lookup: np.ndarray) -> np.ndarray:
    """``lookup[codes]`` for int8 codes (-1: the last entry) and a lookup of one-byte values, by
    a translation of the codes' bytes: numpy's take first widens the codes to an int64 array
    (22 MB of fresh pages at 2.7 million rows). Writable, as the take's result is."""
    table = bytearray(256)  # byte b: code b (0-127), code b - 256 (-1 only: 255)
    table[: len(lookup) - 1] = lookup[:-1].tobytes()
    table[255] = lookup[-1:].tobytes()[0]
    out = bytearray(np.ascontiguousarray(codes).data.cast("B")).translate(table)
    return np.frombuffer(out, dtype=lookup.dtype)


def step_numbers(names) -> np.ndarray:
    """N for rows named ``ProfilerStep#N``, -1 elsewhere."""

    def number(name) -> int:
        m = STEP_RE.match(str(name))
        return int(m.group(1)) if m else -1

    return per_category(names, number, -1, np.int64)


def _is_step(names) -> np.ndarray:
    """``step_numbers(names) >= 0``, a byte a row instead of eight."""
    return per_category(names, lambda name: STEP_RE.match(str(name)) is not None, False, bool)


def int_column(values) -> pd.arrays.IntegerArray:
    """ints with None (or non-int junk) -> nullable Int64 (also takes the reader's ``IntColumn``)."""
    if not isinstance(values, IntColumn):
        if not len(values):
            return pd.arrays.IntegerArray(np.empty(0, np.int64), np.empty(0, bool))  # an empty Int64
        values = int_values(list(values))
    return pd.arrays.IntegerArray(values.values, values.mask)


class Built(NamedTuple):
    """What the model makes of the raw columns."""

    events: pd.DataFrame
    #: builds the flow table when called: link needs it only for an activity without a launch by
    #: correlation (rare), and labelling every flow id costs ~10% of what follows the decode
    flows: Callable[[], pd.DataFrame]
    op_args: dict  # OP_ARGS name -> the events' raw arg texts (reader's Codes or list), row-aligned
    counts: dict  # events per phase, as read
    notes: list  # what was unusable, counted
    memory: pd.DataFrame  # the [memory] events: memory_table
    steps: pd.DataFrame  # the ProfilerStep#N spans: step_table
    activities: pd.DataFrame  # the GPU activity rows, not linked yet: gpu_activity_table
    start_ns: int  # when the trace begins: first_ns of the events


def build_events(cols: dict, meta: dict) -> Built:
    """Everything the model makes of the raw columns, in one call (``load``'s events stage): the
    duration-event table, the flow table, the raw op arg texts, per-phase counts and notes, the
    memory events, the steps and the GPU activities."""
    base = _base_ns(meta)
    events = _duration_events(cols, _shift(cols["ts_ns"], base))
    texts = {name: cols.get("arg_" + name) for name in OP_ARGS}
    keep, notes = _usable(events)
    keep, more = _without_duplicates(events, texts, keep)
    notes += more
    if not keep.all():
        rows = np.flatnonzero(keep)
        events = events.iloc[rows].reset_index(drop=True)
        texts = {name: _take(t, rows) for name, t in texts.items()}
    flows = functools.partial(flow_table, cols["flows"], base)
    notes += phase_notes(cols["counts"]) + _no_cat_notes(events)
    memory = memory_table(cols.get("memory") or {}, base, notes)
    steps, activities = step_table(events), gpu_activity_table(events)
    return Built(events, flows, texts, cols["counts"], notes, memory, steps, activities, first_ns(events))


def _take(texts, rows: np.ndarray):
    if texts is None:
        return None
    return texts.take(rows) if hasattr(texts, "take") else [texts[i] for i in rows]


#: How far (ns) from the trace's median start a duration event may start or end: one day. A
#: profile spans seconds to hours; a time beyond this is a corrupt ts or dur, and keeping it
#: would stretch every span the trace's analyses compute.
TIME_WINDOW_NS = 86_400 * 10**9
#: Where a duration event must start and end (ns), so that no end, span or difference of two
#: times overflows int64: from 1897 to 2116 in epoch time.
TIME_RANGE_NS = (-(2**61), 2**62)


def _usable(events: pd.DataFrame) -> tuple[np.ndarray, list[str]]:
    """A duration event needs a start, a duration that is not negative and a time near the rest
    of the trace: the rows to keep (a mask) and notes. A missing or negative duration counts as
    zero (and is counted), so no sentinel or negative time ever reaches a sum."""
    notes = []
    dur = events["dur_ns"].to_numpy()
    no_dur = dur == MISSING
    negative = (dur < 0) & ~no_dur
    if no_dur.any():
        notes.append(f"{int(no_dur.sum())} duration event(s) had no usable dur; counted as 0 ns")
    if negative.any():
        notes.append(f"{int(negative.sum())} duration event(s) had a negative dur; counted as 0 ns")
    if no_dur.any() or negative.any():
        events.loc[no_dur | negative, "dur_ns"] = 0
    ts = events["ts_ns"].to_numpy()
    keep = ts != MISSING
    if not keep.all():
        notes.append(f"skipped {int((~keep).sum())} duration event(s) with no usable ts")
    if _surely_near(ts, events["dur_ns"].to_numpy(), keep):  # the checks below would find nothing
        return keep, notes
    start = ts.astype(np.float64)  # float64 cannot overflow; a day is far coarser than its rounding
    end = events["dur_ns"].to_numpy().astype(np.float64)
    end += start  # in place: each fresh array of a million rows is pages to fault in
    out = keep & ((start < TIME_RANGE_NS[0]) | (end >= TIME_RANGE_NS[1]))
    if out.any():
        notes.append(
            f"skipped {int(out.sum())} duration event(s) whose ts or dur is too large to compute "
            "with (beyond +-2**62 ns)"
        )
    far = _far(start, end, keep & ~out)
    if far.any():
        notes.append(
            f"skipped {int(far.sum())} duration event(s) starting or ending more than a day "
            "from the rest of the trace (a corrupt ts or dur)"
        )
    return keep & ~out & ~far, notes


#: More than float64 can be off by (an ulp is 1024 ns below 2**62) in the sums and differences of
#: times ``_usable`` compares with its limits: a trace inside them by this much passes them all.
_ROUNDING_NS = 2**13


def _surely_near(ts: np.ndarray, dur: np.ndarray, keep: np.ndarray) -> bool:
    """Whether ``_usable``'s checks in float64 would find no usable row out of range or far from
    the rest, told by three reductions over the rows, with no array made: the earliest start
    and the latest start plus the longest duration lie inside the time range, and within
    ``TIME_WINDOW_NS`` of each other, by more than any rounding of theirs. The common case;
    where it is not sure, the checks themselves decide."""
    if not keep.any():
        return False
    lo = int(np.min(ts, where=keep, initial=np.iinfo(np.int64).max))
    hi = int(np.max(ts, where=keep, initial=np.iinfo(np.int64).min)) + int(np.max(dur, where=keep, initial=0))
    return (
        TIME_RANGE_NS[0] + _ROUNDING_NS <= lo
        and hi + _ROUNDING_NS <= TIME_RANGE_NS[1]
        and hi - lo + _ROUNDING_NS <= TIME_WINDOW_NS
    )


def _far(start: np.ndarray, end: np.ndarray, usable: np.ndarray) -> np.ndarray:
    """Usable rows whose start or end lies beyond ``TIME_WINDOW_NS`` of the median start, when
    they are a minority: with no bulk of events near the median there is no "rest" to stray from."""
    if not usable.any():
        return usable
    first = float(np.min(start, where=usable, initial=np.inf))  # no copy of the usable rows
    last = float(np.max(end, where=usable, initial=-np.inf))
    if last - first <= TIME_WINDOW_NS:  # nothing can be that far from a median between them
        return np.zeros(len(start), dtype=bool)
    mid = float(np.median(start[usable]))
    far = usable & ((np.abs(start - mid) > TIME_WINDOW_NS) | (np.abs(end - mid) > TIME_WINDOW_NS))
    return far if 2 * far.sum() < usable.sum() else np.zeros(len(start), dtype=bool)


#: What makes a duration event an exact copy of another: every column the model keeps.
_SAME = (
    "name",
    "cat",
    "ts_ns",
    "dur_ns",
    "pid",
    "tid",
    "correlation",
    "external_id",
    "device",
    "stream",
    "bytes",
)


def _without_duplicates(events: pd.DataFrame, texts: dict, keep: np.ndarray) -> tuple[np.ndarray, list[str]]:
    """``keep`` less the exact copies of an earlier kept event that carry an id (correlation or
    External id): a trace written twice into one file, a merge gone wrong; each would count
    twice in every sum. Checked on start, duration and thread first (cheap), then on every
    kept column for the rows that share those."""
    rows = np.flatnonzero(keep)
    maybe = _same_hash(events, rows)
    if not maybe.any():
        return keep, []
    rows = rows[maybe]
    full = events[list(_SAME)].iloc[rows].reset_index(drop=True)
    for name, t in texts.items():  # the op's shapes and types too: the reader's factorized codes
        if isinstance(t, Codes):
            full[name] = t.codes[rows]
    # only events with an id: two python_function events may differ in nothing traceview reads
    # (their Python id), while a kernel, launch or op with the same id, times and thread is one
    copied = (
        full.duplicated(keep="first").to_numpy()
        & (full["correlation"].notna() | full["external_id"].notna()).to_numpy()
    )
    copies = rows[copied]
    if not len(copies):
        return keep, []
    keep = keep.copy()
    keep[copies] = False
    return keep, [
        f"dropped {len(copies)} exact duplicate(s) of duration events (same name, times, "
        "thread, ids and args): each counted once"
    ]


def _same_hash(events: pd.DataFrame, rows: np.ndarray) -> np.ndarray:
    """Which ``rows`` share a hash of (start, duration, pid, tid, name, ids) with another: a
    superset of the duplicates, found by one sort (pandas' multi-column duplicated takes ~10x
    longer). The name and ids are in the hash because copies of a trace's pattern (a tiled or
    repeated capture) share times and threads but not ids: with them the exact check that
    follows gets a few rows, not a twentieth of the trace."""
    u = np.uint64
    # in place, into two arrays: each fresh array of a million rows is pages to fault in
    h = events["ts_ns"].to_numpy().view(u) * u(0x9E3779B97F4A7C15)  # wraps: a hash, checked exactly later
    part = events["dur_ns"].to_numpy().view(u) * u(0xC2B2AE3D27D4EB4F)
    h ^= part
    np.copyto(part, events["pid"].cat.codes.to_numpy(), casting="unsafe")  # code -1 wraps, as astype
    part <<= u(32)
    part |= events["tid"].cat.codes.to_numpy().astype(u)
    part *= u(0x165667B19E3779F9)
    h ^= part
    np.copyto(part, events["name"].cat.codes.to_numpy(), casting="unsafe")
    part *= u(0xD6E8FEB86659FD93)
    h ^= part
    for name, mult in (("correlation", 0xA0761D6478BD642F), ("external_id", 0xE7037ED1A0B428DB)):
        # a missing id reads 0, as every other missing one: equal rows hash alike. to_numpy may
        # give the column's own array (no missing value): read, never changed, into ``part``
        np.multiply(events[name].to_numpy(dtype=np.int64, na_value=0).view(u), u(mult), out=part)
        h ^= part
    if len(rows) != len(h):
        h = h[rows]
        part = part[: len(rows)]
    sorted_h = part  # the hashes sorted in part's memory: a plain sort is ~5x faster than argsort
    sorted_h[:] = h
    sorted_h.sort()
    repeated = sorted_h[1:][sorted_h[1:] == sorted_h[:-1]]
    if not len(repeated):
        return np.zeros(len(rows), dtype=bool)
    # pandas' isin looks each hash up in a table of the repeated ones; np.isin sorts them all
    # again, ~6x slower (20k repeated hashes among 750k events at 281 MB)
    return pd.Series(h).isin(repeated).to_numpy()


#: Every phase of the Trace Event Format; the ones traceview does not read (B/E aside, which
#: load warns about) are skipped on purpose, an unknown or missing one is counted in a note.
KNOWN_PHASES = frozenset("BEXiICbneSTpFstfPNODMVvRc()")


def phase_notes(counts: dict) -> list[str]:
    """Notes for events with no ``ph`` or a phase outside the Trace Event Format (skipped)."""
    notes = []
    if counts.get(""):
        notes.append(f"skipped {counts['']} event(s) without ph (no phase: not a trace event)")
    unknown = {ph: n for ph, n in counts.items() if ph and ph not in KNOWN_PHASES}
    if unknown:
        shown = ", ".join(ascii(ph[:12]) for ph in sorted(unknown)[:5]) + (
            ", ..." if len(unknown) > 5 else ""
        )
        notes.append(f"skipped {sum(unknown.values())} event(s) with an unknown ph ({shown})")
    return notes


def _no_cat_notes(events: pd.DataFrame) -> list[str]:
    """Duration events without ``cat`` are kept but no role can be given to them: say how many."""
    n = int(events["cat"].isna().sum())
    return (
        [
            f"{n} duration event(s) without cat: kept, but not counted as CPU ops, GPU activities, "
            "runtime calls or annotations"
        ]
        if n
        else []
    )


def arg_texts_at(texts, rows: np.ndarray) -> pd.Categorical:
    """One op arg's raw JSON texts (``Input Dims``, ``Input type``, ``Concrete Inputs``) at the
    given event rows as a categorical, each distinct text decoded once."""
    if texts is None or not len(rows):
        return pd.Categorical([None] * len(rows))
    if not isinstance(texts, Codes):
        return categorical(
            [bytes(d).decode("utf-8", "replace") if len(d) else None for d in (texts[i] for i in rows)]
        )
    sub = texts.take(rows)
    return categorical(Codes(sub.codes, [bytes(u).decode("utf-8", "replace") for u in sub.uniques]))


def parsed_lists(texts: pd.Series) -> np.ndarray:
    """A categorical of JSON texts as an object array of Python lists, each distinct text parsed
    once (rows with the same text share one list). A text that is not a JSON list stays the
    text, so nothing the trace wrote is lost; a missing one is None."""
    cats = texts.cat.categories
    lookup = np.empty(len(cats) + 1, dtype=object)
    lookup[:] = [_as_list(str(c)) for c in cats] + [None]
    codes = texts.cat.codes.to_numpy()
    return lookup[np.where(codes < 0, len(cats), codes)]


def _as_list(text: str):
    try:
        value = json.loads(text)
    except ValueError:
        return text
    return value if isinstance(value, list) else text


def list_codes(values) -> tuple[np.ndarray, np.ndarray]:
    """Codes (-1: missing) and the distinct values of an object column of lists, by identity:
    rows that share one list object (as ``parsed_lists`` makes them) share a code, without
    hashing or comparing the lists row by row."""
    arr = np.asarray(values, dtype=object)
    if not len(arr):
        return np.empty(0, dtype=np.int64), arr
    ids = np.fromiter(map(id, arr), dtype=np.int64, count=len(arr))
    codes, distinct = pd.factorize(ids)  # a hash table: ~10x faster than np.unique's sort here
    first = np.empty(len(distinct), dtype=np.int64)
    first[codes[::-1]] = np.arange(len(arr) - 1, -1, -1)  # the last write per code is its first row
    uniques = arr[first]
    missing = np.array([u is None for u in uniques], dtype=bool)
    return np.where(missing[codes], -1, codes).astype(np.int64), uniques


def lists_as_text(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with its ``LIST_ARGS`` columns of lists back as categoricals of JSON text (one
    ``json.dumps`` per distinct list): how the cache stores them (Arrow has no type for lists
    nested to varying depth)."""
    cols = [c for c in LIST_ARGS if c in frame.columns and frame[c].dtype == object]
    if not cols:
        return frame
    out = frame.copy(deep=False)
    for c in cols:
        codes, uniques = list_codes(out[c].to_numpy())
        texts = [v if isinstance(v, str) else json.dumps(v) for v in uniques]
        out[c] = categorical(Codes(codes, texts))
    return out


def _shift(ts: np.ndarray, base: int) -> np.ndarray:
    return np.where(ts == MISSING, MISSING, ts + base) if base else ts


def _base_ns(meta: dict) -> int:
    base = meta.get("baseTimeNanoseconds")
    if isinstance(base, int) and not isinstance(base, bool) and 0 <= base < 2**62:  # else ts + base overflows
        return base
    return 0


def _duration_events(cols: dict, ts: np.ndarray) -> pd.DataFrame:
    cat = categorical(cols["cat"])
    frame = pd.DataFrame(
        {
            "name": _names(cols["name"]),
            "cat": cat,
            "role": _roles(cat),
            "ts_ns": ts,
            "dur_ns": cols["dur_ns"],
            "pid": categorical(cols["pid"]),
            "tid": categorical(cols["tid"]),
            "correlation": int_column(cols["arg_correlation"]),
            "external_id": _external_id(cols),
            "device": int_column(cols["arg_device"]),
            "stream": int_column(cols["arg_stream"]),
            "bytes": int_column(cols["arg_bytes"]),
            "python_id": int_column(cols["arg_python_id"]),
            "python_parent_id": int_column(cols["arg_python_parent_id"]),
        },
        copy=False,  # the reader's arrays are this frame's alone: a copy of each cost 0.3 s at 1 GB
    )
    _steps_are_annotations(frame)
    return frame


def _steps_are_annotations(frame: pd.DataFrame) -> None:
    """2021 traces write ProfilerStep#N as an Operator; it is a step marker, not an op."""
    mask = _is_step(frame["name"]) & (frame["role"] == "cpu_op").to_numpy()
    if mask.any():
        frame.loc[mask, "role"] = "annotation"


def _names(values: list) -> pd.Categorical:
    cat = categorical(values)
    if cat.isna().any():  # an event without a name is still an event
        cat = cat.add_categories([""]) if "" not in cat.categories else cat
        cat = cat.fillna("")
    return cat


def _external_id(cols: dict) -> pd.arrays.IntegerArray:
    new = int_column(cols["arg_external_id"])
    old = int_column(cols["arg_external_id_2021"])
    return new.fillna(old) if (~old.isna()).any() else new


def _roles(cat: pd.Categorical) -> pd.Categorical:
    order = sorted(set(ROLES.values()) | {"other"})
    at = {r: i for i, r in enumerate(order)}
    codes = per_category(cat, lambda c: at[ROLES.get(str(c).lower(), "other")], at["other"], np.int8)
    return pd.Categorical.from_codes(codes, categories=order)  # unordered, as CategoricalDtype(order)


def flow_table(flows: dict, base: int) -> pd.DataFrame:
    """The flow events (``ac2g`` and the like): ``ph``, ``id``, ``pid``, ``tid``, ``ts_ns``."""
    ts = _shift(flows["ts_ns"], base)
    if isinstance(flows["cat"], Codes):
        flow_cat = np.array([c in FLOW_CATS for c in flows["cat"].uniques] + [False], dtype=bool)
        keep = np.flatnonzero(flow_cat[flows["cat"].codes])
        pick = (lambda v: v.take(keep)) if len(keep) != len(flows["cat"]) else (lambda v: v)
    else:
        cats = np.asarray(flows["cat"], dtype=object)
        keep = np.flatnonzero(np.isin(cats, FLOW_CATS))
        pick = (lambda v: [v[i] for i in keep]) if len(keep) != len(cats) else (lambda v: v)
    return pd.DataFrame(
        {
            "ph": categorical(pick(flows["ph"])),
            "id": categorical(pick(flows["id"])),
            "pid": categorical(pick(flows["pid"])),
            "tid": categorical(pick(flows["tid"])),
            "ts_ns": ts[keep],
        }
    )


def gpu_activity_table(events: pd.DataFrame) -> pd.DataFrame:
    """The kernels/memcpy/memset rows with device and stream filled from pid/tid."""
    mask = events["role"].isin(GPU_ROLES).to_numpy()
    k = events.loc[
        mask,
        [
            "name",
            "role",
            "ts_ns",
            "dur_ns",
            "pid",
            "tid",
            "device",
            "stream",
            "correlation",
            "external_id",
            "bytes",
        ],
    ].copy()
    k = k.rename(columns={"role": "kind"})
    kind = per_category(k["kind"], lambda r: GPU_ROLES.index(r) if r in GPU_ROLES else -1, -1, np.int64)
    k["kind"] = pd.Categorical.from_codes(kind, categories=list(GPU_ROLES))
    k["device"] = k["device"].fillna(_id_from(k["pid"]))
    k["stream"] = k["stream"].fillna(_id_from(k["tid"]))
    k["event"] = np.flatnonzero(mask)
    return k.reset_index(drop=True)


def _id_from(col: pd.Series) -> pd.Series:
    """Trailing integer of a pid/tid label ("stream 7" -> 7), per category, vectorised."""
    cats = col.cat.categories
    parsed = []
    for c in cats:
        m = _STREAM_RE.search(str(c))
        parsed.append(int(m.group(1)) if m else None)
    lookup = pd.array([*parsed, None], dtype="Int64")
    codes = col.cat.codes.to_numpy()
    return pd.Series(lookup[np.where(codes < 0, len(parsed), codes)], index=col.index)


def step_table(events: pd.DataFrame) -> pd.DataFrame:
    """ProfilerStep#N spans: step number, pid, tid, start and end in ns."""
    mask = _is_step(events["name"]) & events["role"].isin(("annotation", "cpu_op")).to_numpy()
    s = events.loc[mask, ["ts_ns", "dur_ns", "pid", "tid"]]
    out = pd.DataFrame(
        {
            "step": step_numbers(events["name"].array[mask]),
            "pid": s["pid"].to_numpy(),
            "tid": s["tid"].to_numpy(),
            "ts_ns": s["ts_ns"].to_numpy(),
            "dur_ns": s["dur_ns"].to_numpy(),
            "event": np.flatnonzero(mask),
        }
    )
    return out.sort_values("ts_ns", kind="stable").drop_duplicates("step").reset_index(drop=True)


# ------------------------------------------------------------------ [memory] events

MEMORY_COLUMNS = ("addr", "bytes", "allocated", "reserved", "device_type", "device_id")


def memory_table(cols: dict, base: int = 0, notes: list | None = None) -> pd.DataFrame:
    """The ``[memory]`` events as a table in time order (ties keep file order): ``ts_ns``,
    ``pid``, ``tid``, ``device`` (``cuda:0``, ``cpu``), ``addr``, ``bytes`` (negative: a free),
    ``allocated``/``reserved`` (the trace's ``Total Allocated``/``Total Reserved`` after the
    event; missing in 2021 traces, which record neither, nor ``Addr``), ``device_type``,
    ``device_id``. An event without a usable time, byte count or device type is left out and
    counted in ``notes``."""
    if not cols or not len(cols.get("ts_ns", ())):
        empty = {c: pd.array([], dtype="Int64" if c in _NULLABLE else "int64") for c in MEMORY_COLUMNS}
        cat = pd.Categorical([])
        return pd.DataFrame({"ts_ns": np.empty(0, np.int64), "pid": cat, "tid": cat, "device": cat, **empty})
    ts = _shift(cols["ts_ns"], base)
    got = {c: int_column(cols["arg_mem_" + name]) for c, name in zip(MEMORY_COLUMNS, _MEM_ARGS, strict=True)}
    ok = (ts != MISSING) & ~got["bytes"].isna() & ~got["device_type"].isna()
    if notes is not None and not ok.all():
        notes.append(
            f"skipped {int((~ok).sum())} [memory] event(s) without a usable time, Bytes or Device Type"
        )
    frame = pd.DataFrame(
        {"ts_ns": ts, "pid": categorical(cols["pid"]), "tid": categorical(cols["tid"]), **got}
    )[ok]
    frame = frame.iloc[np.argsort(frame["ts_ns"].to_numpy(), kind="stable")].reset_index(drop=True)
    frame["device_id"] = frame["device_id"].fillna(-1)
    frame.insert(3, "device", _device_labels(frame["device_type"], frame["device_id"]))
    for c in ("bytes", "device_type", "device_id"):  # never missing from here on
        frame[c] = frame[c].to_numpy(dtype=np.int64)
    return frame


_NULLABLE = ("addr", "allocated", "reserved")  # what a 2021 trace does not record
_MEM_ARGS = ("addr", "bytes", "total_allocated", "total_reserved", "device_type", "device_id")


def _device_labels(kind: pd.Series, index: pd.Series) -> pd.Categorical:
    """``<name>:<id>`` per row (``<name>`` for id -1), one string per distinct pair."""
    pairs = pd.MultiIndex.from_arrays([kind.to_numpy(np.int64), index.to_numpy(np.int64)])
    codes, uniques = pd.factorize(pairs)
    names = device_type_names()
    labels = [names.get(int(t), f"device{int(t)}") + (f":{int(i)}" if i != -1 else "") for t, i in uniques]
    return pd.Categorical.from_codes(codes, categories=labels)  # distinct pairs give distinct labels


class MemoryRules(msgspec.Struct, forbid_unknown_fields=True):
    version: int
    allocators: list[str]
    device_type: dict[str, str]


@functools.cache
def memory_rules() -> MemoryRules:
    """``rules/memory.toml``: device type numbers, the allocator ops."""
    path = Path(__file__).parent / "rules" / "memory.toml"
    return schema.convert(schema.read(path, "memory rules"), MemoryRules)


def device_type_names() -> dict:
    """c10's device type numbers -> names (``1 -> "cuda"``)."""
    return {int(k): v for k, v in memory_rules().device_type.items()}
