"""``kernel_stats``: per kernel name, the columns of ``nsys stats`` cuda_gpu_kern_sum,
plus a readable name, the category and the CPU op chain that launched it."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ...report import Report
from ..measure import metrics
from ..measure.efficiency import efficiency_notes, op_table, with_efficiency
from ..measure.groups import launch_chains
from ..select.region import Selection, region
from ..wording.names import readable_kernel_name

#: nsys stats cuda_gpu_kern_sum's columns (Time (%), Total Time (ns), Instances, Avg, Med, Min, Max,
#: StdDev (ns), Name) under snake_case names; count, total_ns and pct_time as summary's top_kernels
NSYS_COLUMNS = [
    "pct_time",
    "total_ns",
    "count",
    "avg_ns",
    "median_ns",
    "min_ns",
    "max_ns",
    "stddev_ns",
    "name",
]


def kernel_stats(trace, sel: Selection | None = None, ops: bool = False) -> Report:
    """Per distinct name (``name``): share, total, count, mean, median, min, max and standard
    deviation of the durations (ns), plus a readable name (``kernel``), category and the launching
    op chain (the most common one and how many other chains launched the same name). ``ops``: also
    table ``ops``, one row per op name and shapes with its work and efficiency per step
    (:func:`.efficiency.op_table`)."""
    r = region(trace, sel)
    table = with_efficiency(name_stats(r.activities), r)
    tables = {"kernels": _with_chains(table, r)}
    info = {
        "trace": trace.path,
        "selection": r.selection.describe(),
        "per": r.per_word,
        "regions": r.regions,
        "gpu_activities": metrics.gpu_activities(r),
        "gpu_time_ns": metrics.gpu_time_ns(r),
    }
    if ops:
        tables["ops"] = op_table(r)
        info["per_step_tables"] = ["ops"]
    return Report(
        kind="kernels",
        title=f"GPU activities of {trace.label} by name",
        tables=tables,
        info=info,
        notes=list(trace.warnings) + r.notes + (efficiency_notes(trace) if r.has_gpu else []),
    )


def name_stats(k: pd.DataFrame) -> pd.DataFrame:
    g = k.groupby("name", observed=True)["dur_ns"]
    out = pd.DataFrame(
        {
            "total_ns": g.sum(),
            "count": g.size(),
            "avg_ns": g.mean(),
            "median_ns": g.median(),
            "min_ns": g.min(),
            "max_ns": g.max(),
            "stddev_ns": g.std(ddof=1).fillna(0.0),
        }
    )
    total = out["total_ns"].sum()
    out.insert(0, "pct_time", 100.0 * out["total_ns"] / total if total else 0.0)
    out = out.reset_index()[NSYS_COLUMNS]
    out.insert(0, "kernel", [readable_kernel_name(str(n)) for n in out["name"]])
    if "category" in k.columns:
        cats = k.drop_duplicates("name").set_index("name")
        for col in ("category", "tensor_core", "attention_backend"):
            if col in cats.columns:
                out[col] = cats[col].reindex(out["name"].astype(str)).to_numpy()
    return out.sort_values("total_ns", ascending=False, kind="stable").reset_index(drop=True)


def _with_chains(table: pd.DataFrame, r) -> pd.DataFrame:
    """``launched_by``: each name's most common launching op chain; ``other_chains``: how many more."""
    k = r.activities
    if not len(k):
        return table.assign(launched_by=pd.Series(dtype=object), other_chains=pd.Series(dtype="int64"))
    pairs = pd.DataFrame({"name": k["name"].astype(str).to_numpy(), "chain": launch_chains(r)})
    n = pairs.groupby(["name", "chain"], sort=False).size().reset_index(name="n")
    n = n.sort_values(["name", "n"], ascending=[True, False], kind="stable")
    top = n.drop_duplicates("name").set_index("name")["chain"]
    others = n.groupby("name").size() - 1
    names = table["name"].astype(str)
    return table.assign(
        launched_by=top.reindex(names).to_numpy(),
        other_chains=others.reindex(names).fillna(0).astype(np.int64).to_numpy(),
    )


def unclassified_report(trace, sel: Selection | None = None) -> Report:
    """Names no library rule matched, in two tables: tier "none" (nothing matched: counted in
    ``unclassified_pct_of_gpu_time``) and tier "name" (only a word of the name gave a guess)."""
    from ...classify import unclassified

    r = region(trace, sel)
    table = unclassified(r.activities)
    tier = table["tier"].astype(str) if len(table) else pd.Series(dtype=str)
    none, guessed = table[(tier == "none").to_numpy()], table[(tier == "name").to_numpy()]
    return Report(
        kind="unclassified",
        title=f"Kernel names no rule matched in {trace.label}",
        tables={"unclassified": none.reset_index(drop=True), "name_guesses": guessed.reset_index(drop=True)},
        info={
            "trace": trace.path,
            "unclassified_pct_of_gpu_time": float(none["pct_time"].sum()) if len(none) else 0.0,
            "name_guess_pct_of_gpu_time": float(guessed["pct_time"].sum()) if len(guessed) else 0.0,
        },
        notes=list(trace.warnings) + r.notes,
    )
