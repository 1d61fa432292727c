"""Stragglers: which rank arrives last at each collective, and how long the others wait.

A collective is matched across ranks by its kernel name and its occurrence on each
rank (the n-th ``ncclKernel_AllReduce...`` of rank 0 is the n-th of every rank:
NCCL requires every rank of a group to issue its collectives in the same order).
A rank *arrives* when its kernel starts; the last rank to arrive holds the others
up, each for ``last start - its start`` (``wait_ns``), at most as long as its own kernel
ran. This compares timestamps of different traces: ``ranks`` first puts them on one
clock (``clocks``) and withholds the waits where that fails; ``end_spread_ns``, how far
apart the same collective ends, shows how well the clocks agree.

A step's straggler is the rank whose late arrivals made the others wait longest in
that step; the run's stragglers are ranked by that wait over all steps.
"""

from __future__ import annotations

import numpy as np
import pandas as pd


def matched(collectives: pd.DataFrame) -> pd.DataFrame:
    """Rows (rank, name, n, step, ts_ns, dur_ns) of collectives that every rank ran."""
    ranks = collectives["rank"].nunique()
    seen = collectives.groupby(["name", "n"], sort=False)["rank"].transform("nunique")
    return collectives[(seen == ranks).to_numpy()].reset_index(drop=True)


def arrivals(collectives: pd.DataFrame) -> pd.DataFrame:
    """One row per collective (name, n): step, last_rank, spread_ns (last - first start),
    wait_ns (the others' summed wait), end_spread_ns, ranks."""
    m = matched(collectives)
    cols = ["name", "n", "step", "last_rank", "spread_ns", "wait_ns", "end_spread_ns", "ranks"]
    if not len(m):
        return pd.DataFrame({c: [] for c in cols})
    keys = ["name", "n"]
    m = m.assign(end_ns=m["ts_ns"] + m["dur_ns"].clip(lower=0))
    # a rank waits inside its own kernel: more than the kernel lasted is the clocks' error, not waiting
    late = m.groupby(keys, sort=False)["ts_ns"].transform("max") - m["ts_ns"]
    m = m.assign(wait_ns=np.minimum(late, m["dur_ns"].clip(lower=0)))
    g = m.groupby(keys, sort=False)
    last_idx = g["ts_ns"].idxmax()
    out = pd.DataFrame(
        {
            "step": g["step"].min(),
            "last_rank": m.loc[last_idx.to_numpy(), "rank"].to_numpy(),
            "spread_ns": g["ts_ns"].max() - g["ts_ns"].min(),
            "wait_ns": g["wait_ns"].sum(),
            "end_spread_ns": g["end_ns"].max() - g["end_ns"].min(),
            "ranks": g.size(),
        }
    ).reset_index()
    first_ts = g["ts_ns"].min().to_numpy()
    return out.iloc[np.argsort(first_ts, kind="stable")][cols].reset_index(drop=True)


def withheld(arr: pd.DataFrame) -> pd.DataFrame:
    """The collectives without who arrived last and the waits: for clocks that can't order arrivals."""
    na = pd.array([pd.NA] * len(arr), dtype="Int64")
    return arr.assign(last_rank=na, spread_ns=na, wait_ns=na)


def wait_bound_ok(arr: pd.DataFrame, spans) -> bool:
    """The waits caused can't exceed the time the ranks were there to wait: sum(wait_ns) <= sum(spans)."""
    return int(arr["wait_ns"].fillna(0).sum()) <= int(np.asarray(spans, dtype=np.int64).sum())


def by_rank(arr: pd.DataFrame, ranks) -> pd.DataFrame:
    """Per rank: times it arrived last, and the wait it caused (ns), most wait first."""
    g = arr.groupby("last_rank")
    out = pd.DataFrame({"last_at": g.size(), "wait_caused_ns": g["wait_ns"].sum()}).reindex(
        ranks, fill_value=0
    )
    out.index.name = "rank"
    return out.reset_index().sort_values(["wait_caused_ns", "rank"], ascending=[False, True], kind="stable")


def stragglers_per_step(arr: pd.DataFrame) -> pd.DataFrame:
    """Per step: the straggler (rank that caused the most wait), the wait it caused, collectives."""
    arr = arr.dropna(subset=["last_rank"])  # withheld collectives name no straggler
    if not len(arr):
        return pd.DataFrame({"step": [], "straggler": [], "wait_caused_ns": [], "collectives": []})
    w = arr.groupby(["step", "last_rank"])["wait_ns"].sum().reset_index()
    w = w.sort_values(["step", "wait_ns", "last_rank"], ascending=[True, False, True], kind="stable")
    top = w.groupby("step").head(1).rename(columns={"last_rank": "straggler", "wait_ns": "wait_caused_ns"})
    count = arr.groupby("step").size().rename("collectives")
    return top.merge(count, left_on="step", right_index=True).reset_index(drop=True)
