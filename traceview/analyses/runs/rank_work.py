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
from ..measure import intervals as iv
from ..measure.exposed import exposed
from ..measure.gpu_breakdown import categories, category_time, gpu_class, states_of
from ..measure.overlap import overlap_of
from ..measure.registry import metrics_of, parts
from ..measure.stream_idle import launch_times, stream_idle
from ..select.region import Selection, region


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
    cls = gpu_class(acts)
    return _metrics_of(iv.spans(acts), cls == "computation", cls == "communication")


def _metrics_of(every: iv.Spans, comp: np.ndarray, comm: np.ndarray) -> dict:
    """``gpu_metrics`` of activities given as their spans and class masks (a frame, or a step of one)."""
    return {**states_of(every, comp, comm), **overlap_of(every, comp, comm)}


def step_gpu_metrics(trace) -> pd.DataFrame:
    """One row per ProfilerStep: step, cpu_step_ns, then ``gpu_metrics`` of the activities launched in it.

    The activities' spans and classes are worked out once and cut per step from one sort by step
    (a rank has hundreds of steps: cutting the frame per step was most of ``ranks``' time)."""
    acts = trace.kernels
    step_of = acts["step"].fillna(-1).to_numpy(dtype=np.int64) if len(acts) else np.empty(0, np.int64)
    order = np.argsort(step_of, kind="stable")
    starts, ends = iv.spans(acts)
    starts, ends, step_of = starts[order], ends[order], step_of[order]
    cls = gpu_class(acts)[order] if len(acts) else np.empty(0, dtype=object)
    comp, comm = cls == "computation", cls == "communication"
    steps = trace.steps
    lo = np.searchsorted(step_of, steps["step"].to_numpy(dtype=np.int64), side="left")
    hi = np.searchsorted(step_of, steps["step"].to_numpy(dtype=np.int64), side="right")
    rows = []
    for s, dur, a, b in zip(
        steps["step"].tolist(), steps["dur_ns"].tolist(), lo.tolist(), hi.tolist(), strict=True
    ):
        every, c, m = (starts[a:b], ends[a:b]), comp[a:b], comm[a:b]
        rows.append({"step": int(s), "cpu_step_ns": int(dur), **_metrics_of(every, c, m)})
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
        step_gpu_metrics(trace),
        categories(acts),
        stream_idle(acts, launch_times(trace)),
        collectives(acts),
        notes,
        exposed_totals(trace),
    )


@dataclass
class RankResult:
    """What one rank task sends back for every run command (``traceview.scale``): small tables only."""

    path: str
    device_name: str | None
    work: RankWork | None  # the distributed analyses (ranks, compare --run, diff RUN_A/ RUN_B/)
    metrics: dict  # the registry's metrics of the selection (summary --run's row), hidden ratio parts too
    categories: pd.DataFrame  # category, count, time_ns of the selection, in the order first seen
    selection: str  # the selection, in words
    per: str  # what the per-step figures are per
    warnings: list = field(default_factory=list)  # the trace's, from loading it
    notes: list = field(default_factory=list)  # the selection's


def rank_result(trace, sel: Selection | None = None, *, work: bool = True) -> RankResult:
    """The rank's RankWork (``work``: whole trace) and its selection's registry row and category table:
    one function for a rank loaded on a worker, here, or in a loaded ``Run``. A selection that matches
    nothing raises (TraceviewError), whatever ``skip_bad`` says."""
    reg = region(trace, sel)
    acts = reg.activities
    cats = category_time(acts.iloc[:0])
    if len(acts) and "category" in acts:
        seen = pd.unique(acts["category"].astype(str).to_numpy())  # the run's table keeps first-seen ties
        cats = category_time(acts).set_index("category").loc[seen].reset_index()
    return RankResult(
        trace.path,
        trace.device_name,
        rank_work(trace) if work else None,
        {**metrics_of(reg), **parts(reg)},  # parts: what a ratio of sums adds up over the ranks
        cats,
        reg.selection.describe(),
        reg.per_word,
        list(trace.warnings),
        list(reg.notes),
    )


@dataclass
class RunResults:
    """A run's RankResults by rank, and which file is which rank: what every run command is built from."""

    ranks: dict  # rank -> RankResult, by rank
    world_size: int
    rule: str
    missing: object  # RankRanges
    notes: list  # the plan's
    skipped: list = field(default_factory=list)  # "skipped PATH: why"

    def works(self) -> dict:
        """rank -> RankWork."""
        return {r: x.work for r, x in self.ranks.items()}


def of_run(run, sel: Selection | None = None, *, work: bool = True) -> RunResults:
    """A loaded ``Run``'s results, by the same ``rank_result`` a rank task runs."""
    ranks = {r: rank_result(t, sel, work=work) for r, t in run.traces.items()}
    return RunResults(ranks, run.world_size, run.rule, run.missing, list(run.notes))
