"""``traceview ranks``: one row per rank of a run, per-step and per-collective tables, and findings.

Built from the ``RankWork`` of every rank (see ``rank_work``) and the run's rank
``Plan``; nothing here touches events, so it runs wherever the small per-rank
results were gathered.
"""

from __future__ import annotations

import os

import numpy as np
import pandas as pd

from ...filenames import as_text
from ...report import Report
from ...run import rank_list
from ...units import human_ns
from ..measure.registry import rank_metrics
from . import clocks
from . import stragglers as st

GPU_STATES = rank_metrics("ranks", group="gpu_states")  # the registry's, in its order


def stacked(works: dict, attr: str) -> pd.DataFrame:
    """One of the RankWork tables for every rank, with a ``rank`` column first."""
    parts = [getattr(w, attr).assign(rank=r) for r, w in works.items()]
    out = pd.concat(parts, ignore_index=True)
    return out[["rank", *[c for c in out.columns if c != "rank"]]]


def rank_table(works: dict, arrivals: pd.DataFrame, fitted: pd.DataFrame) -> pd.DataFrame:
    """Per rank: file, GPU breakdown (ns and idle %), overlap %, collectives it was last at, wait caused,
    its clock against the reference rank."""
    rows = [
        {"rank": r, "file": as_text(os.path.basename(w.path)), "steps": len(w.steps), **w.totals}
        for r, w in works.items()
    ]
    out = pd.DataFrame(rows)
    out["idle_pct"] = 100.0 * out["idle_ns"] / out["span_ns"].where(out["span_ns"] > 0)
    late = st.by_rank(arrivals, list(works)).set_index("rank")
    if (
        len(arrivals) and arrivals["last_rank"].isna().all()
    ):  # withheld: no rank was last anywhere we can tell
        late = late.astype("Int64").mask(late.notna())
    out = out.join(late, on="rank").join(
        fitted.astype({"clock_offset_ns": "Int64", "clock_residual_ns": "Int64"}), on="rank"
    )
    clock = ["clock_offset_ns", "clock_residual_ns"] + (
        ["clock_drift_ppm"] if fitted["clock_drift_ppm"].notna().any() else []
    )
    return out[
        [
            "rank",
            "file",
            "steps",
            *GPU_STATES,
            "idle_pct",
            "communication_busy_ns",
            "overlapped_ns",
            "overlap_pct",
            "last_at",
            "wait_caused_ns",
            *clock,
        ]
    ]


def ranks_report(works: dict, plan, notes: list | None = None) -> Report:
    """The run's report; ``works``: rank -> RankWork (ranks of ``plan``)."""
    matched, fitted, moved = clocks.align(st.matched(stacked(works, "collectives")))
    arr = st.arrivals(matched)
    spans = [w.totals["span_ns"] for w in works.values()]
    verdict = clock_verdict(fitted, moved, len(arr) > 0, st.wait_bound_ok(arr, spans))
    if verdict.startswith("refused"):
        arr = st.withheld(arr)
    assert st.wait_bound_ok(arr, spans), "waits caused exceed the ranks' spans"  # kept by the refusal above
    steps = stacked(works, "steps")
    tables = {
        "ranks": rank_table(works, arr, fitted),
        "steps": steps,
        "stragglers": straggler_steps(arr, steps),
        "collectives": arr,
        "categories": stacked(works, "categories"),
        "streams": stacked(works, "streams"),
        "exposed": stacked(works, "exposed"),  # rank, cause, ns (measure/exposed.py)
    }
    info = {
        "ranks": len(works),
        "world_size": plan.world_size,
        "rank_rule": plan.rule,
        "missing_ranks": rank_list(plan.missing) or "none",
        "device": next((w.device_name for w in works.values() if w.device_name), None),
        "clock_alignment": verdict.split(":")[0],
    }
    extra = [n for w in works.values() for n in w.notes]
    return Report(
        kind="ranks",
        title=f"Run of {len(works)} rank(s)",
        tables=tables,
        findings=findings(tables, plan, verdict if len(arr) else None),
        info=info,
        notes=list(plan.notes) + extra + list(notes or []),
    )


def clock_verdict(fitted: pd.DataFrame, moved: bool, matched: bool, bound_ok: bool) -> str:
    """One line: whether the ranks' times were put on one clock, by how much, and whether arrivals
    can be compared; it starts with applied / not needed / refused."""
    if not matched:
        return "refused: no collective ran on every rank, so the clocks can't be compared"
    worst = fitted["clock_residual_ns"].max()
    off = fitted["clock_offset_ns"].abs()
    big = f"rank {off.idxmax()} by {human_ns(off.max())}"
    drift = fitted["clock_drift_ppm"].abs().max()
    drift = "" if np.isnan(drift) else f", drift up to {drift:.1f} ppm"
    if worst > clocks.REFUSE_RESIDUAL_NS:
        return (
            f"refused: clocks still disagree by up to {human_ns(worst)} after alignment (over "
            f"{human_ns(clocks.REFUSE_RESIDUAL_NS)}; offsets up to {big}{drift}): "
            "no stragglers or waits named"
        )
    if not clocks.plausible(fitted):
        return (
            f"refused: the collectives' ends fit no clock (offsets up to {big}{drift}; a clock drifts under "
            f"{clocks.MAX_DRIFT_PPM:,} ppm): no stragglers or waits named"
        )
    if not bound_ok:
        return (
            "refused: the waits would exceed the ranks' own spans, so these clocks can't order arrivals: "
            "no stragglers or waits named"
        )
    if not moved:
        return "not needed: the collectives end at the same ns on every rank; times are compared as recorded"
    return (
        f"applied: the ranks' times are aligned on the collectives' ends (offsets up to {big}{drift}; "
        f"residual up to {human_ns(worst)})"
    )


