"""``load(path) -> Trace``: read, model, link and classify in one call."""
from __future__ import annotations

import os

import numpy as np
import pandas as pd

from . import link
from .classify import annotate
from .model import Trace, build_events, categorical, gpu_activities, per_category, step_table
from .read import DEFAULT_MAX_BYTES, Codes, read


def load(path, *, salvage: bool = False, max_bytes: int = DEFAULT_MAX_BYTES, rules=None,
         cache=None) -> Trace:
    """Load one saved PyTorch profiler trace (.json, .json.gz, any gzip) into a Trace.

    ``salvage=True`` loads a truncated trace up to the cut and warns what was lost.
    ``rules`` adds or overrides kernel classification rules (see traceview.classify).
    ``cache`` (True, False, or a folder) controls the columnar cache, where available.
    """
    from . import cache as cache_mod

    path = os.fspath(path)
    if cache is not False and not salvage and rules is None:
        hit = cache_mod.lookup(path, cache)
        if hit is not None:
            return hit
    try:
        trace = _load_uncached(path, salvage=salvage, max_bytes=max_bytes, rules=rules)
    except MemoryError:  # the up-front memory check is an estimate; never crash with a bare MemoryError
        from .errors import TraceReadError
        from .limits import available_memory

        avail = available_memory()
        left = f" ({avail / 2**30:.1f} GiB available now)" if avail is not None else ""
        raise TraceReadError(path, f"ran out of memory while loading{left}") from None
    if cache is not False and not salvage and rules is None:
        cache_mod.store(trace, cache)
    return trace


def _load_uncached(path: str, *, salvage: bool, max_bytes: int, rules) -> Trace:
    raw = read(path, max_bytes=max_bytes, salvage=salvage)
    events, flows, phase_counts, notes = build_events(raw.columns, raw.meta)
    warnings = list(raw.warnings) + _phase_warnings(path, phase_counts) + [f"{path}: {n}" for n in notes]
    input_dims = events.attrs.pop("input_dims", None)
    nesting = link.nest(events)
    steps = step_table(events)
    kernels = gpu_activities(events)
    launch = link.launches(kernels, events, flows)
    kernels = _link_kernels(kernels, launch, events, nesting, steps)
    ops = _ops_table(events, nesting, steps, kernels, input_dims)
    kernels = annotate(kernels, rules=rules)
    stats = {"n_events": raw.n_events, "phases": phase_counts,
             "linked_to_op": float(kernels["op"].notna().mean()) if len(kernels) else 1.0,
             "linked_to_launch": float((kernels["launch"] >= 0).mean()) if len(kernels) else 1.0}
    return Trace(path=path, events=events, kernels=kernels, ops=ops, steps=steps,
                 meta=raw.meta, warnings=warnings, stats=stats)


def _phase_warnings(path: str, counts: dict) -> list[str]:
    be = counts.get("B", 0) + counts.get("E", 0)
    return [f"{path}: {be} begin/end (B/E) events are not supported and were skipped"] if be else []


def _link_kernels(kernels, launch, events, nesting, steps) -> pd.DataFrame:
    anc = link.ancestry(launch, nesting, events)
    op_row = anc["op_row"].to_numpy().copy()
    by_ext = _op_rows_by_external_id(events)
    need = op_row < 0
    if need.any() and len(by_ext):
        ext = kernels["external_id"][need]
        found = by_ext.reindex(ext.fillna(-1).astype("int64").to_numpy()).fillna(-1).astype("int64").to_numpy()
        op_row[np.flatnonzero(need)] = found
    step = anc["step"].to_numpy().copy()
    has_launch = launch >= 0
    if (step < 0).any() and len(steps):
        ts = events["ts_ns"].to_numpy()
        at = np.clip(launch, 0, None)
        when = np.where(has_launch, ts[at], -1)
        where = np.where(has_launch, per_category(events["pid"], str, "nan")[at], "")
        by_time = link.steps_by_time(when, where, steps)
        step = np.where((step < 0) & has_launch, by_time, step)
    names = events["name"]
    kernels["op"] = _names_at(names, op_row)
    kernels["top_op"] = _names_at(names, np.where(anc["top_op_row"] >= 0, anc["top_op_row"], op_row))
    kernels["annotation"] = _names_at(names, anc["annotation_row"].to_numpy())
    kernels["step"] = _nullable(step)
    kernels["launch"] = launch
    kernels["op_event"] = op_row
    kernels["launch_name"] = _names_at(names, launch)
    return kernels


def _nullable(step: np.ndarray) -> pd.arrays.IntegerArray:
    """Step numbers as Int64, -1 (no step) as missing."""
    return pd.arrays.IntegerArray(np.where(step >= 0, step, 0), step < 0)


