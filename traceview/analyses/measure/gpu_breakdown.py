"""Time breakdown of one GPU: computation, communication, memcpy/memset and idle, in exact ns.

Every instant between the GPU's first activity start and its last activity end is
counted once, in the first of these states that holds (overlapping streams never
count twice, so the four add up to the span):

- ``computation_ns``: some computation kernel runs (any kernel that is neither
  communication nor memcpy/memset);
- ``communication_ns``: no computation, but a communication kernel (category
  ``communication``: NCCL/RCCL) runs;
- ``memory_ns``: only memcpy/memset run;
- ``idle_ns``: nothing runs.

This is HTA's ``get_temporal_breakdown`` with its non-compute time split in two:
HTA's ``compute_time`` = ``computation_ns``, ``non_compute_time`` =
``communication_ns + memory_ns``, ``idle_time`` = ``idle_ns``.

``category_time`` is GPU time by category (every table of it calls it); ``categories``
is the time per kernel category (summed durations, so kernels that
overlap on different streams each count), GEMMs split by tensor cores vs CUDA cores,
attention by backend.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from . import intervals as iv
from .derived import is_text, texts

CLASSES = ("computation", "communication", "memory")


def gpu_class(acts: pd.DataFrame) -> np.ndarray:
    """Each activity's class: computation, communication or memory."""
    comp, comm = gpu_masks(acts)
    return np.where(comp, "computation", np.where(comm, "communication", "memory"))


def gpu_masks(acts: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Which activities are computation and which communication (``gpu_class``, as two masks):
    a memcpy/memset is memory whatever its category."""
    memory = acts["kind"].isin(("memcpy", "memset")).to_numpy(dtype=bool)
    comm = is_text(acts["category"], "communication") & ~memory
    return ~memory & ~comm, comm


def gpu_states(acts: pd.DataFrame) -> dict:
    """span, busy and the four exclusive states of these activities, in ns."""
    every = iv.spans(acts)
    cls = gpu_class(acts)
    return states_of(every, cls == "computation", cls == "communication")


def states_of(every: iv.Spans, is_comp: np.ndarray, is_comm: np.ndarray) -> dict:
    """``gpu_states`` of activities given as their spans and class masks (one definition for a
    frame and for the slices of one, e.g. a rank's steps)."""
    comp, comm = (every[0][is_comp], every[1][is_comp]), (every[0][is_comm], every[1][is_comm])
    span, busy = iv.extent(every), iv.length(every)
    computation = iv.length(comp)
    comp_or_comm = iv.length(iv.join(comp, comm))
    return {
        "span_ns": span,
        "busy_ns": busy,
        "computation_ns": computation,
        "communication_ns": comp_or_comm - computation,
        "memory_ns": busy - comp_or_comm,
        "idle_ns": span - busy,
    }


def category_labels(acts: pd.DataFrame) -> np.ndarray:
    """The category, with GEMMs by core type and attention by backend."""
    cat = acts["category"].astype(str).to_numpy().astype(object)
    tc = acts["tensor_core"]
    cores = np.where(
        tc.isna().to_numpy(),
        "unknown cores",
        np.where(tc.fillna(False).to_numpy(dtype=bool), "tensor cores", "CUDA cores"),
    )
    backend = acts["attention_backend"].astype(object).where(acts["attention_backend"].notna(), "unknown")
    out = np.where(cat == "gemm", "gemm (" + cores.astype(object) + ")", cat)
    return np.where(cat == "attention", "attention (" + backend.astype(str).to_numpy() + ")", out)


def category_time(acts: pd.DataFrame, by: dict | None = None) -> pd.DataFrame:
    """GPU time by category, the one function every table of it calls: per group (``by``: column ->
    one label per activity; default the kernel category) the activities' ``count`` and ``time_ns``,
    their summed durations, each clipped at 0 as ``gpu_time_ns`` is (so the groups add up to it);
    largest first, ties in the order first seen."""
    if not len(acts):
        empty = {c: pd.Series(dtype=object) for c in (["category"] if by is None else by)}
        return pd.DataFrame({**empty, "count": pd.Series(dtype="int64"), "time_ns": pd.Series(dtype="int64")})
    time_ns = acts["dur_ns"].clip(lower=0).to_numpy(dtype=np.int64)
    if by is None:  # by the category's codes, its few texts put back after (no text per row grouped)
        codes, values = texts(acts["category"])
        known = codes < len(values) - 1  # the last value is "missing": left out, as groupby leaves NaN
        out = _sums(pd.DataFrame({"category": codes[known], "time_ns": time_ns[known]}))
        out["category"] = values[out["category"].to_numpy()]
    else:
        out = _sums(pd.DataFrame({**by, "time_ns": time_ns}))
    return out.sort_values("time_ns", ascending=False, kind="stable").reset_index(drop=True)


def _sums(frame: pd.DataFrame) -> pd.DataFrame:
    """Per group of the columns before ``time_ns`` (in the order first seen): count and summed time."""
    keys = [c for c in frame.columns if c != "time_ns"]
    return (
        frame.groupby(keys, sort=False)
        .agg(count=("time_ns", "size"), time_ns=("time_ns", "sum"))
        .reset_index()
    )


def categories(acts: pd.DataFrame) -> pd.DataFrame:
    """category (GEMMs by core type, attention by backend), class, kernels and time_ns, largest first."""
    by = (
        {"category": category_labels(acts), "class": gpu_class(acts)}
        if len(acts)
        else {"category": np.empty(0, dtype=object), "class": np.empty(0, dtype=object)}
    )
    return category_time(acts, by).rename(columns={"count": "kernels"})
