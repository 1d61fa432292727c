"""``timeline``: one step's GPU activities (or, on a CPU-only trace, its CPU ops) on a time axis.

The table is what ``render.plot.plot_timeline`` draws: one row per activity with
its start relative to the step's first one, its lane (device and stream, or thread
and depth) and its colour group (kernel category, or outermost op).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ...errors import TraceviewError
from ...link import ARROW
from ...model import per_category
from ...report import Report
from ..measure import intervals
from ..select.region import Selection, region
from ..wording.names import kernel_label

MAX_GROUPS = 10  # CPU ops are coloured by their outermost op; the rest share one colour


def timeline(trace, sel: Selection | None = None) -> Report:
    """One step (``sel.step``; default the first step) of ``trace`` as a timeline Report."""
    sel = sel or Selection()
    if sel.step is None and len(trace.steps):
        sel = Selection(int(trace.steps["step"].iloc[0]), sel.annotation, sel.device, sel.stream, sel.kind)
    r = region(trace, sel)
    what = f" of step {sel.step}" if sel.step is not None else ""
    if r.has_gpu:
        table, basis = _gpu_rows(r.activities), "gpu"
    elif len(trace.kernels):
        raise TraceviewError(f"{trace.path}: no GPU activity in step {sel.step}")
    elif len(r.ops):
        table, basis = _cpu_rows(r.ops), "cpu"
    else:
        raise TraceviewError(f"{trace.path}: nothing to draw (no GPU activity and no CPU ops)")
    span = int((table["start_ns"] + table["dur_ns"]).max()) if len(table) else 0
    info = {"trace": trace.path, "label": trace.label, "step": sel.step, "basis": basis, "span_ns": span}
    if basis == "gpu":
        info["gpu_busy_pct"] = _busy_pct(table, span)
    title = f"{trace.label}: {'GPU activities' if basis == 'gpu' else 'CPU ops'}{what}"
    notes = list(trace.warnings) + r.notes  # an incomplete file's warning first, as everywhere
    return Report(kind="timeline", title=title, tables={"timeline": table}, info=info, notes=notes)


def _gpu_rows(k: pd.DataFrame) -> pd.DataFrame:
    t0 = int(k["ts_ns"].min())
    lane = k["device"].astype("Int64").astype(str) + " stream " + k["stream"].astype("Int64").astype(str)
    return pd.DataFrame(
        {
            "start_ns": k["ts_ns"].to_numpy() - t0,
            "dur_ns": k["dur_ns"].clip(lower=0).to_numpy(),
            "lane": ("GPU " + lane).to_numpy(),
            "level": 0,
            "group": k["category"].astype(str).to_numpy(),
            # readable, as every other table names kernels (raw names of different GEMMs read the same
            # cut); the raw name stays beside it, as in kernels' table
            "kernel": per_category(k["name"].astype("category"), kernel_label, ""),
            "name": k["name"].astype(str).to_numpy(),
        }
    )


def _cpu_rows(ops: pd.DataFrame) -> pd.DataFrame:
    t0 = int(ops["ts_ns"].min())
    root = per_category(ops["chain"], lambda c: str(c).split(ARROW, 1)[0], "")  # once per distinct chain
    outer = ops["outer"].to_numpy()
    by_root = pd.Series(ops["dur_ns"].to_numpy()[outer], index=root[outer]).groupby(level=0).sum()
    named = list(by_root.sort_values(ascending=False).index[:MAX_GROUPS])
    return pd.DataFrame(
        {
            "start_ns": ops["ts_ns"].to_numpy() - t0,
            "dur_ns": ops["dur_ns"].clip(lower=0).to_numpy(),
            "lane": per_category(ops["tid"], lambda t: f"thread {t}", "thread ?"),
            "level": ops["depth"].to_numpy(),
            "group": np.where(np.isin(root, named), root, "other ops"),
            "name": ops["name"].astype(str).to_numpy(),
        }
    )


def _busy_pct(table: pd.DataFrame, span: int) -> float:
    """Share of the step's GPU span in which at least one activity runs (on any stream)."""
    if span <= 0:
        return 0.0
    start = table["start_ns"].to_numpy(dtype=np.int64)
    return 100.0 * intervals.length((start, start + table["dur_ns"].to_numpy(dtype=np.int64))) / span
