"""``summary --run``: the shared metrics of every rank of a run, and the run's totals.

One row per rank (the same metrics, by the same functions, as ``summary`` of that
rank's trace alone: ``registry.metrics_of`` of its region), then an ``overall`` row for
the run (docs/metrics.md, "Runs"): ``gpu_activities`` and ``gpu_time_ns`` summed over
the ranks; every per-step count and time summed over the ranks (the whole job's work
in one step); ``tensor_core_pct`` over the ranks' GEMM time together;
``attention_backend`` every backend any rank ran; ``regions`` the ranks' divisor when
they all share it (else empty). ``rank`` is text (``"0"`` … and ``"overall"``), as in
``traceview diff RUN_A/ RUN_B/``.
"""

from __future__ import annotations

import os

import pandas as pd

from ...filenames import as_text
from ...report import Report
from ...run import rank_list
from ...units import human_ns
from ..measure.gpu_breakdown import category_time
from ..measure.registry import overall as registry_overall
from ..measure.registry import shown_in
from ..trace.summary import with_share
from .rank_work import RunResults


def columns() -> list[str]:
    """The ranks table's columns: which rank, then the metrics ``summary --run`` shows (the registry's)."""
    return ["rank", "file", "device", *(x.name for x in shown_in("run_summary"))]


def rank_metrics(res: RunResults) -> pd.DataFrame:
    """Per rank: its selection's shared metrics (``rank`` an int), from its RankResult."""
    rows = [
        {
            "rank": r,
            "file": as_text(os.path.basename(x.path)),  # a file name is untrusted text
            "device": x.device_name or "-",
            **x.metrics,
        }
        for r, x in res.ranks.items()
    ]
    return pd.DataFrame(rows)


def overall(per_rank: pd.DataFrame) -> dict:
    """The run's row from the ranks' rows (see the module doc)."""
    row = {
        "rank": "overall",
        "file": f"{len(per_rank)} files",
        "device": ", ".join(dict.fromkeys(per_rank["device"])) if len(per_rank) else "-",
    }
    return {**row, **registry_overall(per_rank, "run_summary")}


def rank_table(per_rank: pd.DataFrame) -> pd.DataFrame:
    """The ranks' rows (``rank`` as text) and the ``overall`` row, in ``columns()``."""
    rows = per_rank.assign(rank=per_rank["rank"].astype(str))
    return pd.DataFrame([*rows.to_dict("records"), overall(per_rank)])[columns()]


def run_categories(res: RunResults) -> pd.DataFrame:
    """GPU time by kernel category over the ranks' selections together (count, total_ns, pct_time): the
    ranks' tables summed, categories in the order first seen, largest first (as ``category_time``)."""
    parts = [x.categories for x in res.ranks.values()]
    both = pd.concat(parts, ignore_index=True) if parts else category_time(pd.DataFrame({"dur_ns": []}))
    summed = both.groupby("category", sort=False)[["count", "time_ns"]].sum().reset_index()
    summed = summed.sort_values("time_ns", ascending=False, kind="stable").reset_index(drop=True)
    return with_share(summed.rename(columns={"time_ns": "total_ns"}))


def run_summary(res: RunResults, label: str | None = None) -> Report:
    """The summary of a run's RankResults (``traceview.scale.run_results``, or ``of_run`` of a loaded
    ``Run``): table ``ranks``, table ``by_category``."""
    per_rank = rank_metrics(res)
    table = rank_table(per_rank)
    first = next(iter(res.ranks.values()))
    total = table.iloc[-1]
    info = {
        "run": label,
        "ranks": len(res.ranks),
        "world_size": res.world_size,
        "rank_rule": res.rule,
        "missing_ranks": rank_list(res.missing) or "none",
        "selection": first.selection,
        "per": first.per,
        "gpu_activities": int(total["gpu_activities"]),
        "gpu_time_ns": int(total["gpu_time_ns"]),
    }  # the table's per-step columns say so in their names
    notes = [w for x in res.ranks.values() for w in x.warnings] + res.notes + res.skipped
    notes += [n for x in res.ranks.values() for n in x.notes]
    notes.append(
        "overall: counts and times summed over the ranks (per step: the whole job's work in one step); "
        "the distributed analyses (GPU idle, overlap, stragglers) are in 'traceview ranks'"
    )
    return Report(
        kind="run_summary",
        title=f"Summary of a run of {len(res.ranks)} rank(s)" + (f" ({label})" if label else ""),
        tables={"ranks": table, "by_category": run_categories(res)},
        findings=findings(per_rank, res),
        info=info,
        notes=notes,
    )


def findings(per_rank: pd.DataFrame, run) -> list[str]:
    out = []
    busy = per_rank[per_rank["gpu_activities"] > 0]
    if len(busy) > 1:
        t = busy.set_index("rank")["gpu_time_per_step_ns"]
        med = t.median()
        hi, lo = t.idxmax(), t.idxmin()
        above = f", {100.0 * (t[hi] / med - 1.0):+.1f}% against the ranks' median" if med else ""
        out.append(
            f"GPU time per step ranges from {human_ns(t[lo])} (rank {lo}) to {human_ns(t[hi])} "
            f"(rank {hi}{above})"
        )
        k = busy.set_index("rank")["kernels_per_step"]
        if k.nunique() > 1:
            out.append(
                f"kernels per step differ between ranks: {k.min():g} (rank {k.idxmin()}) to "
                f"{k.max():g} (rank {k.idxmax()})"
            )
    idle = per_rank.loc[per_rank["gpu_activities"] == 0, "rank"].tolist()
    if idle:
        out.append(f"no GPU activity in the selection on rank(s) {rank_list(idle)}")
    if run.missing:
        out.append(
            f"{len(run.missing):,} of {run.world_size:,} ranks have no trace: {rank_list(run.missing)}"
        )
    return out
