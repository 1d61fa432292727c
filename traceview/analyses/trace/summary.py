"""``summary``: device, GPU time and activity counts, per step, per kind, top kernels."""

from __future__ import annotations

import pandas as pd

from ...report import Report
from ..measure import memory
from ..measure.completeness import completeness, completeness_table, launches_by_api, workload_table
from ..measure.derived import kept_for_region
from ..measure.gpu_breakdown import category_time
from ..measure.registry import metrics_of, shown
from ..select.region import Selection, region
from ..wording.names import kernel_label
from .advise import advice_table
from .advise import findings as advice_findings


def summary(trace, sel: Selection | None = None, top: int = 10) -> Report:
    r = region(trace, sel)
    values = metrics_of(r)
    info = {
        "trace": trace.path,
        "label": trace.label,
        "device": trace.device_name,
        "selection": r.selection.describe(),
        "per": r.per_word,
        **shown(values, "summary"),
    }
    tables = {
        "by_kind": _kept(r, "by_kind", by_kind),
        "per_step": _kept(r, "per_step", step_totals),
        "top_kernels": _labelled(_kept(r, "kernel_totals", lambda k: _totals(k, "name")).head(top)),
    }
    if kept_for_region(r, "classified", lambda r: "category" in r.activities.columns, value=True):
        tables["by_category"] = _kept(r, "by_category", by_category)
    # comparability first (issue 18): whether the file holds all the GPU work, and what work it ran
    tables["completeness"] = completeness_table([(trace.label, trace)])
    tables["launches"] = launches_by_api(trace)
    tables["workload"] = workload_table([(trace.label, r)])
    if len(trace.memory):  # the whole trace's peak, whatever the selection: one moment, not per step
        tables["memory"] = memory.peaks(trace)
    advice = advice_table(r)[0]  # what to do about it (tv.advise), ranked by the time at stake
    if len(advice):
        tables["advice"] = advice
    # the completeness warning is the first of the trace's warnings (load puts it there); a Trace
    # built by hand, without load, gets it here
    warning = completeness(trace)["warning"]
    notes = [warning] * (bool(warning) and warning not in trace.warnings) + list(trace.warnings) + r.notes
    if values["gpu_activities"]:
        notes.append(
            "linked_to_op_pct: the share of these GPU activities whose launching CPU op was found "
            "(runtime launch matched by correlation id, then the op around it)"
        )
    said = advice_findings(advice, r.per_word)
    return Report(
        kind="summary",
        title=f"Summary of {trace.label}",
        tables=tables,
        findings=said,
        info=info,
        notes=notes,
    )


def _kept(r, name: str, make) -> pd.DataFrame:
    """``make(r.activities)``, kept in the trace's cache entry for the whole trace; a copy each."""
    return kept_for_region(r, name, lambda r: make(r.activities)).copy()


def _totals(k: pd.DataFrame, key: str) -> pd.DataFrame:
    g = k.groupby(key, observed=True)["dur_ns"]
    out = pd.DataFrame({"count": g.size(), "total_ns": g.sum()})
    total = out["total_ns"].sum()
    out["pct_time"] = 100.0 * out["total_ns"] / total if total else 0.0
    return out.sort_values("total_ns", ascending=False).reset_index()


def by_kind(k: pd.DataFrame) -> pd.DataFrame:
    return _totals(k, "kind")


def by_category(k: pd.DataFrame) -> pd.DataFrame:
    """GPU time by kernel category (``category_time``): count, total_ns and share, largest first."""
    return with_share(category_time(k).rename(columns={"time_ns": "total_ns"}))


def with_share(t: pd.DataFrame) -> pd.DataFrame:
    """``t`` (a ``total_ns`` column) with ``pct_time``: each row's share of the total."""
    total = t["total_ns"].sum()
    return t.assign(pct_time=100.0 * t["total_ns"] / total if total else 0.0)


def step_totals(k: pd.DataFrame) -> pd.DataFrame:
    """GPU activities and GPU time of each step (the summary table ``per_step``)."""
    stepped = k[["step", "dur_ns"]].dropna(subset=["step"])  # the two columns read, not every one
    g = stepped.groupby("step", observed=True)["dur_ns"]
    return pd.DataFrame({"gpu_activities": g.size(), "gpu_time_ns": g.sum()}).reset_index()


def top_kernels(k: pd.DataFrame, n: int) -> pd.DataFrame:
    """The ``n`` names with the most GPU time: ``kernel`` (the readable name, :func:`.names.kernel_label`),
    count, time, share, and ``name`` (the full name, last)."""
    return _labelled(_totals(k, "name").head(n))


def _labelled(top: pd.DataFrame) -> pd.DataFrame:
    top.insert(0, "kernel", [kernel_label(str(x)) for x in top["name"]])
    return top[["kernel", "count", "total_ns", "pct_time", "name"]]
