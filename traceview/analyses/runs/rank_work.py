"""Everything the distributed analyses need from one rank, computed where its trace is loaded.

``rank_work(trace)`` runs the per-rank analyses (GPU time breakdown, overlap, idle per
stream, the rank's collectives and steps) and returns a ``RankWork``: a few small
tables, the only thing that travels from a worker back to the client. The events
themselves never leave the process that loaded them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ...run import rank_info
from ..measure.exposed import exposed
from ..measure.gpu_breakdown import breakdown, categories, gpu_class
from ..measure.overlap import overlap
from ..measure.stream_idle import launch_times, stream_idle
from ..select.region import region


@dataclass
class RankWork:
    path: str
    info: tuple | None  # (rank, world_size) from distributedInfo, or None
    device_name: str | None
    totals: dict  # whole trace: breakdown + overlap
    steps: pd.DataFrame  # per ProfilerStep: cpu step, GPU breakdown + overlap
    categories: pd.DataFrame  # whole trace, per kernel category
    streams: pd.DataFrame  # whole trace, idle per stream
    collectives: pd.DataFrame  # communication kernels: name, n (occurrence), step, stream, ts_ns, dur_ns
    notes: list = field(default_factory=list)
    exposed: pd.DataFrame = field(default_factory=pd.DataFrame)  # cause, ns: every step's wall time split


def gpu_metrics(acts: pd.DataFrame) -> dict:
    """The GPU breakdown and the overlap of a set of activities."""
    return {**breakdown(acts), **overlap(acts)}


def per_step(trace) -> pd.DataFrame:
    """One row per ProfilerStep: step, cpu_step_ns, then ``gpu_metrics`` of the activities launched in it."""
    acts = trace.kernels
    step_of = acts["step"].fillna(-1).to_numpy(dtype=np.int64) if len(acts) else np.empty(0, np.int64)
    rows = [
        {"step": int(s.step), "cpu_step_ns": int(s.dur_ns), **gpu_metrics(acts[step_of == s.step])}
        for s in trace.steps.itertuples(index=False)
    ]
    cols = ["step", "cpu_step_ns", *gpu_metrics(acts.iloc[:0]).keys()]
    return pd.DataFrame(rows, columns=cols)


def collectives(acts: pd.DataFrame) -> pd.DataFrame:
    """The communication kernels in time order, numbered per name (``n``: 0, 1, ... on this rank)."""
    comm = acts[gpu_class(acts) == "communication"].sort_values("ts_ns", kind="stable") if len(acts) else acts
    out = pd.DataFrame(
        {
            "name": pd.Categorical(comm["name"].astype(str).to_numpy()),  # small to send
            "step": comm["step"].fillna(-1).to_numpy(dtype=np.int64),
            "stream": comm["stream"].fillna(-1).to_numpy(dtype=np.int64),
            "ts_ns": comm["ts_ns"].to_numpy(dtype=np.int64),
            "dur_ns": comm["dur_ns"].to_numpy(dtype=np.int64),
        }
    )
    out.insert(1, "n", out.groupby("name", sort=False).cumcount().to_numpy(dtype=np.int64))
    return out


def exposed_totals(trace) -> pd.DataFrame:
    """cause, ns: the rank's steps' wall time (the whole trace without steps) split by cause."""
    e = exposed(region(trace))
    t = e.totals()
    return pd.DataFrame({"cause": e.causes, "ns": np.array([t[c] for c in e.causes], dtype=np.int64)})


def rank_work(trace) -> RankWork:
    acts = trace.kernels
    notes = []
    devices = acts["device"].dropna().unique() if len(acts) else []
    if len(devices) > 1:
        notes.append(f"{trace.path}: GPU activities on {len(devices)} devices are analysed as one GPU")
    return RankWork(
        trace.path,
        rank_info(trace.meta),
        trace.device_name,
        gpu_metrics(acts),
        per_step(trace),
        categories(acts),
        stream_idle(acts, launch_times(trace, acts)),
        collectives(acts),
        notes,
        exposed_totals(trace),
    )
