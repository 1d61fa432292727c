"""One selection -> one region: the only place that narrows a trace.

A ``Selection`` names what to look at (a step, an annotation, a device, a stream,
a kind of GPU activity). ``region(trace, sel)`` checks it against the trace (a part
that matches nothing is an error that lists what exists) and returns a ``Region``:
the selected GPU activities and CPU ops, the number of regions every per-step
number is divided by, and what was left out. summary, kernels, diff, compare,
timeline and every plot start from a Region; nothing else selects.

What a region is:

- ``--step N``: that ProfilerStep (divisor 1);
- ``--annotation NAME``: every span of that record_function (divisor: the spans);
  GPU activities count when their launch falls inside a span;
- otherwise every ProfilerStep (divisor: the steps); activities launched outside
  every step are left out and counted;
- a trace without ProfilerSteps: the whole trace counts as one step.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from ... import cache
from ...deferred import deferred_fields, replaced, stand_in, unmade
from ...errors import TraceviewError
from ...selection import KINDS, PER_WORD, Selection

if TYPE_CHECKING:  # for the annotation only
    from ...model import Trace


def per_region_count(counts, regions: int):
    """See :meth:`Region.per_region_count`."""
    values = np.asarray(counts)
    if values.dtype.kind in "iu" and (regions == 1 or not (values % regions).any()):
        out = values // regions
    else:
        out = values / regions
    return pd.Series(out, index=counts.index, name=counts.name) if isinstance(counts, pd.Series) else out


@deferred_fields("ops", "activities")
@dataclass
class Region:
    """One trace narrowed to a selection. ``ops`` and ``activities`` may be a ``Deferred``: those of
    every step of a trace are cut when first used (a warm summary or diff reads what it needs of
    them from the trace's cache entry, and the trace's tables are then never read)."""

    trace: Trace
    selection: Selection
    activities: pd.DataFrame  # selected GPU activities (kernels, memcpys, memsets) in the regions
    ops: pd.DataFrame  # CPU ops in the regions; ``outer``: no parent op inside the region
    regions: int  # the per-step divisor (>= 1)
    region_kind: str  # "step", "steps", "annotation" or "trace"
    cpu_wall_ns: int  # wall time of the regions on the CPU
    left_out: int = 0  # selected GPU activities launched outside every step
    notes: list = field(default_factory=list)

    @property
    def label(self) -> str:
        return self.trace.label

    @property
    def has_gpu(self) -> bool:
        return len(self.activities) > 0

    @property
    def per_word(self) -> str:
        return PER_WORD[self.region_kind]

    def per_region_count(self, counts) -> pd.Series | np.ndarray:
        """Counts (a Series or array of ints) divided by the number of regions: int64 when every
        count divides exactly (always with one region), so that a count reads and is stored
        as an integer; float only when some average per step is fractional (1.5 kernels)."""
        return per_region_count(counts, self.regions)


def region(trace, sel: Selection | None = None) -> Region:
    """Narrow ``trace`` to ``sel`` (None: everything) and work out the per-step divisor. Cut once
    per trace and selection (kept in ``trace.derived``): every Region of the two holds the same
    ``activities`` and ``ops`` frames (never changed by their readers), which is what lets the
    tables derived from a region be kept (``measure.derived.of_region``); each call gets its own
    ``notes``."""
    sel = sel or Selection()
    key = ("region", sel)
    if key not in trace.derived:
        trace.derived[key] = _cut(trace, sel)
    return replaced(trace.derived[key], notes=list(trace.derived[key].notes))


def _cut(trace, sel: Selection) -> Region:
    check(trace, sel)
    if sel.step is None and sel.annotation is None and len(trace.steps):
        return _every_step(trace, sel)
    acts = _matching_activities(trace, sel)
    ops = trace.ops
    if sel.step is not None:
        r = _one_step(trace, sel, sel.step, acts, ops)
    elif sel.annotation is not None:
        r = _annotated(trace, sel, sel.annotation, acts, ops)
    else:
        r = _whole_trace(trace, sel, acts, ops)
    r.ops = _marked(r.ops, ops)
    return r


def _marked(kept: pd.DataFrame, ops: pd.DataFrame) -> pd.DataFrame:
    """The region's ops ``kept`` (rows of ``ops``) with ``outer``: no parent op inside the region."""
    return kept.assign(outer=outer_rows(ops, positions(ops.index, kept.index)))


def outer_rows(ops: pd.DataFrame, rows: np.ndarray) -> np.ndarray:
    """Which of the ops at positions ``rows`` of ``ops`` (a region's) have no parent op among them:
    ``parent`` is a position in ``ops``, so a mask of the region answers without a search."""
    inside = np.zeros(len(ops), dtype=bool)
    inside[rows] = True
    parent = ops["parent"].to_numpy()[rows]
    return ~((parent >= 0) & inside[np.clip(parent, 0, None)])


