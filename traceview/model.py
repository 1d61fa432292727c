"""Raw columns -> typed DataFrames (events, flows, thread names) and the Trace.

Categories are normalised across Kineto's formats into a ``role`` column
(2021's ``Operator``/``Runtime``/``Kernel`` and today's ``cpu_op``/
``cuda_runtime``/``kernel`` alike) so that later stages never look at format
quirks again. Times are int64 nanoseconds, absolute when the trace gives
``baseTimeNanoseconds``.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
import pandas as pd

from .numbers import MISSING
from .read import Codes, IntColumn, int_values
from .read.events import TEXT_ARGS

#: the op args kept per CPU op, as raw JSON text: ``Input Dims``, ``Input type``, ``Concrete Inputs``
OP_ARGS = TEXT_ARGS

# cat (as written, lower-cased) -> role
ROLES = {
    "cpu_op": "cpu_op", "operator": "cpu_op",
    "user_annotation": "annotation",
    "cuda_runtime": "runtime", "runtime": "runtime", "cuda_driver": "runtime",
    "kernel": "kernel", "gpu_memcpy": "memcpy", "memcpy": "memcpy",
    "gpu_memset": "memset", "memset": "memset",
    "gpu_user_annotation": "gpu_annotation",
    "python_function": "python", "cuda_sync": "sync",
}
GPU_ROLES = ("kernel", "memcpy", "memset")
CPU_NEST_ROLES = ("cpu_op", "annotation", "runtime")
FLOW_CATS = ("ac2g", "async_cpu_to_gpu", "async", "flow_event")
STEP_RE = re.compile(r"^ProfilerStep#(\d{1,18})$")  # 19+ digits would overflow int64
_STREAM_RE = re.compile(r"(?<!\d)(\d{1,18})\s*$")


@dataclass
class Trace:
    """One loaded trace: typed, linked, classified DataFrames plus metadata."""

    path: str
    events: pd.DataFrame
    kernels: pd.DataFrame
    ops: pd.DataFrame
    steps: pd.DataFrame
    meta: dict
    warnings: list = field(default_factory=list)
    stats: dict = field(default_factory=dict)
    devices: str | None = None  # the user's device table (TOML) beside the built-in one; see traceview.devices

    @property
    def label(self) -> str:
        """Collector variant when the trace says one, else the file's stem."""
        info = self.meta.get("traceview")
        if isinstance(info, dict) and info.get("variant"):
            return str(info["variant"])
        name = self.path.rsplit("/", 1)[-1]
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
        return (f"<Trace {self.label!r}: {len(self.events)} events, {len(self.kernels)} GPU activities, "
                f"{len(self.ops)} CPU ops, {len(self.steps)} steps>")


def categorical(values) -> pd.Categorical:
    """Strings (or mixed str/int ids) as a categorical of strings; None stays missing.

    ``values`` is a list/array, or ``Codes`` the reader already factorized."""
    if isinstance(values, Codes):
        codes, uniques = values.codes, values.uniques
    else:
        codes, uniques = pd.factorize(np.asarray(values, dtype=object), use_na_sentinel=True)
    labels = [str(u) for u in uniques]
    if len(set(labels)) != len(labels):  # e.g. tid 7 and "7": merge them
        labels_arr = np.array(labels, dtype=object)
        merged, remap = np.unique(labels_arr, return_inverse=True)
        codes = np.where(codes >= 0, remap[np.clip(codes, 0, None)], -1)
        labels = list(merged)
    return pd.Categorical.from_codes(codes, categories=pd.Index(labels, dtype=object))


def per_category(col, fn, missing, dtype=object) -> np.ndarray:
    """``fn(category)`` for every row of a categorical, computed once per category
    (rows with no category get ``missing``)."""
    cat = col.cat if isinstance(col, pd.Series) else col
    lookup = np.array([fn(c) for c in cat.categories] + [missing], dtype=dtype)
    return lookup[np.asarray(cat.codes)]  # code -1 picks the trailing ``missing``


def step_numbers(names) -> np.ndarray:
    """N for rows named ``ProfilerStep#N``, -1 elsewhere."""
    def number(name) -> int:
        m = STEP_RE.match(str(name))
        return int(m.group(1)) if m else -1
    return per_category(names, number, -1, np.int64)


def int_column(values) -> pd.array:
    """ints with None (or non-int junk) -> nullable Int64 (also takes the reader's ``IntColumn``)."""
    if not isinstance(values, IntColumn):
        if not len(values):
            return pd.array([], dtype="Int64")
        values = int_values(list(values))
    return pd.arrays.IntegerArray(values.values, values.mask)


class Built(NamedTuple):
    """What the model makes of the raw columns."""

    events: pd.DataFrame
    flows: pd.DataFrame
    op_args: dict       # OP_ARGS name -> the events' raw arg texts (reader's Codes or list), row-aligned
    counts: dict        # events per phase, as read
    notes: list         # what was unusable, counted


def build_events(cols: dict, meta: dict) -> Built:
    """The duration-event table, the flow table, the raw op arg texts, per-phase counts and notes."""
    base = _base_ns(meta)
    events = _duration_events(cols, _shift(cols["ts_ns"], base))
    keep, notes = _usable(events)
    texts = {name: cols.get("arg_" + name) for name in OP_ARGS}
    if keep is not None:
        events = events.iloc[keep].reset_index(drop=True)
        texts = {name: _take(t, keep) for name, t in texts.items()}
    flows = _flow_events(cols["flows"], _shift(cols["flows"]["ts_ns"], base))
    return Built(events, flows, texts, cols["counts"], notes)


def _take(texts, rows: np.ndarray):
    if texts is None:
        return None
    return texts.take(rows) if hasattr(texts, "take") else [texts[i] for i in rows]


