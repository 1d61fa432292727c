"""``traceview diff RUN_A/ RUN_B/``: two runs' ``ranks`` reports, rank by rank and overall.

Ranks are matched by number (rank 3 of A with rank 3 of B); a rank in only one run is
named in the notes. Per rank: the GPU time breakdown (``span_ns``, ``computation_ns``,
``communication_ns``, ``memory_ns``, ``idle_ns``), ``overlap_pct`` and ``wait_caused_ns``
of each run and the change; the ``overall`` row sums the ns over matched ranks (overlap:
over their communication time).
"""

from __future__ import annotations

import pandas as pd

from ...report import Report
from ...units import human_ns

METRICS = ["span_ns", "computation_ns", "communication_ns", "memory_ns", "idle_ns", "wait_caused_ns"]


def overall(r: pd.DataFrame) -> dict:
    """The run's figures over ranks ``r`` (a ``ranks`` table): ns summed, overlap over their communication."""
    busy = r["communication_busy_ns"].sum()
    return {
        **{m: int(r[m].sum()) for m in METRICS},
        "overlap_pct": 100.0 * r["overlapped_ns"].sum() / busy if busy else float("nan"),
    }


def run_diff(a: Report, b: Report) -> Report:
    ra, rb = a["ranks"].set_index("rank"), b["ranks"].set_index("rank")
    both = ra.index.intersection(rb.index)
    rows = [{"rank": str(r), **_pair(ra.loc[r], rb.loc[r])} for r in both]
    rows.append({"rank": "overall", **_pair(overall(ra.loc[both]), overall(rb.loc[both]))})
    table = pd.DataFrame(rows)
    notes = [
        f"rank {r} is only in {which}"
        for which, only in (("A", ra.index.difference(rb.index)), ("B", rb.index.difference(ra.index)))
        for r in only
    ]
    info = {"a_ranks": len(ra), "b_ranks": len(rb), "matched_ranks": len(both)}
    return Report(
        kind="run_diff",
        title=f"Run diff: {len(both)} matched rank(s)",
        tables={"ranks": table},
        findings=_findings(table, a, b),
        info=info,
        notes=notes,
    )


def _pair(x, y) -> dict:
    out = {}
    for m in [*METRICS, "overlap_pct"]:
        out[f"a_{m}"], out[f"b_{m}"] = x[m], y[m]
    out["span_change_pct"] = 100.0 * (y["span_ns"] / x["span_ns"] - 1.0) if x["span_ns"] else float("nan")
    return out


def _findings(table: pd.DataFrame, a: Report, b: Report) -> list[str]:
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
    sa, sb = (sorted(set(r["stragglers"]["straggler"].tolist())) for r in (a, b))
    if sa != sb:
        out.append(
            f"stragglers: {', '.join(map(str, sa)) or 'none'} in A, {', '.join(map(str, sb)) or 'none'} in B"
        )
    return out
