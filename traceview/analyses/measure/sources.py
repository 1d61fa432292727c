"""Per line of the user's code (``file.py:42 forward``): GPU time, kernels, memcpys, FLOPs and
bytes allocated, each through the CPU op the line ran (``traceview kernels --by source``).

An op's source line is ``ops.source`` (traceview/sources.py): the innermost frame of its Python
stack that is not library code. A GPU activity has its launching op's, an allocation the op it
happened in. What has no line (a trace without stacks, an op outside the Python tracer, an
activity with no op) is counted in one row, ``NO_SOURCE``, never left out.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ...sources import sources
from .work import trace_work

NO_SOURCE = "(no source line)"
NO_STACKS = (
    "this trace records no Python stacks (profile with with_stack=True): no op has a source line, "
    f"so every figure is in row {NO_SOURCE!r}"
)
COLUMNS = ("source", "gpu_ns", "gpu_pct", "kernels", "memcpys", "memsets", "flops", "alloc_bytes", "allocs")


def has_stacks(trace) -> bool:
    return "stack" in trace.ops.columns and bool(trace.ops["stack"].notna().any())


def op_sources(trace, library: tuple[str, ...] = ()) -> np.ndarray:
    """Per op (aligned with ``trace.ops``), its source line as text, ``NO_SOURCE`` where none.
    ``library``: the user's own library patterns beside rules/sources.toml."""
    if "stack" not in trace.ops.columns:
        return np.full(len(trace.ops), NO_SOURCE, dtype=object)
    src = trace.ops["source"].array if not library else sources(trace.ops["stack"], tuple(library))
    return np.asarray(pd.Categorical(src).add_categories([NO_SOURCE]).fillna(NO_SOURCE), dtype=object)


def activity_sources(trace, activities: pd.DataFrame, by_op: np.ndarray) -> np.ndarray:
    """Per GPU activity, its launching op's source line (``by_op`` from :func:`op_sources`)."""
    pos = np.full(len(trace.events), -1, dtype=np.int64)
    pos[trace.ops["event"].to_numpy()] = np.arange(len(trace.ops))
    ev = activities["op_event"].to_numpy()
    op = np.where(ev >= 0, pos[np.clip(ev, 0, None)], -1)
    return np.where(op >= 0, by_op[np.clip(op, 0, None)], NO_SOURCE)


def per_source(r, library: tuple[str, ...] = ()) -> pd.DataFrame:
    """One row per source line of the region ``r``: GPU time (ns) and its share of the region's,
    kernels, memcpys, memsets, FLOPs of its counted ops (as kernels --ops counts them) and the
    bytes and number of allocations made inside its ops; by GPU time, then bytes allocated."""
    trace = r.trace
    by_op = op_sources(trace, library)
    k = r.activities
    acts = pd.DataFrame(
        {"source": activity_sources(trace, k, by_op), "dur": np.clip(k["dur_ns"].to_numpy(), 0, None)}
    )
    kind = k["kind"].astype(str).to_numpy()
    for col, name in (("kernels", "kernel"), ("memcpys", "memcpy"), ("memsets", "memset")):
        acts[col] = (kind == name).astype(np.int64)
    g = acts.groupby("source", sort=False).agg(
        gpu_ns=("dur", "sum"),
        kernels=("kernels", "sum"),
        memcpys=("memcpys", "sum"),
        memsets=("memsets", "sum"),
    )
    rows = r.ops.index.to_numpy()
    work = trace_work(trace).iloc[rows]
    flops = work["flops"].where(work["counted"].to_numpy(), pd.NA).fillna(0).to_numpy(dtype=np.int64)
    f = pd.Series(flops).groupby(by_op[rows], sort=False).sum()
    out = g.join(f.rename("flops"), how="outer").join(_allocations(trace, rows, by_op), how="outer")
    out = out.fillna(0).astype(np.int64).rename_axis("source").reset_index()
    total = int(out["gpu_ns"].sum())
    out.insert(2, "gpu_pct", 100.0 * out["gpu_ns"] / total if total else 0.0)
    out = out[list(COLUMNS)]
    busy = out[list(COLUMNS[1:])].to_numpy().any(axis=1)
    out = out[busy | (out["source"] != NO_SOURCE).to_numpy()]
    return out.sort_values(["gpu_ns", "alloc_bytes"], ascending=False, kind="stable").reset_index(drop=True)


def _allocations(trace, rows: np.ndarray, by_op: np.ndarray) -> pd.DataFrame:
    """Bytes and count of the allocations (Bytes > 0) made inside the region's ops, per line."""
    m = trace.memory
    if not len(m) or "op" not in m.columns:
        return pd.DataFrame({"alloc_bytes": pd.Series(dtype=np.int64), "allocs": pd.Series(dtype=np.int64)})
    op = m["op"].to_numpy()
    keep = (m["bytes"].to_numpy() > 0) & np.isin(op, rows)
    a = pd.DataFrame({"source": by_op[op[keep]], "bytes": m["bytes"].to_numpy()[keep]})
    return a.groupby("source", sort=False).agg(alloc_bytes=("bytes", "sum"), allocs=("bytes", "size"))