def _usable(events: pd.DataFrame) -> tuple[np.ndarray | None, list[str]]:
    """A duration event needs a start: the rows to keep (None: all) and notes. A missing
    duration counts as zero (and is counted), so no sentinel ever reaches a sum."""
    notes = []
    no_dur = events["dur_ns"].to_numpy() == MISSING
    if no_dur.any():
        events.loc[no_dur, "dur_ns"] = 0
        notes.append(f"{int(no_dur.sum())} duration event(s) had no usable dur; counted as 0 ns")
    keep = events["ts_ns"].to_numpy() != MISSING
    if keep.all():
        return None, notes
    notes.append(f"skipped {int((~keep).sum())} duration event(s) with no usable ts")
    return np.flatnonzero(keep), notes


def arg_texts_at(texts, rows: np.ndarray) -> pd.Categorical:
    """One op arg's raw JSON texts (``Input Dims``, ``Input type``, ``Concrete Inputs``) at the
    given event rows as a categorical, each distinct text decoded once."""
    if texts is None or not len(rows):
        return pd.Categorical([None] * len(rows))
    if not isinstance(texts, Codes):
        return categorical([bytes(d).decode("utf-8", "replace") if len(d) else None
                            for d in (texts[i] for i in rows)])
    sub = texts.take(rows)
    return categorical(Codes(sub.codes, [bytes(u).decode("utf-8", "replace") for u in sub.uniques]))


def _shift(ts: np.ndarray, base: int) -> np.ndarray:
    return np.where(ts == MISSING, MISSING, ts + base) if base else ts


def _base_ns(meta: dict) -> int:
    base = meta.get("baseTimeNanoseconds")
    ok = isinstance(base, int) and not isinstance(base, bool) and 0 <= base < 2**62  # else ts + base overflows
    return int(base) if ok else 0


def _duration_events(cols: dict, ts: np.ndarray) -> pd.DataFrame:
    cat = categorical(cols["cat"])
    frame = pd.DataFrame({
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
    })
    _steps_are_annotations(frame)
    return frame


def _steps_are_annotations(frame: pd.DataFrame) -> None:
    """2021 traces write ProfilerStep#N as an Operator; it is a step marker, not an op."""
    mask = (step_numbers(frame["name"]) >= 0) & (frame["role"] == "cpu_op").to_numpy()
    if mask.any():
        frame.loc[mask, "role"] = "annotation"


def _names(values: list) -> pd.Categorical:
    cat = categorical(values)
    if cat.isna().any():  # an event without a name is still an event
        cat = cat.add_categories([""]) if "" not in cat.categories else cat
        cat = cat.fillna("")
    return cat


def _external_id(cols: dict) -> pd.array:
    new = int_column(cols["arg_external_id"])
    old = int_column(cols["arg_external_id_2021"])
    return new.fillna(old) if (~old.isna()).any() else new


def _roles(cat: pd.Categorical) -> pd.Categorical:
    order = sorted(set(ROLES.values()) | {"other"})
    at = {r: i for i, r in enumerate(order)}
    codes = per_category(cat, lambda c: at[ROLES.get(str(c).lower(), "other")], at["other"], np.int64)
    return pd.Categorical.from_codes(codes, dtype=pd.CategoricalDtype(order))


def _flow_events(flows: dict, ts: np.ndarray) -> pd.DataFrame:
    if isinstance(flows["cat"], Codes):
        flow_cat = np.array([c in FLOW_CATS for c in flows["cat"].uniques] + [False], dtype=bool)
        keep = np.flatnonzero(flow_cat[flows["cat"].codes])
        pick = (lambda v: v.take(keep)) if len(keep) != len(flows["cat"]) else (lambda v: v)
    else:
        cats = np.asarray(flows["cat"], dtype=object)
        keep = np.flatnonzero(np.isin(cats, FLOW_CATS))
        pick = (lambda v: [v[i] for i in keep]) if len(keep) != len(cats) else (lambda v: v)
    return pd.DataFrame({
        "ph": categorical(pick(flows["ph"])),
        "id": categorical(pick(flows["id"])),
        "pid": categorical(pick(flows["pid"])),
        "tid": categorical(pick(flows["tid"])),
        "ts_ns": ts[keep],
    })


def gpu_activities(events: pd.DataFrame) -> pd.DataFrame:
    """The kernels/memcpy/memset rows with device and stream filled from pid/tid."""
    mask = events["role"].isin(GPU_ROLES).to_numpy()
    k = events.loc[mask, ["name", "role", "ts_ns", "dur_ns", "pid", "tid", "device", "stream",
                          "correlation", "external_id", "bytes"]].copy()
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
    lookup = pd.array(parsed + [None], dtype="Int64")
    codes = col.cat.codes.to_numpy()
    return pd.Series(lookup[np.where(codes < 0, len(parsed), codes)], index=col.index)


def step_table(events: pd.DataFrame) -> pd.DataFrame:
    """ProfilerStep#N spans: step number, pid, tid, start and end in ns."""
    number = step_numbers(events["name"])
    mask = (number >= 0) & events["role"].isin(("annotation", "cpu_op")).to_numpy()
    s = events.loc[mask, ["ts_ns", "dur_ns", "pid", "tid"]]
    out = pd.DataFrame({
        "step": number[mask],
        "pid": s["pid"].to_numpy(),
        "tid": s["tid"].to_numpy(),
        "ts_ns": s["ts_ns"].to_numpy(),
        "dur_ns": s["dur_ns"].to_numpy(),
        "event": np.flatnonzero(mask),
    })
    return out.sort_values("ts_ns", kind="stable").drop_duplicates("step").reset_index(drop=True)
