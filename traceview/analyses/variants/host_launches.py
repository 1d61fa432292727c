"""What the host launched: the runtime's kernel-launch calls in a region (issue 32 item 4).

``kernel_launches_per_step`` (metrics) counts the launches whose kernels are in the file. A trace
whose profiler lost activity records holds many more launches than that: the llama trace's host
made 1,556 ``cudaLaunchKernel`` calls, 633 with their kernel recorded. A diff that says "B makes 3
kernel launches per trace vs 633 in A" then compares what survived, not what the host did. Here
every runtime kernel-launch call (``traceview.launches``: the APIs in ``rules/completeness.toml``,
a driver call under a runtime call counted once) made inside the region's windows counts, and so
do those with no GPU activity recorded for them.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ...launches import launches
from ..measure import metrics
from ..measure.derived import kept_for_region
from ..select.region import Region, annotation_spans, inside
from ..wording.words import num


def _in_region(r: Region, ts: np.ndarray) -> np.ndarray:
    """Which host times fall in the region's windows: its steps, its step, its annotation's spans
    (in its step), or anywhere for a trace without steps."""
    t = r.trace
    keep = np.ones(len(ts), dtype=bool)
    if r.region_kind in ("steps", "step"):
        steps = (
            t.steps if r.selection.step is None else t.steps[(t.steps["step"] == r.selection.step).to_numpy()]
        )
        keep &= inside(ts, steps[["ts_ns", "dur_ns"]])
    if r.selection.annotation is not None:
        keep &= inside(ts, annotation_spans(t, r.selection.annotation))
    return keep


def host_launches(r: Region) -> dict:
    """Per step: ``launches`` (runtime kernel-launch calls), ``without_gpu`` (those no GPU activity
    in the file links to), ``recorded`` (launches whose kernels are in the region: the metric
    ``kernel_launches_per_step``), and ``apis`` (the calls per step by API, ``cudaLaunchKernel 1,556``).
    Worked out once per trace and selection."""
    return dict(kept_for_region(r, "host_launches", _host_launches, value=True))


def _host_launches(r: Region) -> dict:
    every = launches(r.trace)
    rows = np.flatnonzero((every["kind"] == "kernel").to_numpy())
    rows = rows[_in_region(r, every["ts_ns"].to_numpy()[rows])]
    lw = every[["api", "lost"]].iloc[rows]  # the two columns read below, not the launch table
    by = lw.groupby("api", sort=True, observed=True).size().sort_values(ascending=False, kind="stable")
    per_step = r.per_region_count(by.to_numpy())
    return {
        "launches": r.per_region_count(np.int64(len(lw))),
        "without_gpu": r.per_region_count(np.int64(lw["lost"].sum())),
        "recorded": r.per_region_count(np.int64(metrics.kernel_launches(r))),
        "apis": ", ".join(f"{a} {num(n)}" for a, n in zip(by.index, per_step, strict=True)) or "-",
    }


def host_launch_table(sides) -> pd.DataFrame:
    """Table ``host_launches``: ``sides`` (side, label, Region); one row each, per step."""
    rows = []
    for side, label, r in sides:
        h = host_launches(r)
        rows.append(
            {
                "side": side,
                "trace": label,
                "launch_calls": h["launches"],
                "without_gpu": h["without_gpu"],
                "with_kernels_recorded": h["recorded"],
                "by_api": h["apis"],
            }
        )
    return pd.DataFrame(rows)
