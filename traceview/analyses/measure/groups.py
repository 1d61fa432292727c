"""A region's GPU activities and CPU ops grouped: by kernel, category, op name, op chain.

Every table is per step (divided by the region's divisor). Each kernel keeps the
chain of CPU ops that launched it (outermost op first, ``aten::masked_fill →
aten::clone → aten::copy_``; the chains are built in ``link``).
"""

from __future__ import annotations

import os
from collections import Counter

import numpy as np
import pandas as pd

from ...filenames import as_text
from ...link import ARROW
from ..select.region import Region, op_columns
from ..wording.names import normalise_kernel_name
from .completeness import GRAPH_REPLAY, graph_replays
from .derived import kept_for_region, texts
from .gpu_breakdown import category_time

NO_OP = "(no CPU op)"
__all__ = [
    "ARROW",
    "NO_OP",
    "by_kernel",
    "category_times",
    "chain_table",
    "kernel_keys",
    "launch_chain_codes",
    "launch_chains",
    "op_table",
    "stacked_bar",
    "trace_labels",
]


def launch_chains(r: Region) -> np.ndarray:
    """For each GPU activity of the region: the CPU op chain that launched it; a kernel replayed
    from a CUDA graph with no op around its launch is named as one (``(graph replay:
    cudaGraphLaunch)``), the rest without an op ``(no CPU op)``; NaN for an op without a chain."""
    codes, values = launch_chain_codes(r)
    return np.append(values, np.nan)[codes]  # code -1: the NaN appended last


def launch_chain_codes(r: Region) -> tuple[np.ndarray, np.ndarray]:
    """``(codes, values)``: each GPU activity's launching chain (``launch_chains``) as a code into
    the distinct texts ``values`` (-1: its op has no chain). Worked out on the categorical codes of
    the ops' chains and the activities' launch names; only the few distinct texts are Python strings."""
    k, ops = r.activities, r.trace.ops
    if not len(k):
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=object)
    launch, launch_names = texts(k["launch_name"])
    # what stands where no op is found: (no CPU op), or a graph replay of each launch name (NaN: none)
    none_values = [NO_OP, *(GRAPH_REPLAY.format(v) for v in launch_names[:-1]), np.nan]
    none = np.where(graph_replays(k), launch + 1, 0)
    events = ops["event"].to_numpy()  # ascending: ops were taken in event order
    if len(events):
        op_event = k["op_event"].to_numpy()
        at = np.clip(np.searchsorted(events, op_event), 0, len(events) - 1)
        found = (op_event >= 0) & (events[at] == op_event)
        chain, chain_values = texts(ops["chain"].iloc[at])  # a take of the codes: no text per op
    else:  # a trace with kernels and no CPU ops
        found, chain = np.zeros(len(k), dtype=bool), np.zeros(len(k), dtype=np.int64)
        chain_values = np.array([np.nan], dtype=object)
    codes = np.where(found, chain, len(chain_values) + none)
    # equal texts (a chain spelt like a stand-in, the two NaNs) share one code, NaN is -1
    of_value, values = pd.factorize(np.concatenate([chain_values, np.array(none_values, dtype=object)]))
    return of_value[codes], np.asarray(values, dtype=object)


def kernel_keys(k: pd.DataFrame) -> np.ndarray:
    """The normalised name diff matches kernels on, computed once per distinct name."""
    codes, keys = kernel_key_codes(k)
    return keys[codes]


