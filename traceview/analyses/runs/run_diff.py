"""``traceview diff RUN_A/ RUN_B/``: two runs' ``ranks`` reports, rank by rank and overall.

Ranks are matched by number (rank 3 of A with rank 3 of B); a rank in only one run is
named in the notes. Per rank: the GPU time breakdown (``span_ns``, ``computation_ns``,
``communication_ns``, ``memory_ns``, ``idle_ns``), ``overlap_pct`` and ``wait_caused_ns``
of each run and the change; the ``overall`` row sums the ns over matched ranks (overlap:
over their communication time). A run whose clocks ``ranks`` refused has no waits: its
``wait_caused_ns`` stays empty, overall too (never a sum of nothing shown as 0), and a
finding says so.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ...report import Report
from ...units import human_ns
from ..measure.registry import rank_metrics

#: the figures summed over the matched ranks (overlap_pct, a ratio of sums, is added by ``overall``)
METRICS = rank_metrics("run_diff", combine="sum")


def overall(r: pd.DataFrame) -> dict:
    """The run's figures over ranks ``r`` (a ``ranks`` table): ns summed, overlap over their communication."""
    busy = r["communication_busy_ns"].sum()
    return {
        **{m: pd.NA if r[m].isna().any() else int(r[m].sum()) for m in METRICS},  # NA: clocks refused
        "overlap_pct": 100.0 * r["overlapped_ns"].sum() / busy if busy else float("nan"),
    }


def run_diff(a: Report, b: Report, labels: tuple[str, str] = ("A", "B")) -> Report:
    ra, rb = a["ranks"].set_index("rank"), b["ranks"].set_index("rank")
    both = ra.index.intersection(rb.index)
    rows = [{"rank": str(r), **_pair(ra.loc[r], rb.loc[r])} for r in both]
    rows.append({"rank": "overall", **_pair(overall(ra.loc[both]), overall(rb.loc[both]))})
    table = pd.DataFrame(rows)
    exposed = exposed_table(a, b, both)
    notes = [
        f"rank {r} is only in {which}"
        for which, only in (("A", ra.index.difference(rb.index)), ("B", rb.index.difference(ra.index)))
        for r in only
    ]
    info = {"a_ranks": len(ra), "b_ranks": len(rb), "matched_ranks": len(both)}
    return Report(
        kind="run_diff",
        title=f"Run diff: {len(both)} matched rank(s)",
        tables={"ranks": table, "exposed": exposed},
        findings=_findings(table, a, b, labels) + exposed_findings(exposed),
        info=info,
        notes=notes,
    )


def exposed_table(a: Report, b: Report, ranks) -> pd.DataFrame:
    """rank, cause, a_ns, b_ns, delta_ns for the matched ranks (causes in priority order, 0 on the
    side without one), then ``overall``: each cause summed over them. Per rank the ns sum exactly
    to its steps' wall time (measure/exposed.py)."""
    sides = [r["exposed"] if "exposed" in r.tables else None for r in (a, b)]
    if any(x is None for x in sides):  # a ranks report from before exposed time: nothing to pair
        return pd.DataFrame(columns=["rank", "cause", "a_ns", "b_ns", "delta_ns"])
    ea, eb = (x[x["rank"].isin(ranks)].set_index(["rank", "cause"])["ns"] for x in sides)
    keys = ea.index.union(eb.index, sort=False)
    m = pd.DataFrame({"a_ns": ea.reindex(keys, fill_value=0), "b_ns": eb.reindex(keys, fill_value=0)})
    m = m.astype(np.int64).reset_index()
    order = {c: i for i, c in enumerate(dict.fromkeys([*sides[0]["cause"], *sides[1]["cause"]]))}
    m = m.iloc[np.lexsort((m["cause"].map(order).to_numpy(), m["rank"].to_numpy()))]
    total = m.groupby("cause", sort=False)[["a_ns", "b_ns"]].sum().reset_index()
    out = pd.concat([m.assign(rank=m["rank"].astype(str)), total.assign(rank="overall")], ignore_index=True)
    out["delta_ns"] = out["b_ns"] - out["a_ns"]
    return out[["rank", "cause", "a_ns", "b_ns", "delta_ns"]]


def exposed_findings(t: pd.DataFrame, n: int = 3) -> list[str]:
    """The summed wall-time change over matched ranks and the causes that moved it most."""
    o = t[t["rank"] == "overall"]
    moved = o[o["delta_ns"] != 0]
    if not len(moved):
        return []
    top = moved.iloc[np.argsort(-np.abs(moved["delta_ns"].to_numpy()), kind="stable")[:n]]
    a, b = int(o["a_ns"].sum()), int(o["b_ns"].sum())
    parts = "; ".join(f"{c} {_signed(d)}" for c, d in zip(top["cause"], top["delta_ns"], strict=True))
    return [
        f"summed step wall time {human_ns(a)} -> {human_ns(b)} ({_signed(b - a)}); "
        f"exposed, the largest changes: {parts}"
    ]


def _signed(ns) -> str:
    return ("+" if ns >= 0 else "-") + human_ns(abs(ns))


def _pair(x, y) -> dict:
    out = {}
    for m in [*METRICS, "overlap_pct"]:
        out[f"a_{m}"], out[f"b_{m}"] = x[m], y[m]
    out["span_change_pct"] = 100.0 * (y["span_ns"] / x["span_ns"] - 1.0) if x["span_ns"] else float("nan")
    return out


def _findings(table: pd.DataFrame, a: Report, b: Report, labels: tuple[str, str]) -> list[str]:
    ranks = table[table["rank"] != "overall"]
    overall = table[table["rank"] == "overall"].iloc[0]
    out = [
        f"summed GPU span {human_ns(overall.a_span_ns)} -> {human_ns(overall.b_span_ns)} "
        f"({overall.span_change_pct:+.1f} %)"
    ]
    change = ranks["span_change_pct"].abs()
    if len(ranks) and (change > 0).any():
        top = ranks.loc[change.idxmax()]
        out.append(f"rank {top['rank']} changed most: span {top.span_change_pct:+.1f} %")
    out += [clocks_refused(label, r) for label, r in zip(labels, (a, b), strict=True) if refused(r)]
    sa, sb = (stragglers(r) for r in (a, b))
    if sa != sb and not (refused(a) or refused(b)):
        out.append(f"stragglers: {sa} in {labels[0]}, {sb} in {labels[1]}")
    return out


def refused(r: Report) -> bool:
    """Whether ``ranks`` refused the run's clocks (and so named no straggler and no wait)."""
    return r.info.get("clock_alignment") == "refused"


def stragglers(r: Report) -> str:
    """The run's stragglers, or why there are none to name."""
    if refused(r):
        return "unknown (clocks refused)"
    return ", ".join(map(str, sorted(set(r["stragglers"]["straggler"].tolist())))) or "none"


def clocks_refused(label: str, r: Report) -> str:
    """One line: this run's waits and stragglers are not compared, and ``ranks``' reason."""
    why = next((f for f in r.findings if f.startswith("refused: ")), "refused")
    return f"{label}'s clocks can't order arrivals, so its waits and stragglers are not compared ({why})"