def positions(index: pd.Index, labels: pd.Index) -> np.ndarray:
    """Where each of ``labels`` stands in ``index`` (the trace's op table and a region's ops)."""
    if isinstance(index, pd.RangeIndex) and index.start == 0 and index.step == 1:
        return labels.to_numpy(dtype=np.int64)
    return index.get_indexer(labels)


def op_rows(r: Region) -> tuple[np.ndarray, np.ndarray]:
    """The region's ops as positions in ``r.trace.ops`` (in the region's order) and whether each
    is outermost. Every step's ops, not cut yet, are found without the cut: a count, a sum or a
    lookup over them then copies none of a 400k-row table (a cold summary asks no more of them)."""
    ops = r.trace.ops
    if _uncut(r):
        rows = _stepped_rows(ops)
        return rows, outer_rows(ops, rows)
    return positions(ops.index, r.ops.index), r.ops["outer"].to_numpy(dtype=bool)


def op_columns(r: Region, *columns: str) -> pd.DataFrame:
    """The region's ops with only ``columns`` (of the trace's op table): every step's ops, not cut
    yet, are those columns taken at ``op_rows``, not the 23 columns of all of them copied."""
    if not _uncut(r):
        return r.ops[list(columns)]
    return _at(r.trace.ops[list(columns)], _stepped_rows(r.trace.ops))


def _uncut(r: Region) -> bool:
    """Whether ``r`` holds every step's ops not cut yet (made from the trace when first read)."""
    return r.region_kind == "steps" and unmade(r, "ops")


# ------------------------------------------------------------------ checking the selection


def check(trace, sel: Selection) -> None:
    """Every part of ``sel`` must match something in ``trace``; else an error listing what exists."""
    if sel.kind is not None and sel.kind not in KINDS:
        _fail(trace, f"--kind must be one of {', '.join(KINDS)}, not {sel.kind!r}")
    if sel.step is not None:
        steps = trace.steps["step"].tolist()
        if not steps:
            _fail(trace, "has no ProfilerStep#N spans; --step cannot apply")
        if sel.step not in set(steps):
            _fail(trace, f"has no step {sel.step} (steps: {listing(steps)})")
    if sel.annotation is not None:
        annotation_spans(trace, sel.annotation)
    filters = {"kind": sel.kind, "device": sel.device, "stream": sel.stream}
    if any(v is not None for v in filters.values()):  # the kernels table, read only to check a filter
        _check_filters(trace, sel, {w: v for w, v in filters.items() if v is not None})


def _check_filters(trace, sel: Selection, filters: dict) -> None:
    k = trace.kernels
    for what, value in filters.items():
        within = _on_device(k, sel.device) if what == "stream" else k
        if not len(k):
            _fail(trace, f"has no GPU activity; --{what} cannot apply")
        present = within[what].dropna().unique().tolist()
        if value not in set(present):
            where = f" on device {sel.device}" if what == "stream" and sel.device is not None else ""
            _fail(trace, f"has no GPU activity with {what} {value}{where} ({what}s: {listing(present)})")


def _on_device(k: pd.DataFrame, device) -> pd.DataFrame:
    return k if device is None else k[(k["device"] == device).fillna(False).to_numpy()]


def _fail(trace, problem: str) -> None:
    raise TraceviewError(f"{trace.path}: {problem}")


def listing(values, n: int = 10) -> str:
    """Sorted values, the first ``n`` and "...", or "none"."""
    vals = sorted(
        {v if isinstance(v, str) else int(v) for v in values}, key=lambda v: (isinstance(v, str), v)
    )
    if not vals:
        return "none"
    return ", ".join(map(str, vals[:n])) + (" ..." if len(vals) > n else "")


# ------------------------------------------------------------------ annotations


def annotation_spans(trace, name: str) -> pd.DataFrame:
    """Start and duration of every span of the named annotation (or op); an error if none."""
    ev = trace.events
    spans = ev[(ev["name"] == name).to_numpy() & ev["role"].isin(("annotation", "cpu_op")).to_numpy()]
    if not len(spans):
        _fail(trace, f"has no annotation named {name!r}")
    return spans[["ts_ns", "dur_ns"]]


def inside(ts: np.ndarray, spans: pd.DataFrame) -> np.ndarray:
    """Which times fall inside one of the spans (spans may nest or overlap)."""
    order = np.argsort(spans["ts_ns"].to_numpy(), kind="stable")
    starts = spans["ts_ns"].to_numpy()[order]
    ends = np.maximum.accumulate((spans["ts_ns"] + spans["dur_ns"].clip(lower=0)).to_numpy()[order])
    at = np.searchsorted(starts, ts, side="right") - 1
    return (at >= 0) & (ts < ends[np.clip(at, 0, None)])