def kernel_key_codes(k: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """``(codes, keys)``: each activity's matching key as a code into the distinct ``keys``
    (``kernel_keys`` is ``keys[codes]``): group and join on the codes."""
    names = k["name"]
    if isinstance(names.dtype, pd.CategoricalDtype):
        cats = [normalise_kernel_name(str(c)) for c in names.cat.categories] + [""]
        codes = names.cat.codes.to_numpy()
        of_cat, keys = pd.factorize(np.array(cats, dtype=object))
        return of_cat[np.where(codes < 0, len(cats) - 1, codes)], np.asarray(keys, dtype=object)
    codes, keys = pd.factorize(np.array([normalise_kernel_name(str(n)) for n in names], dtype=object))
    return codes, np.asarray(keys, dtype=object)


def by_kernel(r: Region) -> pd.DataFrame:
    """Per normalised kernel name: count and time per step, category, an example name, launching chain.
    Worked out once per trace and selection; each call gets its own copy."""
    return kept_for_region(r, "by_kernel", _by_kernel).copy()


def _by_kernel(r: Region) -> pd.DataFrame:
    cols = ["key", "count", "time_ns", "category", "kind", "example", "launched_by", "chains"]
    k = r.activities
    if not len(k):
        return pd.DataFrame({c: pd.Series(dtype=object) for c in cols})
    # grouped on codes (keys, names, categories, chains), the few distinct texts looked up after
    key, keys = kernel_key_codes(k)
    (name, names), (cat, cats), (kind, kinds) = (texts(k[c]) for c in ("name", "category", "kind"))
    chain, chains = launch_chain_codes(r)
    f = pd.DataFrame(
        {"key": key, "name": name, "dur": k["dur_ns"].clip(lower=0).to_numpy(), "category": cat, "kind": kind}
    )
    f["chain"] = chain if (chain >= 0).all() else np.where(chain >= 0, chain, np.nan)  # no chain: not a group
    g = f.groupby("key", sort=False)
    out = pd.DataFrame({"count": r.per_region_count(g.size()), "time_ns": g["dur"].sum() / r.regions})
    at = out.index.to_numpy(np.int64)
    out["category"] = cats[_modes(key, cat, len(keys))[at]]
    out["kind"] = kinds[g["kind"].first().to_numpy()]
    out["example"] = names[_modes(key, name, len(keys))[at]]
    pairs = f.groupby(["key", "chain"], sort=False).size().reset_index(name="n")
    pairs = pairs.sort_values(["key", "n"], ascending=[True, False], kind="stable")
    first = pairs.drop_duplicates("key").set_index("key")["chain"]
    out["launched_by"] = pd.Series(
        np.asarray(chains, dtype=object)[first.to_numpy(dtype=np.int64)], index=first.index
    )
    out["chains"] = pairs.groupby("key").size()
    out.index = keys[out.index.to_numpy(np.int64)]
    return out.reset_index().rename(columns={"index": "key"})[cols]


def _modes(key: np.ndarray, value: np.ndarray, n_keys: int) -> np.ndarray:
    """Per key code (``0..n_keys-1``, -1 where a key has no row): its commonest value code, a tie
    going to the value met first, as each group's ``value_counts().index[0]`` is; on one int64 per
    (key, value) pair, counted once, instead of a value_counts per group."""
    base = int(value.max()) + 1
    pairs, distinct = pd.factorize(key.astype(np.int64) * base + value)  # in order of first appearance
    of_pair = distinct // base
    order = np.lexsort((-np.bincount(pairs), of_pair))  # stable: by key, commonest first, then first met
    first = order[np.r_[True, of_pair[order][1:] != of_pair[order][:-1]]]
    out = np.full(n_keys, -1, dtype=np.int64)
    out[of_pair[first]] = distinct[first] % base
    return out


def category_times(r: Region) -> pd.DataFrame:
    """Per kernel category (the index, by name): count and GPU time per step, from ``category_time``.
    Worked out once per trace and selection (``of_region``; a diff's sides on their own threads),
    each caller given its own copy of the few rows, as ``op_table`` and ``chain_table`` are."""

    def make(r: Region) -> pd.DataFrame:
        ct = category_time(r.activities).set_index("category").sort_index()
        return pd.DataFrame({"count": r.per_region_count(ct["count"]), "time_ns": ct["time_ns"] / r.regions})

    return kept_for_region(r, "category_times", make).copy()


def _count_and_time(frame: pd.DataFrame, column: str, r: Region) -> pd.DataFrame:
    """Count (int64 when whole per step, see ``Region.per_region_count``) and time per step."""
    if not len(frame):
        return pd.DataFrame({"count": pd.Series(dtype="int64"), "time_ns": pd.Series(dtype=float)})
    codes, values = texts(frame[column])
    named = codes < len(values) - 1  # a row without a name is in no group
    g = frame["dur_ns"][named].groupby(codes[named])  # on the codes; each name written once
    out = pd.DataFrame({"count": r.per_region_count(g.size()), "time_ns": g.sum().clip(lower=0) / r.regions})
    out.index = pd.Index(values[out.index.to_numpy(np.int64)])
    return out.sort_index()


def op_table(r: Region) -> pd.DataFrame:
    """Per CPU op name: count and inclusive CPU time per step."""
    return kept_for_region(
        r, "op_table", lambda r: _count_and_time(op_columns(r, "name", "dur_ns"), "name", r)
    ).copy()


def chain_table(r: Region) -> pd.DataFrame:
    """Per op chain: the op at its end, count and time per step."""
    return kept_for_region(r, "chain_table", _chain_table).copy()


def _chain_table(r: Region) -> pd.DataFrame:
    o = op_columns(r, "chain", "name", "dur_ns")
    if not len(o):
        return pd.DataFrame(
            {
                "op": pd.Series(dtype=object),
                "count": pd.Series(dtype="int64"),
                "time_ns": pd.Series(dtype=float),
            }
        )
    codes, values = texts(o["chain"])
    named = codes < len(values) - 1  # an op without a chain is in no group
    # on the codes, each chain written once; the two columns read cut, not every column of the ops
    g = o[["name", "dur_ns"]][named].groupby(codes[named])
    out = pd.DataFrame(
        {
            "op": g["name"].first().astype(str),
            "count": r.per_region_count(g.size()),
            "time_ns": g["dur_ns"].sum().clip(lower=0) / r.regions,
        }
    )
    out.index = pd.Index(values[out.index.to_numpy(np.int64)])
    return out.sort_index()


def stacked_bar(r: Region, top: int | None = 8) -> tuple[str, pd.Series]:
    """What a stacked bar of this region shows: GPU time per category per step, or (CPU-only)
    CPU self time per step (an op's time minus its child ops') by op name, the ``top`` largest
    and the rest as "other ops". Self times add up to the time spent in ops, without double counting."""
    if r.has_gpu:
        return "gpu", category_times(r)["time_ns"].sort_values(ascending=False)
    codes, values = texts(r.ops["name"])  # summed on the codes, then in the names' order as before
    named = codes < len(values) - 1  # an op without a name is in no group
    s = r.ops["self_ns"][named].groupby(codes[named]).sum()
    s.index = pd.Index(values[s.index.to_numpy(np.int64)])
    s = s.sort_index(kind="stable").clip(lower=0) / r.regions
    s = s.sort_values(ascending=False)
    if top is not None and len(s) > top:
        s = pd.concat([s.iloc[:top], pd.Series({"other ops": s.iloc[top:].sum()})])
    return "cpu", s


def trace_labels(traces) -> list[str]:
    """Each trace's label; traces whose labels repeat are told apart by their file names, else by
    the shortest part of their paths that differs (the folders left when the shared leading and
    trailing ones are dropped): ``runA/rank0/trace.json`` and ``runB/rank0/trace.json`` read
    ``runA/trace`` and ``runB/trace``.
    Full paths would be cut in the middle by a narrow table until they read the same."""
    labels = [t.label for t in traces]
    out = list(labels)
    for lbl, n in Counter(labels).items():
        if n < 2:
            continue
        idx = [i for i, x in enumerate(labels) if x == lbl]
        names = [as_text(os.path.basename(traces[i].path)) for i in idx]
        if len(set(names)) == n:  # the file names tell them apart (one collector, two files)
            for i, name in zip(idx, names, strict=True):
                out[i] = f"{lbl} ({name})"
            continue
        folders = [os.path.abspath(traces[i].path).split(os.sep)[:-1] for i in idx]
        for i, middle in zip(idx, _differing(folders), strict=True):
            out[i] = "/".join([*middle, lbl])
    if len(set(out)) == len(out):
        return out
    return [f"{lbl} #{i + 1}" for i, lbl in enumerate(out)]  # the same file given twice


def _differing(paths: list[list[str]]) -> list[list[str]]:
    """Each list of path parts without the leading and trailing parts all of them share."""
    head = 0
    while all(len(p) > head for p in paths) and len({p[head] for p in paths}) == 1:
        head += 1
    tail = 0
    while all(len(p) - head > tail for p in paths) and len({p[len(p) - 1 - tail] for p in paths}) == 1:
        tail += 1
    return [p[head : len(p) - tail] for p in paths]
