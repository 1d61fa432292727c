"""Narrow a trace's GPU activities to a step, annotation, device or stream."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..errors import TraceviewError


@dataclass(frozen=True)
class Selection:
    step: int | None = None
    annotation: str | None = None
    device: int | None = None
    stream: int | None = None

    def describe(self) -> str:
        parts = [f"{k}={v}" for k, v in vars(self).items() if v is not None]
        return ", ".join(parts) or "all"


def select_kernels(trace, sel: Selection | None = None) -> pd.DataFrame:
    """The GPU activities of ``trace`` that match ``sel`` (all when None)."""
    k = trace.kernels
    if sel is None:
        return k
    mask = pd.Series(True, index=k.index)
    if sel.step is not None:
        _require(trace, k["step"].notna().any(), "has no ProfilerStep#N spans; --step cannot apply")
        mask &= (k["step"] == sel.step).fillna(False)
        _require(trace, mask.any(), f"has no GPU activity in step {sel.step} "
                                    f"(steps: {_listing(k['step'].dropna().unique())})")
    if sel.annotation is not None:
        mask &= _in_annotation(trace, sel.annotation)
    if sel.device is not None:
        mask &= (k["device"] == sel.device).fillna(False)
    if sel.stream is not None:
        mask &= (k["stream"] == sel.stream).fillna(False)
    return k[mask.to_numpy()]


def _in_annotation(trace, name: str) -> pd.Series:
    """Activities launched inside any span of the named annotation (at any depth)."""
    spans = annotation_spans(trace, name)
    k = trace.kernels
    launch = k["launch"].to_numpy()
    when = trace.events["ts_ns"].to_numpy()[launch.clip(0)]
    return pd.Series((launch >= 0) & inside(when, spans), index=k.index)


def annotation_spans(trace, name: str) -> pd.DataFrame:
    """Start and duration of every span of the named annotation (or op); an error if none."""
    ev = trace.events
    spans = ev[(ev["name"] == name).to_numpy() & ev["role"].isin(("annotation", "cpu_op")).to_numpy()]
    _require(trace, len(spans) > 0, f"has no annotation named {name!r}")
    return spans[["ts_ns", "dur_ns"]]


def inside(ts: np.ndarray, spans: pd.DataFrame) -> np.ndarray:
    """Which times fall inside one of the spans (spans may nest or overlap)."""
    order = np.argsort(spans["ts_ns"].to_numpy(), kind="stable")
    starts = spans["ts_ns"].to_numpy()[order]
    ends = np.maximum.accumulate((spans["ts_ns"] + spans["dur_ns"].clip(lower=0)).to_numpy()[order])
    at = np.searchsorted(starts, ts, side="right") - 1
    return (at >= 0) & (ts < ends[np.clip(at, 0, None)])


def count_regions(trace, sel: Selection | None) -> int:
    """How many steps (or annotation spans) the selection covers: the per-step divisor."""
    if sel is not None and sel.step is not None:
        return 1
    if sel is not None and sel.annotation is not None:
        return len(annotation_spans(trace, sel.annotation))
    steps = trace.kernels["step"].dropna().unique()
    return max(len(steps), 1)


def _require(trace, ok: bool, problem: str) -> None:
    if not ok:
        raise TraceviewError(f"{trace.path}: {problem}")


def _listing(values) -> str:
    vals = sorted(int(v) for v in values)
    return ", ".join(map(str, vals[:10])) + (" ..." if len(vals) > 10 else "") if vals else "none"