def _op_rows_by_external_id(events) -> pd.Series:
    ext = events["external_id"][(events["role"] == "cpu_op").to_numpy()].dropna()
    ext = ext[~ext.index.duplicated()]
    s = pd.Series(ext.index.to_numpy(), index=ext.astype("int64").to_numpy())
    return s[~s.index.duplicated()]


def _names_at(names: pd.Series, rows: np.ndarray) -> pd.Categorical:
    rows = np.asarray(rows)
    codes = np.where(rows >= 0, names.cat.codes.to_numpy()[np.clip(rows, 0, None)], -1)
    used = np.unique(codes[codes >= 0])
    remap = np.full(len(names.cat.categories) + 1, -1)
    remap[used] = np.arange(len(used))
    return pd.Categorical.from_codes(np.where(codes >= 0, remap[codes], -1),
                                     categories=names.cat.categories[used])


def _ops_table(events, nesting, steps, kernels, input_dims) -> pd.DataFrame:
    rows = np.flatnonzero((events["role"] == "cpu_op").to_numpy())
    anc = link.ancestry(rows, nesting, events)
    pos = np.full(len(events), -1, dtype=np.int64)
    pos[rows] = np.arange(len(rows))
    parent = np.where(anc["op_row"] >= 0, pos[np.clip(anc["op_row"], 0, None)], -1)
    ev = events[["name", "ts_ns", "dur_ns", "pid", "tid", "external_id"]].iloc[rows]
    ops = pd.DataFrame({
        "name": ev["name"].array, "ts_ns": ev["ts_ns"].to_numpy(), "dur_ns": ev["dur_ns"].to_numpy(),
        "pid": ev["pid"].array, "tid": ev["tid"].array,
        "depth": _depth(parent), "parent": parent,
        "external_id": ev["external_id"].array,
    })
    ops["name"] = ops["name"].cat.remove_unused_categories()
    ops["input_dims"] = _input_dims(input_dims, rows)
    ops["annotation"] = _names_at(events["name"], anc["annotation_row"].to_numpy())
    step = anc["step"].to_numpy()
    if (step < 0).any() and len(steps):
        by_time = link.steps_by_time(ops["ts_ns"].to_numpy(), per_category(ops["pid"], str, "nan"), steps)
        step = np.where(step < 0, by_time, step)
    ops["step"] = _nullable(step)
    ops["event"] = rows
    _gpu_totals(ops, pos, kernels)
    return ops


def _input_dims(input_dims, rows: np.ndarray) -> pd.Categorical:
    """The ops' ``Input Dims`` texts as a categorical, decoding each distinct text once."""
    if input_dims is None or not len(rows):
        return pd.Categorical([None] * len(rows))
    if not isinstance(input_dims, Codes):
        return categorical([bytes(d).decode("utf-8", "replace") if len(d) else None
                            for d in (input_dims[i] for i in rows)])
    sub = input_dims.take(rows)
    return categorical(Codes(sub.codes, [bytes(u).decode("utf-8", "replace") for u in sub.uniques]))


def _depth(parent: np.ndarray) -> np.ndarray:
    depth = np.zeros(len(parent), dtype=np.int64)
    cur = parent.copy()
    while (active := cur >= 0).any():
        depth[active] += 1
        cur[active] = parent[cur[active]]
    return depth


def _gpu_totals(ops: pd.DataFrame, pos: np.ndarray, kernels: pd.DataFrame) -> None:
    """Self and inclusive GPU activity counts and time per op, up the op tree."""
    n = len(ops)
    op_event = kernels["op_event"].to_numpy()
    owner = np.where(op_event >= 0, pos[np.clip(op_event, 0, None)], -1)
    dur = np.clip(kernels["dur_ns"].to_numpy(), 0, None)
    linked = owner >= 0
    ops["n_kernels_self"] = np.bincount(owner[linked], minlength=n).astype(np.int64)
    ops["gpu_ns_self"] = np.bincount(owner[linked], weights=dur[linked], minlength=n).astype(np.int64)
    total_n = np.zeros(n, dtype=np.int64)
    total_ns = np.zeros(n, dtype=np.int64)
    parent = ops["parent"].to_numpy()
    cur, d = owner[linked], dur[linked]
    while len(cur):
        total_n += np.bincount(cur, minlength=n)
        total_ns += np.bincount(cur, weights=d, minlength=n).astype(np.int64)
        cur = parent[cur]
        keep = cur >= 0
        cur, d = cur[keep], d[keep]
    ops["n_kernels"] = total_n
    ops["gpu_ns"] = total_ns