# ------------------------------------------------------------------ cutting


def _matching_activities(trace, sel: Selection) -> pd.DataFrame:
    """The GPU activities matching every part of ``sel`` but the step."""
    k = trace.kernels
    mask = np.ones(len(k), dtype=bool)
    for column, value in (("device", sel.device), ("stream", sel.stream), ("kind", sel.kind)):
        if value is not None:
            mask &= (k[column] == value).to_numpy(dtype=bool, na_value=False)
    if sel.annotation is not None and len(k):
        launch = k["launch"].to_numpy()
        when = trace.events["ts_ns"].to_numpy()[launch.clip(0)]
        mask &= (launch >= 0) & inside(when, annotation_spans(trace, sel.annotation))
    return k if mask.all() else k[mask]


def _in_step(frame: pd.DataFrame, step: int) -> pd.DataFrame:
    return frame[(frame["step"] == step).fillna(False).to_numpy()]


def _one_step(trace, sel: Selection, step: int, acts, ops) -> Region:
    span = trace.steps[trace.steps["step"] == step].iloc[0]
    acts, ops = _in_step(acts, step), _in_step(ops, step)
    wall = int(span["dur_ns"])
    if sel.annotation is not None:
        spans = annotation_spans(trace, sel.annotation)
        in_step = (spans["ts_ns"] >= span["ts_ns"]) & (spans["ts_ns"] < span["ts_ns"] + span["dur_ns"])
        wall = int(spans.loc[in_step, "dur_ns"].clip(lower=0).sum())
        ops = ops[inside(ops["ts_ns"].to_numpy(), spans)]
    return Region(trace, sel, acts, ops, 1, "step", wall)


def _annotated(trace, sel: Selection, name: str, acts, ops) -> Region:
    spans = annotation_spans(trace, name)
    ops = ops[inside(ops["ts_ns"].to_numpy(), spans)]
    return Region(trace, sel, acts, ops, len(spans), "annotation", int(spans["dur_ns"].clip(lower=0).sum()))


def _every_step(trace, sel: Selection) -> Region:
    left_out = _unstepped(trace, sel)
    notes = []
    if left_out:
        notes.append(
            f"{trace.label}: {left_out} GPU activities launched outside every ProfilerStep "
            "are left out of the per-step numbers"
        )
    return Region(
        trace,
        sel,
        stand_in(functools.partial(_stepped_activities, trace, sel)),
        stand_in(functools.partial(_stepped_ops, trace)),
        len(trace.steps),
        "steps",
        int(trace.steps["dur_ns"].clip(lower=0).sum()),
        left_out,
        notes,
    )


def _unstepped(trace, sel: Selection) -> int:
    """How many of the selected GPU activities were launched outside every step; for the whole
    trace, kept in its cache entry (a warm summary reads no kernels table)."""

    def count(trace) -> int:
        return int((~_matching_activities(trace, sel)["step"].notna()).to_numpy().sum())

    return cache.derived_value(trace, "unstepped_activities", count) if sel == Selection() else count(trace)


def _stepped_activities(trace, sel: Selection) -> pd.DataFrame:
    acts = _matching_activities(trace, sel)
    return _rows(acts, acts["step"].notna().to_numpy())


def _stepped_ops(trace) -> pd.DataFrame:
    ops = trace.ops
    rows = _stepped_rows(ops)
    return _at(ops, rows).assign(outer=outer_rows(ops, rows))


def _at(frame: pd.DataFrame, rows: np.ndarray) -> pd.DataFrame:
    """``frame``'s rows at the sorted, distinct positions ``rows``: the frame itself when they are
    all of them (no copy of a 400k-row table to keep all of it)."""
    return frame if len(rows) == len(frame) else frame.take(rows)


def _stepped_rows(ops: pd.DataFrame) -> np.ndarray:
    """The positions of the ops inside some step."""
    return np.flatnonzero(ops["step"].notna().to_numpy())


def _rows(frame: pd.DataFrame, keep: np.ndarray) -> pd.DataFrame:
    """``frame[keep]``, or ``frame`` itself when every row is kept: a 400k-row table is not
    copied to keep all of it (a region's frames are never changed by their readers)."""
    return frame if keep.all() else frame[keep]


def _whole_trace(trace, sel: Selection, acts, ops) -> Region:
    starts = ops["ts_ns"].to_numpy()
    ends = starts + ops["dur_ns"].clip(lower=0).to_numpy()
    wall = int(ends.max() - starts.min()) if len(ops) else 0
    note = f"{trace.label}: no ProfilerStep#N spans; the whole trace counts as one step"
    return Region(trace, sel, acts, ops, 1, "trace", wall, 0, [note])
