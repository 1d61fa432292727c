"""``kernel_stats``: per kernel name, the columns of ``nsys stats`` cuda_gpu_kern_sum."""
from __future__ import annotations

import pandas as pd

from ..report import Report
from . import metrics
from .efficiency import efficiency_notes, with_efficiency
from .region import Selection, region

NSYS_COLUMNS = ["Time (%)", "Total Time (ns)", "Instances", "Avg (ns)", "Med (ns)", "Min (ns)", "Max (ns)",
                "StdDev (ns)", "Name"]


def kernel_stats(trace, sel: Selection | None = None) -> Report:
    """Per distinct name: Time %, Total, Instances, Avg, Med, Min, Max, StdDev (ns), plus category."""
    r = region(trace, sel)
    table = with_efficiency(name_stats(r.activities), r)
    return Report(kind="kernels", title=f"GPU activities of {trace.label} by name", tables={"kernels": table},
                  info={"trace": trace.path, "selection": r.selection.describe(), "per": r.per_word,
                        "regions": r.regions, "gpu_activities": metrics.gpu_activities(r),
                        "gpu_time_ns": metrics.gpu_time_ns(r)},
                  notes=list(trace.warnings) + r.notes + (efficiency_notes(trace) if r.has_gpu else []))


def name_stats(k: pd.DataFrame) -> pd.DataFrame:
    g = k.groupby("name", observed=True)["dur_ns"]
    out = pd.DataFrame({
        "Total Time (ns)": g.sum(), "Instances": g.size(), "Avg (ns)": g.mean(), "Med (ns)": g.median(),
        "Min (ns)": g.min(), "Max (ns)": g.max(), "StdDev (ns)": g.std(ddof=1).fillna(0.0),
    })
    total = out["Total Time (ns)"].sum()
    out.insert(0, "Time (%)", 100.0 * out["Total Time (ns)"] / total if total else 0.0)
    out = out.reset_index().rename(columns={"name": "Name"})[NSYS_COLUMNS]
    if "category" in k.columns:
        cats = k.drop_duplicates("name").set_index("name")
        for col in ("category", "tensor_core", "attention_backend"):
            if col in cats.columns:
                out[col] = cats[col].reindex(out["Name"].astype(str)).to_numpy()
    return out.sort_values("Total Time (ns)", ascending=False, kind="stable").reset_index(drop=True)


def unclassified_report(trace, sel: Selection | None = None) -> Report:
    from ..classify import unclassified

    r = region(trace, sel)
    table = unclassified(r.activities)
    return Report(kind="unclassified", title=f"Kernel names no rule matched in {trace.label}",
                  tables={"unclassified": table},
                  info={"trace": trace.path, "unclassified_pct_of_gpu_time": float(table["pct_of_gpu_time"].sum())
                        if len(table) else 0.0},
                  notes=list(trace.warnings) + r.notes)
