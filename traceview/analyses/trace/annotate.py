"""What ``traceview annotate`` writes into a trace, as data: each GPU activity's
classification and launching op chain, and GPU time by category per step (the counter
tracks). ``render.annotated`` writes them back into the trace's JSON."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ...report import Report
from ..measure.groups import launch_chains
from ..measure.sources import NO_SOURCE, activity_sources, has_stacks, op_sources
from ..select.region import Selection, region

PREFIX = "traceview."


def gpu_annotations(trace) -> Report:
    """``activities``: one row per GPU activity (``event``: its row in ``trace.events``) with
    category, tensor_core, attention_backend, launched_by, source (the line of the user's code
    that launched it, ``file.py:42 forward``; None without one); ``per_step``: GPU time (ns) per
    step and category (step -1: activities outside every step)."""
    r = region(trace, Selection())
    k = trace.kernels
    chains = launch_chains(_whole(trace, r))
    acts = pd.DataFrame(
        {
            "event": k["event"].to_numpy(),
            "category": k["category"].astype(str).to_numpy() if "category" in k else "other",
            "tensor_core": k["tensor_core"].to_numpy() if "tensor_core" in k else None,
            "attention_backend": k["attention_backend"].astype(object).to_numpy()
            if "attention_backend" in k
            else None,
            "launched_by": chains,
            "source": _sources(trace, k),
        }
    )
    step = k["step"].fillna(-1).astype(np.int64).to_numpy() if len(k) else np.empty(0, np.int64)
    per_step = (
        pd.DataFrame({"step": step, "category": acts["category"], "time_ns": k["dur_ns"].clip(lower=0)})
        .groupby(["step", "category"], sort=True)["time_ns"]
        .sum()
        .reset_index()
    )
    return Report(
        kind="annotate",
        title=f"Annotations of {trace.label}",
        tables={"activities": acts, "per_step": per_step},
        info={"trace": trace.path, "gpu_activities": len(acts)},
    )


def _whole(trace, r):
    """A region over every GPU activity of the trace (launch chains for all of them)."""
    from dataclasses import replace

    return replace(r, activities=trace.kernels)


def _sources(trace, k: pd.DataFrame) -> np.ndarray:
    """Each activity's source line (None where it has none, or the trace has no stacks)."""
    if not has_stacks(trace):
        return np.full(len(k), None, dtype=object)
    src = activity_sources(trace, k, op_sources(trace))["source"].to_numpy()
    return np.where(src == NO_SOURCE, None, src)
