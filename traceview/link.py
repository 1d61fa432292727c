"""All linking: GPU activity <-> runtime launch <-> CPU op <-> op tree <-> step, vectorised.

``link(built)`` is the one entry point ``load`` calls; everything that ties one event
to another lives in this module. Three joins, each with a fallback, because
traces differ in what they carry:

1. GPU activity -> runtime launch by ``correlation`` (every Kineto format);
   else through the ``ac2g`` flow pair whose end sits on the activity.
   A ``cudaGraphLaunch`` shares its correlation with all its kernels, so one
   launch links to many activities; an id that several launches carry (ids
   reused across merged processes, a damaged trace) links nothing, counted.
2. launch -> CPU op by nesting: the innermost ``cpu_op`` on the launch's thread
   whose span contains it. Nesting is computed for all CPU spans at once with a
   sweep over sorted start/end keys (no Python loop over events).
   Where that finds no op, the activity's ``External id`` names the op directly
   (some 2022-23 Kineto builds wrote the correlation into the launch's External
   id instead, which is why nesting comes first); an External id that several
   ops carry names none of them, counted.
3. -> step: the ``ProfilerStep#N`` around the launch (on any thread of the
   process, so that backward-thread launches count for the step); failing that,
   the step whose span holds the launch's (or op's) start in the same process.

The op table is built here too: each op's parent op, depth, op chain (the names
from the outermost op down, ``aten::masked_fill → aten::clone → aten::copy_``),
self time, and the GPU activities it launched itself and through its children.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple, cast

import numpy as np
import pandas as pd

from .model import CPU_NEST_ROLES, Built, arg_texts_at, per_category, step_numbers
from .trees import (
    count_ancestors,
    marked_walks,
    nearest,
    number_paths,
    open_depths,
    parents_by_depth,
    subtree_sums,
)

_ROLE_ORDER = {"annotation": 0, "cpu_op": 1, "runtime": 2}


def nest(events: pd.DataFrame) -> pd.DataFrame:
    """Parent and depth of every CPU span (cpu_op, annotation, runtime) on its thread.

    Returns a frame indexed like ``events`` rows that took part, with columns
    ``parent`` (events row, -1 for roots) and ``depth``.
    """
    rows, order, parent_pos, depth = _nesting(events)
    parent = np.full(len(rows), -1, dtype=np.int64)
    has = parent_pos >= 0
    parent[order[has]] = rows[order[parent_pos[has]]]
    depth_out = np.empty(len(rows), dtype=np.int64)
    depth_out[order] = depth
    return pd.DataFrame({"parent": parent, "depth": depth_out}, index=rows)


def parents(events: pd.DataFrame) -> np.ndarray:
    """``nest``'s parents as one array over all events rows and one more, a last -1 (see
    ``Ancestors``): -1 for a root and for every row that is no CPU span. What ``link`` reads,
    without the frame, the depths or the copies ``nest`` makes for a caller."""
    rows, order, parent_pos, _ = _nesting(events)
    out = np.full(len(events) + 1, -1, dtype=np.int64)
    has = parent_pos >= 0
    out[rows[order[has]]] = rows[order[parent_pos[has]]]
    return out


def _nesting(events: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The CPU spans' events ``rows``, their sorted ``order`` (by thread, start, outer first),
    and per sorted position its parent's sorted position (-1: none) and depth."""
    role = events["role"]
    nested = per_category(role, lambda r: r in CPU_NEST_ROLES, False, bool)  # on codes, not strings
    rows = np.flatnonzero(nested & (events["ts_ns"].to_numpy() > np.iinfo(np.int64).min))
    if len(rows) == 0:
        return rows, rows, rows, rows
    # numpy arrays taken at the rows, not a sub-frame: pandas' take of the categoricals cost more;
    # worked out in place where they can be: each fresh array of 10^6 spans is pages to fault in
    start = events["ts_ns"].to_numpy()[rows]
    end = events["dur_ns"].to_numpy()[rows]
    np.maximum(end, 0, out=end)
    end += start
    group = _thread_group(events["pid"].cat.codes.to_numpy()[rows], events["tid"].cat.codes.to_numpy()[rows])
    prio = per_category(role, lambda r: _ROLE_ORDER.get(r, -1), -1, np.int8)[rows]  # no role: -1
    key = _time_key(group, start, end)
    if key is None:  # times too far apart to share one int64 with the thread: sort the keys apart
        order = np.lexsort((prio, -end, start, group))  # outer spans first on ties
        depth = _depths(start[order], end[order], group[order])
        return rows, order, parents_by_depth(depth), depth
    del group
    order, ks = _order(key, end, prio)
    end -= start  # each span's end key is its start key plus its length
    end += key
    # into start's array, now free; mode "clip" takes without a buffer (order is a permutation)
    depth, parent_pos = open_depths(ks, np.take(end, order, out=start, mode="clip"))
    return rows, order, parent_pos, depth


