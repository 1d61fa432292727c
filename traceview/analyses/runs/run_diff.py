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

from ...report import Finding, Report
from ..measure.registry import rank_metrics
from ..wording.words import Cite, reads

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
    info = {"a_ranks": len(ra), "b_ranks": len(rb), "matched_ranks": len(both)} | _sides_info(a, b, labels)
    return Report(
        kind="run_diff",
        title=f"Run diff: {len(both)} matched rank(s)",
        tables={"ranks": table, "exposed": exposed},
        findings=[*_findings(table, a, b, labels), *exposed_findings(exposed)],
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


def _sides_info(a: Report, b: Report, labels: tuple[str, str]) -> dict:
    """What the findings cite beside the tables: each run's label, stragglers and (clocks refused)
    the reason ``ranks`` gave."""
    out = {}
    for side, label, r in (("a", labels[0], a), ("b", labels[1], b)):
        out[f"{side}_label"], out[f"{side}_stragglers"] = label, stragglers(r)
        if refused(r):
            out[f"{side}_clocks_refused"] = _refusal(r)
    return out


def exposed_findings(t: pd.DataFrame, n: int = 3) -> list[Finding]:
    """The summed wall-time change over matched ranks and the causes that moved it most; every
    figure cites table ``exposed`` (the wall times: its ``overall`` rows summed)."""
    o = t[t["rank"] == "overall"]
    moved = o[o["delta_ns"] != 0]
    if not len(moved):
        return []
    top = moved.iloc[np.argsort(-np.abs(moved["delta_ns"].to_numpy()), kind="stable")[:n]]
    c = Cite()
    a, b = (_summed(c, o, col) for col in ("a_ns", "b_ns"))
    delta = _sign(int(o["delta_ns"].sum())) + _summed(c, o, "delta_ns")
    parts = "; ".join(
        f"{c('exposed', {'rank': 'overall', 'cause': k}, 'cause', k, 'text')} "
        f"{_sign(d)}{c('exposed', {'rank': 'overall', 'cause': k}, 'delta_ns', d, 'ns')}"
        for k, d in zip(top["cause"], top["delta_ns"], strict=True)
    )
    return [c.finding(f"summed step wall time {a} -> {b} ({delta}); exposed, the largest changes: {parts}")]


def _summed(c: Cite, o: pd.DataFrame, column: str) -> str:
    """``column`` of the ``overall`` rows summed, as the sentence reads it, with its evidence."""
    c.evidence.append(
        {"table": "exposed", "row": {"rank": "overall"}, "column": column, "reads": "ns", "sum": True}
    )
    return reads(int(o[column].sum()), "ns")


def _sign(x) -> str:
    """The direction the sentence says in front of a cited magnitude."""
    return "-" if x < 0 else "+"


def _pair(x, y) -> dict:
    out = {}
    for m in [*METRICS, "overlap_pct"]:
        out[f"a_{m}"], out[f"b_{m}"] = x[m], y[m]
    out["span_change_pct"] = 100.0 * (y["span_ns"] / x["span_ns"] - 1.0) if x["span_ns"] else float("nan")
    return out


def _findings(table: pd.DataFrame, a: Report, b: Report, labels: tuple[str, str]) -> list[Finding]:
    """Each figure cites table ``ranks`` (by ``rank``) or ``info`` (labels, stragglers, refusals)."""
    ranks = table[table["rank"] != "overall"]
    overall = table[table["rank"] == "overall"].iloc[0]
    c = Cite()
    key = {"rank": "overall"}
    out = [
        c.finding(
            f"summed GPU span {c('ranks', key, 'a_span_ns', overall.a_span_ns, 'ns')} -> "
            f"{c('ranks', key, 'b_span_ns', overall.b_span_ns, 'ns')} "
            f"({_change(c, key, overall.span_change_pct)}%)"
        )
    ]
    change = ranks["span_change_pct"].abs()
    if len(ranks) and (change > 0).any():
        top = ranks.loc[change.idxmax()]
        c, key = Cite(), {"rank": top["rank"]}
        rank = c("ranks", key, "rank", top["rank"], "text")
        out.append(c.finding(f"rank {rank} changed most: span {_change(c, key, top.span_change_pct)}%"))
    out += [
        clocks_refused(side, label, r)
        for side, label, r in zip("ab", labels, (a, b), strict=True)
        if refused(r)
    ]
    sa, sb = (stragglers(r) for r in (a, b))
    if sa != sb and not (refused(a) or refused(b)):
        c = Cite()
        said = [
            (c("info", {}, f"{s}_stragglers", x, "text"), _label(c, s, lbl))
            for s, x, lbl in (("a", sa, labels[0]), ("b", sb, labels[1]))
        ]
        out.append(c.finding(f"stragglers: {said[0][0]} in {said[0][1]}, {said[1][0]} in {said[1][1]}"))
    return out


def _change(c: Cite, key: dict, pct: float) -> str:
    """A span change in percent as the sentence writes it: its sign, then the cited magnitude."""
    return ("+" if not pct < 0 else "-") + c("ranks", key, "span_change_pct", pct, "pct1")


def _label(c: Cite, side: str, label: str) -> str:
    return c("info", {}, f"{side}_label", label, "text")


def refused(r: Report) -> bool:
    """Whether ``ranks`` refused the run's clocks (and so named no straggler and no wait)."""
    return r.info.get("clock_alignment") == "refused"


def stragglers(r: Report) -> str:
    """The run's stragglers, or why there are none to name."""
    if refused(r):
        return "unknown (clocks refused)"
    return ", ".join(map(str, sorted(set(r["stragglers"]["straggler"].tolist())))) or "none"


def _refusal(r: Report) -> str:
    return next((f for f in r.findings if f.startswith("refused: ")), "refused")


def clocks_refused(side: str, label: str, r: Report) -> Finding:
    """One line: this run's waits and stragglers are not compared, and ``ranks``' reason (``info``'s
    ``a_clocks_refused``/``b_clocks_refused``, cited as written)."""
    c = Cite()
    name = _label(c, side, label)
    why = c("info", {}, f"{side}_clocks_refused", _refusal(r), "text")
    return c.finding(
        f"{name}'s clocks can't order arrivals, so its waits and stragglers are not compared ({why})"
    )
