"""Memory from the ``[memory]`` events: allocated over time, the peak, who holds it, per op and step.

Every figure is defined in docs/metrics.md (Memory). One definition each, here:

- ``allocated``: the trace's ``Total Allocated`` after each event, per device. A 2021 trace
  records no totals: there it is the running sum of ``Bytes`` from the first event, so memory
  allocated before the capture is not in it (``basis`` says which).
- the peak: the largest ``allocated`` of a device, at the first event that reaches it; the op at
  the peak is the CPU op running that event (``link.link_memory``).
- an allocation is freed by the next event at its ``Addr`` on the same device when that event is a
  free (the caching allocator hands an address out again only after it was freed).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, cast

import numpy as np
import pandas as pd

from ...link import ARROW
from ...model import memory_rules
from ..wording.words import Cite, size

NO_OP = "(no op)"  # an event outside every CPU op (e.g. the profiler's own bookkeeping)
RECORDED, RUNNING_SUM = "recorded", "running sum"
NO_MEMORY = "no [memory] events in this trace (record with profile_memory=True to see allocations)"
BEFORE = "(allocated before the capture)"  # alive at the peak, allocated before the first event


def series(trace) -> pd.DataFrame:
    """The memory events in time order with ``allocated`` filled in (see the module doc),
    ``op_name``/``op_chain`` of the op running each one, and ``freed_at`` (see ``pair``)."""
    m = trace.memory
    out = m[["ts_ns", "device", "addr", "bytes", "allocated", "reserved", "step"]].copy()
    out["device"] = out["device"].astype(str)
    running = out.groupby("device", sort=False)["bytes"].cumsum()
    out["basis"] = np.where(m["allocated"].isna().to_numpy(), RUNNING_SUM, RECORDED)
    out["allocated"] = m["allocated"].fillna(running).to_numpy(dtype=np.int64)
    op = m["op"].to_numpy() if "op" in m.columns else np.full(len(m), -1)
    names = trace.ops["name"].astype(str).to_numpy() if len(trace.ops) else np.empty(0, object)
    chains = trace.ops["chain"].astype(str).to_numpy() if len(trace.ops) else np.empty(0, object)
    has = op >= 0
    out["op_name"] = np.where(has, names[np.clip(op, 0, None)] if len(names) else NO_OP, NO_OP)
    out["op_chain"] = np.where(has, chains[np.clip(op, 0, None)] if len(chains) else NO_OP, NO_OP)
    out["made_by"] = _made_by(out["op_chain"])
    out["freed_at"] = pair(out)
    return out.reset_index(drop=True)


def _made_by(chains: pd.Series) -> np.ndarray:
    """The innermost op of each chain that is not an allocator (rules/memory.toml), worked out
    once per distinct chain: the op an allocation is made for."""
    allocators = set(memory_rules().allocators)
    codes, uniques = pd.factorize(chains)
    makers = []
    for chain in uniques:
        names = chain.split(ARROW)
        makers.append(next((n for n in reversed(names) if n not in allocators), names[-1]))
    return np.asarray(makers, dtype=object)[codes] if len(uniques) else np.empty(0, dtype=object)


def pair(s: pd.DataFrame) -> np.ndarray:
    """Per row: the row of the free that ends this allocation (-1: not freed in the trace, or
    not an allocation, or no ``Addr`` recorded)."""
    out = np.full(len(s), -1, dtype=np.int64)
    ok = np.flatnonzero(~s["addr"].isna().to_numpy())
    if not len(ok):
        return out
    dev = pd.factorize(s["device"].to_numpy()[ok])[0]
    addr = s["addr"].to_numpy(dtype=np.int64, na_value=0)[ok]
    order = ok[np.lexsort((ok, addr, dev))]  # by device, address, then time
    d, a = pd.factorize(s["device"].to_numpy()[order])[0], s["addr"].to_numpy(np.int64, na_value=0)[order]
    b = s["bytes"].to_numpy()[order]
    nxt_same = np.r_[(d[1:] == d[:-1]) & (a[1:] == a[:-1]), False]
    is_pair = nxt_same & (b > 0) & np.r_[b[1:] < 0, False]
    out[order[is_pair]] = order[np.flatnonzero(is_pair) + 1]
    return out


def devices(s: pd.DataFrame) -> pd.DataFrame:
    """One row per device: events, allocations, frees, the peak (bytes, time, op, chain), the
    largest reserved and what is allocated at the end."""
    rows = []
    for device, g in s.groupby("device", sort=True):
        at = int(np.argmax(g["allocated"].to_numpy()))  # argmax: the first event at the peak
        peak = g.iloc[at]
        reserved = g["reserved"].max()
        rows.append(
            {
                "device": device,
                "events": len(g),
                "allocs": int((g["bytes"] > 0).sum()),
                "frees": int((g["bytes"] < 0).sum()),
                "peak_allocated_bytes": int(peak["allocated"]),
                "peak_ts_ns": int(peak["ts_ns"]),
                "peak_op": peak["op_name"],
                "peak_made_by": peak["made_by"],
                "peak_chain": peak["op_chain"],
                "peak_reserved_bytes": None if pd.isna(reserved) else int(reserved),
                "end_allocated_bytes": int(g["allocated"].iloc[-1]),
                "basis": g["basis"].iloc[0],
            }
        )
    return pd.DataFrame(rows, columns=_DEVICE_COLUMNS)


_DEVICE_COLUMNS = [
    "device",
    "events",
    "allocs",
    "frees",
    "peak_allocated_bytes",
    "peak_ts_ns",
    "peak_op",
    "peak_made_by",
    "peak_chain",
    "peak_reserved_bytes",
    "end_allocated_bytes",
    "basis",
]


def peak_rows(s: pd.DataFrame) -> dict:
    """device -> the row (position in ``s``) of its peak event."""
    out = {}
    for device, g in s.groupby("device", sort=True):
        out[device] = int(g.index[int(np.argmax(g["allocated"].to_numpy()))])
    return out


def alive_at_peak(s: pd.DataFrame) -> pd.DataFrame:
    """Per device, the allocations made up to its peak and not freed by then, grouped by the op
    that made them (``made_by``, see ``_made_by``): tensors, bytes (largest first); where the
    trace records ``Total Allocated``, a ``BEFORE`` row holds the rest of the peak, so the bytes
    add up to it. Empty without ``Addr``."""
    parts = []
    rows = np.arange(len(s))
    for device, at in peak_rows(s).items():
        mine = (s["device"] == device).to_numpy() & ~s["addr"].isna().to_numpy()
        freed = s["freed_at"].to_numpy()
        alive = mine & (rows <= at) & (s["bytes"].to_numpy() > 0) & ((freed < 0) | (freed > at))
        g = s[alive].groupby("made_by", sort=False)["bytes"].agg(["size", "sum"])
        parts.append(g.reset_index().assign(device=device))
        before = int(s.loc[at, "allocated"]) - int(g["sum"].sum())
        if s.loc[at, "basis"] == RECORDED and before > 0:  # Total Allocated counts them; no event shows them
            parts.append(
                pd.DataFrame({"made_by": [BEFORE], "size": [pd.NA], "sum": [before], "device": [device]})
            )
    if not parts:
        return pd.DataFrame(columns=["device", "made_by", "tensors", "bytes"])
    out = pd.concat(parts, ignore_index=True).rename(columns={"size": "tensors", "sum": "bytes"})
    return out[["device", "made_by", "tensors", "bytes"]].sort_values(
        ["device", "bytes"], ascending=[True, False]
    )


def per_op(s: pd.DataFrame) -> pd.DataFrame:
    """Per device and op: allocations and their bytes, frees and their bytes (made while the op
    ran), net = allocated - freed; largest allocated first."""
    alloc = s["bytes"].clip(lower=0)
    free = (-s["bytes"]).clip(lower=0)
    frame = s[["device", "op_name"]].assign(
        allocs=(s["bytes"] > 0).astype(np.int64),
        allocated_bytes=alloc,
        frees=(s["bytes"] < 0).astype(np.int64),
    )
    frame["freed_bytes"] = free
    g = frame.groupby(["device", "op_name"], sort=False).sum().reset_index()
    g["net_bytes"] = g["allocated_bytes"] - g["freed_bytes"]
    g = g.rename(columns={"op_name": "op"})
    return g.sort_values(["device", "allocated_bytes"], ascending=[True, False]).reset_index(drop=True)


def step_memory(s: pd.DataFrame) -> pd.DataFrame:
    """Per device and step: the peak, bytes allocated, bytes retained (allocated in the step and
    not freed in it; without ``Addr`` the step's net bytes), and ``growing``: retained in this step
    and in the step before it."""
    all_steps = s["step"].fillna(-1).to_numpy(dtype=np.int64)
    freed_all = s["freed_at"].to_numpy()
    free_step_all = np.where(freed_all >= 0, all_steps[np.clip(freed_all, 0, None)], -1)
    keep = all_steps >= 0
    s = s[keep]
    if not len(s):
        return pd.DataFrame(
            columns=["device", "step", "peak_allocated_bytes", "allocated_bytes", "retained_bytes", "growing"]
        )
    step, free_step = all_steps[keep], free_step_all[keep]
    b = s["bytes"].to_numpy()
    has_addr = ~s["addr"].isna().to_numpy()
    kept = np.where(has_addr, np.where((b > 0) & (free_step != step), b, 0), b)
    frame = s[["device"]].assign(step=step, peak=s["allocated"], alloc=np.clip(b, 0, None), kept=kept)
    g = frame.groupby(["device", "step"], sort=True).agg(
        peak_allocated_bytes=("peak", "max"), allocated_bytes=("alloc", "sum"), retained_bytes=("kept", "sum")
    )
    g = g.reset_index()
    prev = g.groupby("device")["retained_bytes"].shift(1)
    g["growing"] = (g["retained_bytes"] > 0) & (prev > 0)
    return g


def size_words(n: int) -> str:
    """Bytes for a sentence (``words.size``, which a finding's evidence reads them by)."""
    return size(n)


# ------------------------------------------------------------------ for summary, compare and diff


def peaks(trace) -> pd.DataFrame:
    """Per device of ``trace``: the peak (``devices``' columns device, peak_allocated_bytes,
    peak_ts_ns, peak_made_by); empty without [memory] events. Kept with the trace."""
    held = trace.derived
    if "memory_peaks" not in held:
        s = series(trace)
        held["memory_series"] = s
        held["memory_peaks"] = devices(s)[["device", "peak_allocated_bytes", "peak_ts_ns", "peak_made_by"]]
    return held["memory_peaks"]


def peak_difference(a, b, la: str, lb: str, in_compare: bool = False) -> tuple[pd.DataFrame, list[str]]:
    """Per device both traces have: A's and B's peak, B - A, and the op whose tensors alive at the
    peak grew most from A to B (``made_by``); with a sentence per device whose peak differs, citing
    diff's memory table (``in_compare``: compare's, a row per trace and device)."""
    pa, pb = peaks(a), peaks(b)
    m = pa.merge(pb, on="device", suffixes=("_a", "_b"))
    rows, words = [], []
    # pandas-stubs type a row's fields as any scalar; these are the int64 and str columns of peaks()
    for r in cast("Iterable[Any]", m.itertuples(index=False)):
        delta = int(r.peak_allocated_bytes_b) - int(r.peak_allocated_bytes_a)
        op, op_delta = _grew_most(a, b, r.device, delta)
        rows.append(
            {
                "device": r.device,
                "peak_a_bytes": int(r.peak_allocated_bytes_a),
                "peak_b_bytes": int(r.peak_allocated_bytes_b),
                "peak_diff_bytes": delta,
                "made_by": op,
                "made_by_diff_bytes": op_delta,
            }
        )
        if delta:
            words.append(_peak_sentence((la, lb), r.device, delta, (op, op_delta), in_compare))
    return pd.DataFrame(rows, columns=_DIFF_COLUMNS), words


def _peak_sentence(labels, device: str, delta: int, grew, in_compare: bool):
    """``B's cuda:0 peak is 64.0 MiB above A's: most of it in tensors made by aten::clone (+64.0 MiB
    alive at the peak)`` ("most" only past half the change, else ``the largest change is in tensors
    made by aten::gelu (+4.6 MiB of the 124.0 MiB alive at the peak)``), each figure cited: diff's
    memory row by device and the labels in info, or compare's row by trace and device (the change
    against the baseline in ``vs_baseline_bytes``)."""
    (la, lb), (op, op_delta), c = labels, grew, Cite()
    key = {"trace": lb, "device": device} if in_compare else {"device": device}
    who = c("memory", key, "trace", lb, "text") if in_compare else c("info", {}, "b_label", lb, "text")
    dev = c("memory", key, "device", device, "text")
    by = c("memory", key, "vs_baseline_bytes" if in_compare else "peak_diff_bytes", delta, "bytes")
    why = ""
    if op:
        made, more = (
            c("memory", key, "made_by", op, "text"),
            c("memory", key, "made_by_diff_bytes", op_delta, "bytes"),
        )
        sign = "+" if op_delta >= 0 else "-"
        if 2 * abs(op_delta) > abs(delta):  # "most" only for more than half of the change
            why = f": most of it in tensors made by {made} ({sign}{more} alive at the peak)"
        else:  # a minority: the share as the op's bytes of the whole change, both cited
            whole = c("memory", key, "vs_baseline_bytes" if in_compare else "peak_diff_bytes", delta, "bytes")
            why = f": the largest change is in tensors made by {made} ({sign}{more} of the {whole}"
            why += " alive at the peak)"
    base = (
        c("memory", {"trace": la, "device": device}, "trace", la, "text")
        if in_compare
        else c("info", {}, "a_label", la, "text")
    )
    side = "above" if delta > 0 else "below"
    return c.finding(f"{who}'s {dev} peak is {by} {side} {base}'s{why}")


_DIFF_COLUMNS = ["device", "peak_a_bytes", "peak_b_bytes", "peak_diff_bytes", "made_by", "made_by_diff_bytes"]


def _grew_most(a, b, device: str, delta: int) -> tuple[str | None, int | None]:
    """The op whose alive-at-peak bytes changed most in the direction of the peak's change."""
    alive = []
    for t in (a, b):
        peaks(t)
        al = alive_at_peak(t.derived["memory_series"])
        alive.append(al[(al["device"] == device) & (al["made_by"] != BEFORE)].set_index("made_by")["bytes"])
    change = alive[1].sub(alive[0], fill_value=0).astype("int64")
    if not len(change) or not delta:
        return None, None
    op = change.idxmax() if delta > 0 else change.idxmin()
    if change[op] * delta <= 0:  # no op moved with the peak: it came from memory held before the capture
        return None, None
    return str(op), int(change[op])


def _signed(n: int) -> str:
    return ("+" if n >= 0 else "-") + size_words(abs(n))
