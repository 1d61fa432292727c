"""Per line of the user's code (``file.py:42 forward``): GPU time, kernels, memcpys, FLOPs and
bytes allocated, each through the CPU op the line ran (``traceview kernels --by source``).

An op's source line is ``ops.source`` (traceview/sources.py): the innermost frame of its Python
stack that is not library code. A GPU activity has its launching op's, an allocation the op it
happened in. What has no line (a trace without stacks, an op outside the Python tracer, an
activity with no op) is counted in one row, ``NO_SOURCE``, never left out. ``call`` splits a
line by what it called on the way to the op (python_function frames give the line a function
starts on, not the running line, so the callee tells one call of it from another).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ...sources import user_frames
from .derived import kept_for_trace
from .work import trace_work

NO_SOURCE = "(no source line)"
NO_STACKS = (
    "this trace records no Python stacks (profile with with_stack=True): no op has a source line, "
    f"so every figure is in row {NO_SOURCE!r}"
)
KEY = ["source", "call"]
COLUMNS = (
    "source",
    "call",
    "gpu_ns",
    "gpu_pct",
    "kernels",
    "memcpys",
    "memsets",
    "flops",
    "alloc_bytes",
    "allocs",
)


def has_stacks(trace) -> bool:
    """Whether some op of the trace has a call stack; kept in its cache entry (a warm run reads no
    ops table)."""
    return kept_for_trace(trace, "has_stacks", _has_stacks, value=True)


def _has_stacks(trace) -> bool:
    if "stack" not in trace.ops.columns:
        return False
    stack = trace.ops["stack"]
    if isinstance(stack.dtype, pd.CategoricalDtype):  # no category: no stack, without a pass over the ops
        return bool(len(stack.cat.categories)) and bool((stack.cat.codes.to_numpy() >= 0).any())
    return bool(stack.notna().any())


def op_sources(trace, library: tuple[str, ...] = ()) -> pd.DataFrame:
    """Per op (aligned with ``trace.ops``): ``source``, its line as text (``NO_SOURCE`` where none),
    and ``call``, what that line called on the way to the op ("" where the stack does not say).
    ``library``: the user's own library patterns beside rules/sources.toml."""
    ops = trace.ops
    if "stack" not in ops.columns:
        return pd.DataFrame({"source": np.full(len(ops), NO_SOURCE, dtype=object), "call": ""})
    src, call = (
        (ops["source"].array, ops["call"].array) if not library else user_frames(ops["stack"], library)
    )
    return pd.DataFrame({"source": _filled(src, NO_SOURCE), "call": _filled(call, "")})


def _filled(cat: pd.Categorical, empty: str) -> np.ndarray:
    return np.asarray(pd.Series(cat, dtype=object).fillna(empty), dtype=object)


def launching_ops(trace, activities: pd.DataFrame) -> np.ndarray:
    """Per activity, the row in ``trace.ops`` of the op it was launched in, -1 where none."""
    pos = np.full(len(trace.events), -1, dtype=np.int64)
    pos[trace.ops["event"].to_numpy()] = np.arange(len(trace.ops))
    ev = activities["op_event"].to_numpy()
    return np.where(ev >= 0, pos[np.clip(ev, 0, None)], -1)


def activity_sources(trace, activities: pd.DataFrame, by_op: pd.DataFrame) -> pd.DataFrame:
    """Per GPU activity, its launching op's ``source`` and ``call`` (``by_op``: :func:`op_sources`)."""
    op = launching_ops(trace, activities)
    at = np.clip(op, 0, None)
    return pd.DataFrame(
        {
            "source": np.where(op >= 0, by_op["source"].to_numpy()[at] if len(by_op) else "", NO_SOURCE),
            "call": np.where(op >= 0, by_op["call"].to_numpy()[at] if len(by_op) else "", ""),
        }
    )


def per_source(r, library: tuple[str, ...] = ()) -> pd.DataFrame:
    """One row per source line of the region ``r``: GPU time (ns) and its share of the region's,
    kernels, memcpys, memsets, FLOPs of its counted ops (as kernels --ops counts them) and the
    bytes and number of allocations made inside its ops; by GPU time, then bytes allocated."""
    trace = r.trace
    by_op = op_sources(trace, library)
    k = r.activities
    acts = activity_sources(trace, k, by_op).assign(dur=np.clip(k["dur_ns"].to_numpy(), 0, None))
    kind = k["kind"].astype(str).to_numpy()
    for col, name in (("kernels", "kernel"), ("memcpys", "memcpy"), ("memsets", "memset")):
        acts[col] = (kind == name).astype(np.int64)
    g = acts.groupby(KEY, sort=False).agg(
        gpu_ns=("dur", "sum"),
        kernels=("kernels", "sum"),
        memcpys=("memcpys", "sum"),
        memsets=("memsets", "sum"),
    )
    rows = r.ops.index.to_numpy()
    work = trace_work(trace).iloc[rows]
    flops = work["flops"].where(work["counted"].to_numpy(), pd.NA).fillna(0).to_numpy(dtype=np.int64)
    f = by_op.iloc[rows].assign(flops=flops).groupby(KEY, sort=False)["flops"].sum()
    out = g.join(f, how="outer").join(_allocations(trace, rows, by_op), how="outer")
    out = out.fillna(0).astype(np.int64).reset_index()
    total = int(out["gpu_ns"].sum())
    out.insert(2, "gpu_pct", 100.0 * out["gpu_ns"] / total if total else 0.0)
    out = out[list(COLUMNS)]
    # a line that ran no work, FLOPs or allocation goes
    out = out.loc[out[list(COLUMNS[2:])].to_numpy().any(axis=1)]
    order = ["gpu_ns", "alloc_bytes", "flops"]
    return out.sort_values(order, ascending=False, kind="stable").reset_index(drop=True)


def _allocations(trace, rows: np.ndarray, by_op: pd.DataFrame) -> pd.DataFrame:
    """Bytes and count of the allocations (Bytes > 0) made inside the region's ops, per line."""
    m = trace.memory
    if not len(m) or "op" not in m.columns:
        empty = pd.MultiIndex.from_arrays([[], []], names=KEY)
        return pd.DataFrame({"alloc_bytes": [], "allocs": []}, index=empty, dtype=np.int64)
    op = m["op"].to_numpy()
    keep = (m["bytes"].to_numpy() > 0) & np.isin(op, rows)
    a = by_op.iloc[op[keep]].assign(bytes=m["bytes"].to_numpy()[keep])
    return a.groupby(KEY, sort=False).agg(alloc_bytes=("bytes", "sum"), allocs=("bytes", "size"))
