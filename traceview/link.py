"""Kernel <-> launch <-> CPU op <-> step linkage, vectorised.

Three joins, each with a fallback, because traces differ in what they carry:

1. GPU activity -> runtime launch by ``correlation`` (every Kineto format);
   else through the ``ac2g`` flow pair whose end sits on the activity.
   A ``cudaGraphLaunch`` shares its correlation with all its kernels, so one
   launch links to many activities.
2. launch -> CPU op by nesting: the innermost ``cpu_op`` on the launch's thread
   whose span contains it. Nesting is computed for all CPU spans at once with a
   sweep over sorted start/end keys (no Python loop over events).
   Where a kernel has no launch, its ``External id`` names the op directly.
3. -> step: the ``ProfilerStep#N`` around the launch (on any thread of the
   process, so that backward-thread launches count for the step).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from .model import CPU_NEST_ROLES, per_category, step_numbers

_ROLE_ORDER = {"annotation": 0, "cpu_op": 1, "runtime": 2}


def nest(events: pd.DataFrame) -> pd.DataFrame:
    """Parent and depth of every CPU span (cpu_op, annotation, runtime) on its thread.

    Returns a frame indexed like ``events`` rows that took part, with columns
    ``parent`` (events row, -1 for roots) and ``depth``.
    """
    mask = events["role"].isin(CPU_NEST_ROLES).to_numpy() & (events["ts_ns"].to_numpy() > np.iinfo(np.int64).min)
    rows = np.flatnonzero(mask)
    if len(rows) == 0:
        return pd.DataFrame({"parent": np.empty(0, np.int64), "depth": np.empty(0, np.int64)}, index=rows)
    sub = events[["ts_ns", "dur_ns", "pid", "tid", "role"]].iloc[rows]
    start = sub["ts_ns"].to_numpy()
    end = start + np.clip(sub["dur_ns"].to_numpy(), 0, None)
    group = _thread_group(sub)
    prio = per_category(sub["role"], lambda r: _ROLE_ORDER.get(r, -1), -1, np.int64)
    order = np.lexsort((prio, -end, start, group))  # outer spans first on ties
    depth = _depths(start[order], end[order], group[order])
    parent_pos = _parents(depth)
    parent = np.full(len(rows), -1, dtype=np.int64)
    has = parent_pos >= 0
    parent[order[has]] = rows[order[parent_pos[has]]]
    depth_out = np.empty(len(rows), dtype=np.int64)
    depth_out[order] = depth
    return pd.DataFrame({"parent": parent, "depth": depth_out}, index=rows)


def _thread_group(sub: pd.DataFrame) -> np.ndarray:
    pid = sub["pid"].cat.codes.to_numpy().astype(np.int64)
    tid = sub["tid"].cat.codes.to_numpy().astype(np.int64)
    return pid * (tid.max(initial=0) + 2) + tid


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


def _parents(depth: np.ndarray) -> np.ndarray:
    """Position of the nearest earlier span one level up (-1 for roots)."""
    n = len(depth)
    key = depth * (n + 1) + np.arange(n)
    sorted_key = np.sort(key)
    query = (depth - 1) * (n + 1) + np.arange(n)
    at = np.searchsorted(sorted_key, query) - 1
    found = sorted_key[np.clip(at, 0, None)]
    ok = (depth > 0) & (at >= 0) & (found // (n + 1) == depth - 1)
    return np.where(ok, found % (n + 1), -1)


def launches(kernels: pd.DataFrame, events: pd.DataFrame, flows: pd.DataFrame) -> np.ndarray:
    """events row of the runtime call that launched each GPU activity, -1 if none."""
    runtime = events.index[(events["role"] == "runtime").to_numpy()]  # compares codes, not strings
    rt = pd.DataFrame({"row": runtime, "corr": events["correlation"].to_numpy()[runtime],
                       "driver": per_category(events["cat"], lambda c: str(c) == "cuda_driver", False, bool)[runtime]})
    rt = rt.dropna(subset=["corr"]).sort_values("driver", kind="stable").drop_duplicates("corr")
    by_corr = pd.Series(rt["row"].to_numpy(), index=rt["corr"].astype("int64").to_numpy())
    out = np.full(len(kernels), -1, dtype=np.int64)
    corr = kernels["correlation"]
    has = corr.notna().to_numpy()
    if has.any() and len(by_corr):
        found = by_corr.reindex(corr[has].astype("int64").to_numpy())
        out[has] = found.fillna(-1).astype("int64").to_numpy()
    missing = out < 0
    if missing.any() and len(flows):
        out[missing] = _launch_by_flow(kernels[missing], events, flows)
    return out


def _launch_by_flow(kernels: pd.DataFrame, events: pd.DataFrame, flows: pd.DataFrame) -> np.ndarray:
    key = ["pid", "tid", "ts_ns"]
    ends = flows[flows["ph"].astype(str) == "f"]
    starts = flows[flows["ph"].astype(str) == "s"]
    k = kernels[key].astype({"pid": str, "tid": str}).reset_index(drop=True)
    k["i"] = np.arange(len(k))
    e = ends[key + ["id"]].astype({"pid": str, "tid": str, "id": str}).drop_duplicates(key)
    s = starts[key + ["id"]].astype({"pid": str, "tid": str, "id": str}).drop_duplicates("id")
    rt = events[events["role"] == "runtime"][key].astype({"pid": str, "tid": str})
    rt = rt.assign(row=rt.index.to_numpy()).drop_duplicates(key)
    m = k.merge(e, on=key).merge(s, on="id", suffixes=("", "_s"))
    m = m.merge(rt, left_on=["pid_s", "tid_s", "ts_ns_s"], right_on=key, suffixes=("", "_r"))
    out = np.full(len(k), -1, dtype=np.int64)
    out[m["i"].to_numpy()] = m["row"].to_numpy()
    return out


def ancestry(rows: np.ndarray, nesting: pd.DataFrame, events: pd.DataFrame) -> pd.DataFrame:
    """For each events row: innermost and outermost cpu_op, innermost annotation, step.

    Walks parent pointers for all rows at once, one tree level per iteration.
    """
    n = len(rows)
    parent = np.full(len(events), -1, dtype=np.int64)
    parent[nesting.index.to_numpy()] = nesting["parent"].to_numpy()
    is_op = (events["role"] == "cpu_op").to_numpy()  # compares codes, not strings
    step_of = step_numbers(events["name"])
    is_annot = (events["role"] == "annotation").to_numpy() & (step_of < 0)
    inner = np.full(n, -1, np.int64)
    outer = np.full(n, -1, np.int64)
    annot = np.full(n, -1, np.int64)
    step = np.full(n, -1, np.int64)
    cur = np.where(rows >= 0, parent[np.clip(rows, 0, None)], -1)
    while (active := cur >= 0).any():
        c = cur[active]
        idx = np.flatnonzero(active)
        op_here = is_op[c]
        inner[idx[op_here & (inner[idx] < 0)]] = c[op_here & (inner[idx] < 0)]
        outer[idx[op_here]] = c[op_here]
        an_here = is_annot[c] & (annot[idx] < 0)
        annot[idx[an_here]] = c[an_here]
        st_here = step_of[c] >= 0
        step[idx[st_here]] = step_of[c[st_here]]
        cur[idx] = parent[c]
    return pd.DataFrame({"op_row": inner, "top_op_row": outer, "annotation_row": annot, "step": step})


def steps_by_time(ts: np.ndarray, pid: np.ndarray, steps: pd.DataFrame) -> np.ndarray:
    """Step number whose span (in the same process) contains each time, -1 if none."""
    out = np.full(len(ts), -1, dtype=np.int64)
    for p, group in steps.groupby("pid", observed=True):
        group = group.sort_values("ts_ns")
        starts = group["ts_ns"].to_numpy()
        ends = starts + group["dur_ns"].to_numpy()
        sel = np.flatnonzero(pid == str(p))
        at = np.searchsorted(starts, ts[sel], side="right") - 1
        ok = (at >= 0) & (ts[sel] < ends[np.clip(at, 0, None)])
        out[sel[ok]] = group["step"].to_numpy()[at[ok]]
    return out