def _thread_group(pid: np.ndarray, tid: np.ndarray) -> np.ndarray:
    """One int64 per (pid, tid) pair of category codes."""
    group = pid.astype(np.int64)
    group *= int(tid.max(initial=0)) + 2
    group += tid  # in place: the codes widen as they are added
    return group


def _time_key(group: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray | None:
    """(thread, start) as one int64 that sorts as the pair, or None when it would not fit."""
    base = int(start.min())
    span = int(end.max()) - base + 1
    if int(group.max()) * span + span >= 2**62:  # only hostile times or thread counts get here
        return None
    key = group * span
    key += start
    key -= base  # in place: group * span + (start - base), which fits, with one array
    return key


def _order(key: np.ndarray, end: np.ndarray, prio: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The spans by key, then outer first (later end, then role) where keys tie: the order
    ``np.lexsort((prio, -end, key))`` gives, at a fraction of its cost, and the keys in that
    order. The key is nearly sorted already (a thread's events are written in time order),
    which a stable sort runs through in close to one pass; only the spans that share a key are
    sorted on the other two (among equal keys: the sorted keys stay as they are)."""
    order = np.argsort(key, kind="stable")
    ks = key[order]
    same = ks[1:] == ks[:-1]
    if same.any():
        tied = np.flatnonzero(np.r_[False, same] | np.r_[same, False])
        sub = order[tied]
        order[tied] = sub[np.lexsort((prio[sub], -end[sub], ks[tied]))]
    return order, ks


def _depths(start: np.ndarray, end: np.ndarray, group: np.ndarray) -> np.ndarray:
    """Open spans at each start, by a sweep over (group, time, position, kind) keys.

    At equal times an end sorts before a later span's start (siblings touch)
    and after its own start (zero-length spans).
    """
    n = len(start)
    pos = np.arange(n)
    keys_group = np.concatenate([group, group])
    keys_time = np.concatenate([start, end])
    keys_pos = np.concatenate([pos, pos])
    keys_kind = np.concatenate([np.zeros(n, np.int8), np.ones(n, np.int8)])
    sweep = np.lexsort((keys_kind, keys_pos, keys_time, keys_group))
    is_end = keys_kind[sweep] == 1
    ends_before = np.cumsum(is_end) - is_end
    depth = np.empty(n, dtype=np.int64)
    starts_at = sweep[~is_end]
    depth[keys_pos[starts_at]] = keys_pos[starts_at] - ends_before[~is_end]
    return depth


def launches(
    kernels: pd.DataFrame, events: pd.DataFrame, flows: Callable[[], pd.DataFrame]
) -> tuple[np.ndarray, int]:
    """events row of the runtime call that launched each GPU activity, -1 if none; and how many
    activities were left unlinked because their correlation id names several launches.
    ``flows`` builds the flow table, asked for only when some activity has no launch by id."""
    ids, launch_rows, ambiguous = _launch_rows_by_correlation(events)
    out = np.full(len(kernels), -1, dtype=np.int64)
    corr = kernels["correlation"]
    has = corr.notna().to_numpy()
    if has.any() and len(ids):
        out[has] = sorted_lookup(ids, launch_rows, corr[has].astype("int64").to_numpy())
    missing = out < 0
    if missing.any() and len(table := flows()):
        out[missing] = _launch_by_flow(kernels[missing], events, table)
    unsure = has & (out < 0)
    unsure[has] &= corr[has].astype("int64").isin(ambiguous).to_numpy()
    return out, int(unsure.sum())


def sorted_lookup(keys: np.ndarray, values: np.ndarray, queries: np.ndarray) -> np.ndarray:
    """Per query, ``values[i]`` where ``keys[i]`` equals it, -1 where no key does (``keys``
    sorted and distinct): one binary search each, where pandas' reindex first builds a hash table
    of the keys (0.1 s for 10^6 ids)."""
    if not len(keys):
        return np.full(len(queries), -1, dtype=np.int64)
    at = np.clip(np.searchsorted(keys, queries), 0, len(keys) - 1)
    return np.where(keys[at] == queries, values[at], -1)


def _launch_rows_by_correlation(events: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The correlation ids with one runtime launch (sorted) and the events row of that launch
    each, and the ids that name several launches.

    A runtime call and the driver call under it may share an id (the runtime call is the launch).
    Two runtime calls with one id (ids reused across processes merged into one file, a damaged
    trace) leave the id ambiguous: which launch an activity came from cannot be told, so such
    ids link nothing (the flow events, when present, may still tell) rather than all to the first.
    A graph launch is one call with many activities, which is not ambiguous."""
    corr = events["correlation"]
    # runtime calls with an id (role compares codes, not strings)
    row = np.flatnonzero((events["role"] == "runtime").to_numpy() & corr.notna().to_numpy())
    ids = corr.array[row].to_numpy(dtype=np.int64)  # the rows' ids (none missing), not all rows' first
    driver = per_category(events["cat"], lambda c: str(c) == "cuda_driver", False, bool)[row]
    # per id, its runtime calls before its driver calls, each in file order: the first row of an
    # id is its launch, and the id is ambiguous when the next row is another call of that kind
    order = np.lexsort((row, driver, ids))
    row, ids, driver = row[order], ids[order], driver[order]
    first = np.ones(len(row), dtype=bool)
    first[1:] = ids[1:] != ids[:-1]
    twice = np.zeros(len(row), dtype=bool)
    twice[:-1] = ~first[1:] & (driver[1:] == driver[:-1])
    ambiguous = ids[first & twice]
    keep = first & ~twice
    return ids[keep], row[keep], ambiguous


def _launch_by_flow(kernels: pd.DataFrame, events: pd.DataFrame, flows: pd.DataFrame) -> np.ndarray:
    """events row of the runtime launch each of ``kernels`` is tied to by a flow, -1 if none: the
    flow that ends on the activity (same pid, tid and ts), the start of that flow id, and the
    runtime call at the start's pid, tid and ts (the first in the file where several are).

    A flow id with two starts, or two flows ending on one activity: which is meant cannot be
    told, so it links nothing. Exact copies of a flow event count as one. pid, tid and id match
    by their text (pid 1 and "1" are one process), worked out per category, not per row; each
    join is a search in sorted int64 keys, one key per (pid, tid, ts)."""
    rt = np.flatnonzero((events["role"] == "runtime").to_numpy())  # compares codes, not strings
    ph = flows["ph"]
    fl = np.flatnonzero(per_category(ph, lambda p: str(p) in ("s", "f"), False, bool))
    is_end = per_category(ph, lambda p: str(p) == "f", False, bool)[fl]
    k_key, f_key, r_key = _thread_time_keys([(kernels, None), (flows, fl), (events, rt)])
    (ids,) = _text_codes([flows["id"]], [fl])
    # only the flows ending on these activities, and the starts of those flows' ids, can matter:
    # the copies and clashes are looked for among them, not among all the trace's flows
    e = is_end & _in_sorted(f_key, np.unique(k_key))
    e_key, e_id = _sole(*_distinct_pairs(f_key[e], ids[e]))
    flow_id = sorted_lookup(e_key, e_id, k_key)  # codes and keys are >= 0: -1 finds nothing
    s = ~is_end & np.isin(ids, e_id)
    s_id, s_key = _sole(*_distinct_pairs(ids[s], f_key[s]))
    start_key = sorted_lookup(s_id, s_key, flow_id)
    r = _in_sorted(r_key, np.unique(start_key))
    r_keys, first = np.unique(r_key[r], return_index=True)  # rt rows rise: the first in the file
    return sorted_lookup(r_keys, rt[r][first], start_key)


def _text_codes(cols: list, rows: list) -> list[np.ndarray]:
    """Each column's values at its ``rows`` (None: all) as codes of their text (``str`` of each
    category), in one code space shared by all ``cols``: pid 1 in one table and "1" in another
    read one code. A missing value reads one more code of its own: missing matches missing, not
    the text "nan"."""
    cats = [c.array if isinstance(c.dtype, pd.CategoricalDtype) else pd.Categorical(c) for c in cols]
    codes = [
        np.asarray(c.codes) if r is None else np.asarray(c.codes)[r] for c, r in zip(cats, rows, strict=True)
    ]
    if len(cats) == 1 and cats[0].categories.inferred_type == "string":  # the codes are text codes
        return [np.where(codes[0] >= 0, codes[0], len(cats[0].categories)).astype(np.int64)]
    texts = [np.array([str(v) for v in c.categories], dtype=object) for c in cats]
    shared, uniq = pd.factorize(np.concatenate(texts))
    out, at = [], 0
    for c, t in zip(codes, texts, strict=True):
        lookup = np.append(shared[at : at + len(t)], len(uniq)).astype(np.int64)  # code -1 reads the last
        out.append(lookup[c])
        at += len(t)
    return out


def _thread_time_keys(parts: list) -> list[np.ndarray]:
    """For each (frame, rows) of ``parts`` (rows None: all), one int64 >= 0 per row, equal exactly
    where (pid text, tid text, ts_ns) are equal, across all the frames."""
    rows = [r for _, r in parts]
    pid = _text_codes([f["pid"] for f, _ in parts], rows)
    tid = _text_codes([f["tid"] for f, _ in parts], rows)
    width = max(int(t.max(initial=0)) for t in tid) + 1
    thread = np.concatenate([p * width + t for p, t in zip(pid, tid, strict=True)])
    ts = np.concatenate([f["ts_ns"].to_numpy() if r is None else f["ts_ns"].to_numpy()[r] for f, r in parts])
    key = _time_key(thread, ts, ts) if len(ts) else ts
    if key is None:  # times too far apart to share one int64 with the thread: number the pairs
        order = np.lexsort((ts, thread))
        th, t = thread[order], ts[order]
        new = np.ones(len(ts), dtype=np.int64)
        new[1:] = (th[1:] != th[:-1]) | (t[1:] != t[:-1])
        key = np.empty(len(ts), dtype=np.int64)
        key[order] = np.cumsum(new) - 1
    return np.split(key, np.cumsum([len(p) for p in pid])[:-1])


def _in_sorted(values: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """Whether each of ``values`` is among ``keys`` (sorted, distinct): a binary search each."""
    if not len(keys):
        return np.zeros(len(values), dtype=bool)
    return keys[np.clip(np.searchsorted(keys, values), 0, len(keys) - 1)] == values


def _distinct_pairs(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct (a, b) pairs, sorted by a then b: exact copies count as one."""
    order = np.lexsort((b, a))
    a, b = a[order], b[order]
    new = np.ones(len(a), dtype=bool)
    new[1:] = (a[1:] != a[:-1]) | (b[1:] != b[:-1])
    return a[new], b[new]


def _sole(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The pairs whose ``a`` (sorted) no other pair has: a key with two values names neither."""
    once = np.ones(len(a), dtype=bool)
    same = a[1:] == a[:-1]
    once[1:] &= ~same
    once[:-1] &= ~same
    return a[once], b[once]


@dataclass(frozen=True)
class Ancestors:
    """Per events row: its parent span, and the innermost cpu_op, outermost cpu_op, innermost
    annotation and step span on its path to the root (itself included; -1: none), with each
    row's step number. Found once per trace: the GPU activities and the op table both read it.
    Each array has one more entry than there are events, a last -1, so that row -1 (none) reads
    -1 by plain indexing: a lookup is one take, with no mask or clip around it."""

    parent: np.ndarray
    op: np.ndarray
    top_op: np.ndarray
    annotation: np.ndarray
    step_span: np.ndarray
    step_of: np.ndarray


def _with_none(values: np.ndarray) -> np.ndarray:
    """``values`` (int64) with a last -1: what row -1 reads."""
    out = np.empty(len(values) + 1, dtype=np.int64)
    out[:-1] = values
    out[-1] = -1
    return out


def ancestors(parent: np.ndarray, events: pd.DataFrame) -> Ancestors:
    """The marked spans above every row, found for all spans at once (``trees``: one walk over
    the forest each, compiled where built, else pointer jumping in log2(depth) passes).
    ``parent``: as ``parents`` gives it, with the last -1; the walks run over that one more
    node too (a root, unmarked), so every array they return ends in -1 without a copy."""
    role = events["role"]
    is_op = np.append((role == "cpu_op").to_numpy(), False)  # compares codes, not strings
    step_of = _with_none(step_numbers(events["name"]))
    is_annot = np.append((role == "annotation").to_numpy(), False) & (step_of < 0)
    op, annotation = marked_walks(parent, "nearest", is_op, is_annot)
    top_op, step_span = marked_walks(parent, "farthest", is_op, step_of >= 0)
    return Ancestors(parent, op, top_op, annotation, step_span, step_of)


def ancestry(rows: np.ndarray, anc: Ancestors) -> dict[str, np.ndarray]:
    """For each of ``rows`` (events rows, -1: none): the innermost and outermost cpu_op, the
    innermost annotation and the step above it (the row itself does not count)."""
    up = anc.parent[rows]  # -1 (none) reads the last entry, -1
    return {
        "op_row": anc.op[up],
        "top_op_row": anc.top_op[up],
        "annotation_row": anc.annotation[up],
        "step": anc.step_of[anc.step_span[up]],
    }


def steps_by_time(ts: np.ndarray, pid: pd.Categorical, steps: pd.DataFrame) -> np.ndarray:
    """Step number whose span (in the same process) contains each time, -1 if none. Processes
    are matched by their text (a pid written 1 in one place and "1" in another is one process);
    ``pid`` is compared by its codes, not its texts row by row."""
    out = np.full(len(ts), -1, dtype=np.int64)
    codes = np.asarray(pid.codes)
    texts = np.array([str(c) for c in pid.categories], dtype=object)
    for p, group in steps.groupby("pid", observed=True):
        group = group.sort_values("ts_ns")
        starts = group["ts_ns"].to_numpy()
        ends = starts + group["dur_ns"].to_numpy()
        sel = np.flatnonzero(np.isin(codes, np.flatnonzero(texts == str(p))))
        at = np.searchsorted(starts, ts[sel], side="right") - 1
        ok = (at >= 0) & (ts[sel] < ends[np.clip(at, 0, None)])
        out[sel[ok]] = group["step"].to_numpy()[at[ok]]
    return out


def _steps_where_missing(step, ts, pid: pd.Categorical, steps, at=None) -> np.ndarray:
    """``step`` with each -1 filled by ``steps_by_time`` from the time and process (``ts``,
    ``pid``) at the row itself, or at its ``at`` row where given (-1 there: left as it is):
    asked only for the rows still without a step, not for all."""
    need = np.flatnonzero((step < 0) & (True if at is None else at >= 0))
    if not len(need) or not len(steps):
        return step
    out = step.copy()
    rows = need if at is None else at[need]
    out[need] = steps_by_time(ts[rows], pid[rows], steps)
    return out


# ------------------------------------------------------------------ the one entry point

ARROW = " → "  # joins the op names of a chain, outermost first
#: ops a chain shows in full; the deepest chain in the 48 corpus traces and the sample traces has
#: 8 ops, so only hostile nesting reaches this. Longer chains are elided (``op_chains``), which
#: keeps their text, and the memory a trace of many such chains takes, bounded.
CHAIN_MAX = 64


def elision(left_out: int) -> str:
    """The text that stands for the ops left out of the middle of a chain longer than CHAIN_MAX."""
    return f"… {left_out} op{'' if left_out == 1 else 's'} …"


class Linked(NamedTuple):
    """What ``link`` makes of the model's tables."""

    #: the GPU activities with ``op``, ``top_op``, ``annotation``, ``step``, ``launch``,
    #: ``op_event`` and ``launch_name``
    activities: pd.DataFrame
    ops: pd.DataFrame  # the op table (ops_table)
    memory: pd.DataFrame  # the [memory] events with their ``op`` and ``step`` (link_memory)
    shares: dict  # ``linked_to_op``, ``linked_to_launch``: the shares of activities linked
    notes: list  # what could not be linked because an id named several events


def link(built: Built) -> Linked:
    """Everything tied together, in one call (``load``'s link stage): the GPU activities to their
    launch, op and step, the op table, and the memory events to their op and step. ``built`` is
    read, not changed."""
    events, steps = built.events, built.steps
    above = ancestors(parents(events), events)
    launch, by_corr = launches(built.activities, events, built.flows)
    activities, by_ext = link_activities(built.activities.copy(deep=False), launch, events, above, steps)
    rows = np.flatnonzero((events["role"] == "cpu_op").to_numpy())
    op_above = ancestry(rows, above)
    del above  # six arrays over every events row (133 MB at 1 GB) go before the op table is made (the peak)
    ops = ops_table(events, rows, op_above, steps, activities, built.op_args)
    n = len(activities)
    shares = {
        "linked_to_op": float(activities["op"].notna().mean()) if n else 1.0,
        "linked_to_launch": float((activities["launch"] >= 0).mean()) if n else 1.0,
    }
    notes = (
        [
            f"{by_corr} GPU activit{'y' if by_corr == 1 else 'ies'} left without a launch: each one's "
            "correlation id names several runtime launches"
        ]
        if by_corr
        else []
    )
    if by_ext:
        notes.append(
            f"{by_ext} GPU activit{'y' if by_ext == 1 else 'ies'} left without an op: each one's "
            "External id names several CPU ops"
        )
    return Linked(activities, ops, link_memory(built.memory, ops, steps), shares, notes)


# ------------------------------------------------------------------ GPU activity -> op, step


def link_activities(kernels, launch, events, above: Ancestors, steps) -> tuple[pd.DataFrame, int]:
    """The activities with their op, step and launch columns, and how many found no op because
    their External id names several CPU ops."""
    anc = ancestry(launch, above)
    op_row = anc["op_row"]  # a fresh array: filled in below
    ext_ids, ext_rows, ambiguous = _op_rows_by_external_id(events)
    need = op_row < 0
    unsure = 0
    if need.any() and (len(ext_ids) or len(ambiguous)):
        col = kernels["external_id"][need]
        ext, has_ext = col.to_numpy(dtype=np.int64, na_value=0), col.notna().to_numpy()
        # an activity without an External id names no op (not an op whose id happens to be -1)
        op_row[np.flatnonzero(need)] = np.where(has_ext, sorted_lookup(ext_ids, ext_rows, ext), -1)
        unsure = int((has_ext & np.isin(ext, ambiguous)).sum())
    # no step above the launch: the step around the launch's start, in its process
    step = _steps_where_missing(anc["step"], events["ts_ns"].to_numpy(), events["pid"].array, steps, launch)
    names = events["name"]
    kernels["op"] = _names_at(names, op_row)
    kernels["top_op"] = _names_at(names, np.where(anc["top_op_row"] >= 0, anc["top_op_row"], op_row))
    kernels["annotation"] = _names_at(names, anc["annotation_row"])
    kernels["step"] = _nullable(step)
    kernels["launch"] = launch
    kernels["op_event"] = op_row
    kernels["launch_name"] = _names_at(names, launch)
    return kernels, unsure


def _nullable(step: np.ndarray) -> pd.arrays.IntegerArray:
    """Step numbers as Int64, -1 (no step) as missing."""
    return pd.arrays.IntegerArray(np.where(step >= 0, step, 0), step < 0)


def _op_rows_by_external_id(events) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The External ids that one CPU op carries (sorted) and that op's events row each, and the
    ids that several CPU ops carry (ids reused across merged processes, a damaged trace): those
    name no op rather than the first."""
    ext = events["external_id"]
    rows = np.flatnonzero((events["role"] == "cpu_op").to_numpy() & ext.notna().to_numpy())
    ids = ext.array[rows].to_numpy(dtype=np.int64)  # the rows' ids (none missing), not all rows' first
    order = np.argsort(ids, kind="stable")  # ids mostly rise in file order: a near-linear sort
    ids, rows = ids[order], rows[order]
    shared = np.zeros(len(ids), dtype=bool)
    repeat = ids[1:] == ids[:-1]
    shared[1:] |= repeat
    shared[:-1] |= repeat
    return ids[~shared], rows[~shared], np.unique(ids[shared])


def _names_at(names: pd.Series, rows: np.ndarray) -> pd.Categorical:
    rows = np.asarray(rows)
    codes = np.where(rows >= 0, names.cat.codes.to_numpy()[np.clip(rows, 0, None)], -1)
    used = np.flatnonzero(np.bincount(codes[codes >= 0], minlength=len(names.cat.categories)))  # no sort
    remap = np.full(len(names.cat.categories) + 1, -1)
    remap[used] = np.arange(len(used))
    return pd.Categorical.from_codes(
        np.where(codes >= 0, remap[codes], -1), categories=names.cat.categories[used]
    )


# ------------------------------------------------------------------ the op table


def ops_table(events, rows: np.ndarray, anc: dict, steps, kernels, op_args: dict) -> pd.DataFrame:
    """One row per cpu_op (``rows``: their events rows; ``anc``: their ``ancestry``, emptied as it
    is read): name, times, thread, parent op, depth, chain, self time, step,
    its raw ``Input Dims``/``Input type``/``Concrete Inputs`` texts (``op_args``: name ->
    texts row-aligned with ``events``), and the GPU activities it launched (self and inclusive)."""
    pos = np.full(len(events) + 1, -1, dtype=np.int64)  # events row -> ops row; row -1 reads -1
    pos[rows] = np.arange(len(rows))
    parent = pos[anc.pop("op_row")]
    # numpy takes at the rows, not a sub-frame: pandas' take of the categoricals cost more
    ops = pd.DataFrame(
        {
            "name": _names_at(events["name"], rows),  # only the names the ops use
            "ts_ns": events["ts_ns"].to_numpy()[rows],
            "dur_ns": events["dur_ns"].to_numpy()[rows],
            "pid": _codes_at(events["pid"], rows),
            "tid": _codes_at(events["tid"], rows),
            "depth": count_ancestors(parent),
            "parent": parent,
            "external_id": events["external_id"].array[rows],
        },
        copy=False,  # fresh arrays, this frame's alone: not stacked into one block again
    )
    for name, texts in op_args.items():
        ops[name] = arg_texts_at(texts, rows)
    ops["annotation"] = _names_at(events["name"], anc.pop("annotation_row"))
    step = _steps_where_missing(anc.pop("step"), ops["ts_ns"].to_numpy(), ops["pid"].array, steps)
    anc.clear()
    ops["step"] = _nullable(step)
    ops["event"] = rows
    ops["chain"] = op_chains(ops)
    ops["self_ns"] = _self_ns(ops)
    _gpu_totals(ops, pos, kernels)
    return ops


def _codes_at(col: pd.Series, rows: np.ndarray) -> pd.Categorical:
    """A categorical column at ``rows``, with all its categories: a take of its codes."""
    dtype = cast(pd.CategoricalDtype, col.dtype)
    return pd.Categorical.from_codes(col.cat.codes.to_numpy()[rows], dtype=dtype, validate=False)


def op_chains(ops: pd.DataFrame) -> pd.Categorical:
    """Each op's chain of op names from the outermost op down, as a categorical.

    Chains are numbered one tree level at a time from (parent's chain, own name) pairs,
    so each distinct chain's text is built once, however many ops share it. A chain of more
    than ``CHAIN_MAX`` ops (only a hostile trace nests so deep) keeps its outer and inner
    ``CHAIN_MAX // 2`` names around an elision (see ``_elided_chains``), which bounds both the
    levels walked here and the text each chain holds.
    """
    n = len(ops)
    name_code = ops["name"].cat.codes.to_numpy().astype(np.int64)
    names = np.asarray(ops["name"].cat.categories, dtype=object)
    parent, depth = ops["parent"].to_numpy(), ops["depth"].to_numpy()
    chain, paths = number_paths(parent, depth, name_code, CHAIN_MAX)
    texts: list[str] = []
    for up, code in paths:
        texts.append(names[code] if up == 0 else texts[up - 1] + ARROW + names[code])
    if (depth >= CHAIN_MAX).any():
        _elided_chains(chain, texts, parent, depth, name_code, names)
    return (
        pd.Categorical.from_codes(chain, categories=pd.Index(texts, dtype=object))
        if n
        else pd.Categorical([], categories=pd.Index([], dtype=object))
    )


def _elided_chains(chain, texts: list, parent, depth, name_code, names) -> None:
    """Number (in ``chain``) and write (onto ``texts``) the chains of more than ``CHAIN_MAX`` ops:
    the chain of the outer half's last op, ``… N ops …``, then the inner half's names.

    Deep chains that differ only inside the elision share a text: what is shown is all that
    tells them apart. Work and text are bounded by ``CHAIN_MAX`` per deep op."""
    half = CHAIN_MAX // 2
    deep = np.flatnonzero(depth >= CHAIN_MAX)
    head = chain[nearest(parent, depth == half - 1)[deep]]  # its chain was numbered above
    tail = np.empty((len(deep), half), dtype=np.int64)  # inner names, innermost first
    cur = deep
    for k in range(half):
        tail[:, k] = name_code[cur]
        cur = parent[cur]
    key = np.column_stack([head, depth[deep] + 1 - 2 * half, tail[:, ::-1]])
    uniq, inverse = np.unique(key, axis=0, return_inverse=True)
    chain[deep] = len(texts) + inverse.reshape(-1)
    for h, elided, *inner in uniq.tolist():
        texts.append(ARROW.join([texts[h], elision(elided), *names[inner]]))


def _self_ns(ops: pd.DataFrame) -> np.ndarray:
    """Each op's time minus its child ops' (never negative): self times add up without double counting."""
    dur = np.clip(ops["dur_ns"].to_numpy(), 0, None)
    parent = ops["parent"].to_numpy()
    has = parent >= 0
    child = np.bincount(parent[has], weights=dur[has], minlength=len(ops)).astype(np.int64)
    return np.clip(dur - child, 0, None)


def _gpu_totals(ops: pd.DataFrame, pos: np.ndarray, kernels: pd.DataFrame) -> None:
    """Self and inclusive GPU activity counts and time per op, up the op tree."""
    n = len(ops)
    owner = pos[kernels["op_event"].to_numpy()]  # pos: events row -> ops row, with row -1 reading -1
    dur = np.clip(kernels["dur_ns"].to_numpy(), 0, None)
    linked = owner >= 0
    ops["n_kernels_self"] = np.bincount(owner[linked], minlength=n).astype(np.int64)
    ops["gpu_ns_self"] = np.bincount(owner[linked], weights=dur[linked], minlength=n).astype(np.int64)
    ops["n_kernels"], ops["gpu_ns"] = subtree_sums(
        ops["parent"].to_numpy(), ops["depth"].to_numpy(), ops["n_kernels_self"], ops["gpu_ns_self"]
    )


# ------------------------------------------------------------------ [memory] event -> op, step


def link_memory(memory: pd.DataFrame, ops: pd.DataFrame, steps: pd.DataFrame) -> pd.DataFrame:
    """``memory`` with ``op`` (the ops-table row of the innermost CPU op on the event's thread
    whose span holds its time, start <= t <= end; -1 when none) and ``step`` (that op's step,
    else the step around the event in its process)."""
    memory = memory.copy()
    op = _op_at(memory, ops)
    step = np.full(len(memory), -1, dtype=np.int64)
    has = op >= 0
    if len(ops):
        step[has] = ops["step"].fillna(-1).to_numpy(dtype=np.int64)[op[has]]
    step = _steps_where_missing(step, memory["ts_ns"].to_numpy(), memory["pid"].array, steps)
    memory["op"] = op
    memory["step"] = _nullable(step)
    return memory


def _op_at(memory: pd.DataFrame, ops: pd.DataFrame) -> np.ndarray:
    """Per event, the innermost op containing it: the last op on its thread to start at or
    before it, else that op's nearest ancestor that has not ended yet (``_first_open``)."""
    out = np.full(len(memory), -1, dtype=np.int64)
    if not len(memory) or not len(ops):
        return out
    thread = pd.MultiIndex.from_arrays(
        [per_category(ops["pid"], str, "nan"), per_category(ops["tid"], str, "nan")]
    )
    codes, uniques = pd.factorize(thread)
    mine = pd.MultiIndex.from_arrays(
        [per_category(memory["pid"], str, "nan"), per_category(memory["tid"], str, "nan")]
    )
    mcode = uniques.get_indexer(mine)
    start = ops["ts_ns"].to_numpy()
    end = start + ops["dur_ns"].to_numpy()
    order = np.lexsort((start, codes))  # by thread, then start
    key_ops = np.stack([codes[order], start[order]])
    ts = memory["ts_ns"].to_numpy()
    pos = _last_at_or_before(key_ops, mcode, ts)
    cur = np.where((pos >= 0) & (mcode >= 0), order[np.clip(pos, 0, None)], -1)
    return _first_open(cur, ts, ops["parent"].to_numpy(), end)


def _first_open(cur: np.ndarray, ts: np.ndarray, parent: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Per query, the first of ``cur`` and its ancestors whose ``end`` is at or after ``ts``, -1 if
    none. Binary lifting: ``up[k]`` is the 2**k-th ancestor and ``reach[k]`` the latest end among
    the 2**k nodes from a node up (not including ``up[k]``); a query skips every span of nodes
    that all end too early, largest first, so a deep tree costs log2(depth) passes. A loop of
    parents (``nest`` makes none; the array may come from elsewhere) is a ValueError, not a
    loop without end."""
    up, reach = [parent], [end]
    while (up[-1] >= 0).any():
        if len(up) > len(parent).bit_length():  # an ancestor 2**k > n steps up: the path loops
            raise ValueError("parents form a loop")
        u, r = up[-1], reach[-1]
        has = u >= 0
        at = np.clip(u, 0, None)
        reach.append(np.where(has, np.maximum(r, r[at]), r))
        up.append(np.where(has, u[at], -1))
    for u, r in zip(reversed(up), reversed(reach), strict=True):
        ok = cur >= 0
        skip = ok & (r[np.clip(cur, 0, None)] < ts)
        cur = np.where(skip, u[np.clip(cur, 0, None)], cur)
    return np.where((cur >= 0) & (end[np.clip(cur, 0, None)] >= ts), cur, -1)


def _last_at_or_before(key: np.ndarray, group: np.ndarray, ts: np.ndarray) -> np.ndarray:
    """Index into the (group, start)-sorted ``key`` of the last entry of ``group`` starting at
    or before ``ts``; -1 when the group has none. One search per thread (threads are few)."""
    g, s = key
    out = np.full(len(ts), -1, dtype=np.int64)
    for code in np.unique(group[group >= 0]):
        lo, hi = np.searchsorted(g, code, side="left"), np.searchsorted(g, code, side="right")
        sel = np.flatnonzero(group == code)
        at = np.searchsorted(s[lo:hi], ts[sel], side="right") - 1
        out[sel] = np.where(at >= 0, lo + at, -1)
    return out