def straggler_steps(arr: pd.DataFrame, steps: pd.DataFrame) -> pd.DataFrame:
    """Per step: the straggler, the wait it caused, its CPU step time against the others' median."""
    per = st.stragglers_per_step(arr)
    if not len(per):
        return per.assign(step_ns=[], others_median_ns=[], longer_pct=[])
    key = steps.set_index(["step", "rank"])["cpu_step_ns"]
    mine = key.reindex(list(zip(per["step"], per["straggler"], strict=True))).astype(
        "Int64"
    )  # NA: outside every step
    others = [
        steps.loc[(steps["step"] == s) & (steps["rank"] != r), "cpu_step_ns"].median()
        for s, r in zip(per["step"], per["straggler"], strict=True)
    ]  # one per step, not per event
    ratio = mine.to_numpy(dtype=float, na_value=np.nan) / np.asarray(others, dtype=float)
    return per.assign(step_ns=mine.to_numpy(), others_median_ns=others, longer_pct=100.0 * (ratio - 1.0))


def findings(tables: dict, plan, clock_line: str | None = None) -> list[str]:
    out = straggler_findings(tables) + ([clock_line] if clock_line else [])
    ranks = tables["ranks"]
    ov = ranks.dropna(subset=["overlap_pct"])
    if len(ov):
        lo, hi = ov.loc[ov["overlap_pct"].idxmin()], ov.loc[ov["overlap_pct"].idxmax()]
        out.append(
            f"communication overlaps computation for {lo.overlap_pct:.2f}% (rank {lo['rank']}) to "
            f"{hi.overlap_pct:.2f}% (rank {hi['rank']}) of its time"
        )
    out += idle_findings(tables)
    if plan.missing:
        out.append(
            f"{len(plan.missing):,} of {plan.world_size:,} ranks have no trace: {rank_list(plan.missing)}"
        )
    return out


def straggler_findings(tables: dict) -> list[str]:
    per, ranks = tables["stragglers"], tables["ranks"]
    if not len(per):
        withheld = len(tables["collectives"]) and tables["collectives"]["last_rank"].isna().all()
        return [] if withheld else ["no collective ran on every rank; stragglers can't be told"]
    out = []
    for r, grp in per.groupby("straggler", sort=False):
        row = ranks.set_index("rank").loc[r]
        longer = grp["longer_pct"].mean()
        where = "longer" if longer >= 0 else "shorter"
        step = "" if np.isnan(longer) else f"; its step is {abs(longer):.1f}% {where} than the others' median"
        out.append(
            f"rank {r} is the straggler in {len(grp)} of {len(per)} steps: it arrived last at "
            f"{int(row.last_at)} of {len(tables['collectives'])} collectives and the others waited "
            f"{human_ns(row.wait_caused_ns)} for it"
            f"{step}{extra_in(tables['categories'], r)}"
        )
    return out


def extra_in(categories: pd.DataFrame, rank) -> str:
    """Where the rank's GPU time exceeds the other ranks' median most (a kernel category)."""
    pivot = categories.pivot_table(
        index="category", columns="rank", values="time_ns", aggfunc="sum", fill_value=0
    )
    if rank not in pivot.columns or pivot.shape[1] < 2:
        return ""
    excess = pivot[rank] - pivot.drop(columns=rank).median(axis=1)
    top = excess.idxmax()
    return (
        f"; its largest excess over the others is {top} (+{human_ns(excess[top])})" if excess[top] > 0 else ""
    )


def idle_findings(tables: dict) -> list[str]:
    ranks, streams = tables["ranks"], tables["streams"]
    if not len(ranks) or ranks["idle_pct"].isna().all():
        return []
    idle = streams[["idle_host_ns", "idle_dependency_ns", "idle_unknown_ns"]].sum()
    total = idle.sum()
    cause = (
        ""
        if not total
        else (
            f"; of the streams' idle time {100.0 * idle['idle_host_ns'] / total:.0f}% waited "
            f"for the host and {100.0 * idle['idle_dependency_ns'] / total:.0f}% on another kernel"
        )
    )
    return [
        f"GPUs are idle {ranks['idle_pct'].min():.1f}%–{ranks['idle_pct'].max():.1f}% of their span{cause}"
    ]
