"""Idle time per stream, and what each gap waited for.

On one stream, a gap is the time from the end of everything before an activity (the
running maximum of earlier ends) to its start. The gap's cause comes from when the
host launched the activity:

- ``host``: the launch call started after the stream had drained; the GPU waited
  for the CPU to enqueue work;
- ``dependency``: the activity was already enqueued when the stream drained, yet
  started later; it waited on another stream's kernel (an event wait, a collective
  or a synchronisation);
- ``unknown``: no launch was linked to the activity.

A stream's span runs from its first start to its last end; ``idle_ns`` is the sum
of its gaps and ``busy_ns`` + ``idle_ns`` = ``span_ns``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .derived import kept_for_trace

CAUSES = ("host", "dependency", "unknown")


def gaps(acts: pd.DataFrame, launch_ts: np.ndarray) -> pd.DataFrame:
    """One row per activity that waited: stream, gap_ns, cause (``launch_ts``: -1 when unlinked)."""
    order = np.lexsort((acts["ts_ns"].to_numpy(), acts["stream"].fillna(-1).to_numpy()))
    stream = acts["stream"].fillna(-1).to_numpy(dtype=np.int64)[order]
    start = acts["ts_ns"].to_numpy(dtype=np.int64)[order]
    end = start + acts["dur_ns"].to_numpy(dtype=np.int64)[order].clip(0)
    launched = launch_ts[order]
    reach = pd.Series(end).groupby(stream).cummax().to_numpy()
    first = np.r_[True, stream[1:] != stream[:-1]] if len(stream) else np.empty(0, bool)
    prev = np.where(first, start, np.r_[start[:1], reach[:-1]])
    gap = (start - prev).clip(0)
    cause = np.where(launched < 0, "unknown", np.where(launched >= prev, "host", "dependency"))
    keep = gap > 0
    return pd.DataFrame({"stream": stream[keep], "gap_ns": gap[keep], "cause": cause[keep]})


def stream_idle(acts: pd.DataFrame, launch_ts: np.ndarray) -> pd.DataFrame:
    """Per stream: activities, span_ns, busy_ns, idle_ns and idle by cause."""
    cols = ["stream", "activities", "span_ns", "busy_ns", "idle_ns", *[f"idle_{c}_ns" for c in CAUSES]]
    if not len(acts):
        return pd.DataFrame({c: pd.Series(dtype=np.int64) for c in cols})
    stream = acts["stream"].fillna(-1).to_numpy(dtype=np.int64)
    start = acts["ts_ns"].to_numpy(dtype=np.int64)
    end = start + acts["dur_ns"].to_numpy(dtype=np.int64).clip(0)
    per = pd.DataFrame({"stream": stream, "start": start, "end": end}).groupby("stream")
    out = pd.DataFrame({"activities": per.size(), "span_ns": per["end"].max() - per["start"].min()})
    g = gaps(acts, launch_ts)
    by_cause = g.pivot_table(index="stream", columns="cause", values="gap_ns", aggfunc="sum", fill_value=0)
    for c in CAUSES:
        out[f"idle_{c}_ns"] = by_cause[c].reindex(out.index, fill_value=0) if c in by_cause else 0
    out["idle_ns"] = out[[f"idle_{c}_ns" for c in CAUSES]].sum(axis=1)
    out["busy_ns"] = out["span_ns"] - out["idle_ns"]
    return out.reset_index()[cols].astype(np.int64)


def launch_times(trace) -> np.ndarray:
    """Start of each GPU activity's launch call (-1 when unlinked), row by row of ``trace.kernels``;
    kept in the trace's cache entry (a warm run reads no events)."""
    kept = kept_for_trace(trace, "launch_ts", _launch_ts)
    return kept["launch_ts_ns"].to_numpy()


def _launch_ts(trace) -> pd.DataFrame:
    launch = trace.kernels["launch"].to_numpy()
    ts = trace.events["ts_ns"].to_numpy(dtype=np.int64)
    at = np.where(launch >= 0, ts[np.clip(launch, 0, None)] if len(ts) else -1, -1)
    return pd.DataFrame({"launch_ts_ns": at.astype(np.int64)})
