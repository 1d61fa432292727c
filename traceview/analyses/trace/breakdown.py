"""``breakdown``: where the time goes per step, per trace, as the stacked-bar plot draws it.

GPU traces: GPU time per step by kernel category. CPU-only traces: CPU self time
per step by op name (an op's time minus its child ops', so bars add up without
double counting), the same ``MAX_OPS`` names for every bar and the rest as
"other ops".
"""

from __future__ import annotations

import pandas as pd

from ...report import Report
from ..measure.groups import stacked_bar, trace_labels
from ..select.region import region

MAX_OPS = 10


def breakdown(traces, sels=None, labels=None) -> Report:
    """One row per trace and group: ``time_per_step_ns``; ``sels`` gives each trace its selection."""
    traces = list(traces)
    sels = sels or [None] * len(traces)
    regions = [region(t, s) for t, s in zip(traces, sels, strict=True)]
    labels = labels or trace_labels(traces)
    gpu = any(r.has_gpu for r in regions)
    series = [
        stacked_bar(r, top=None)[1] if r.has_gpu or not gpu else pd.Series(dtype=float) for r in regions
    ]
    frame = pd.DataFrame(series, index=labels).fillna(0.0)
    if not gpu and len(frame.columns) > MAX_OPS:
        keep = frame.sum().sort_values(ascending=False).index[:MAX_OPS]
        frame = frame[keep].assign(**{"other ops": frame.drop(columns=keep).sum(axis=1)})
    order = frame.sum().sort_values(ascending=False).index.tolist()
    order = [g for g in order if g != "other ops"] + (["other ops"] if "other ops" in order else [])
    long = (
        frame[order]
        .rename_axis("trace")
        .reset_index()
        .melt("trace", var_name="group", value_name="time_per_step_ns")
    )
    what = (
        "GPU time per step by kernel category"
        if gpu
        else "CPU self time per step by CPU op (CPU-only traces)"
    )
    return Report(
        kind="breakdown",
        title=what,
        tables={"breakdown": long},
        info={"basis": "gpu" if gpu else "cpu", "traces": len(traces)},
        notes=[n for r in regions for n in r.notes],
    )
