"""``memory``: a trace's allocations per device: the peak and the op at it, what is alive there,
per op and per step (figures defined in ``analyses.measure.memory`` and docs/metrics.md)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ...errors import TraceviewError
from ...report import Report
from ..measure import memory as mem
from ..select.region import Selection


def memory(trace, sel: Selection | None = None, timeline: bool = False) -> Report:
    """The memory Report of ``trace``: tables ``devices``, ``alive_at_peak``, ``ops``, ``steps``
    (and ``timeline``, allocated and reserved after every event, when ``timeline``). ``sel``
    may name a step (the events in it) and a GPU (``device``: its index)."""
    sel = sel or Selection()
    if sel.annotation is not None or sel.stream is not None or sel.kind is not None:
        raise TraceviewError(f"{trace.path}: memory selects by --step and --device only")
    s = mem.series(trace)
    s = _selected(trace, s, sel)
    info = {"trace": trace.path, "label": trace.label, "selection": sel.describe(), "events": len(s)}
    notes = list(trace.warnings)
    if not len(trace.memory):
        notes.append(mem.NO_MEMORY)
    if (s["basis"] == mem.RUNNING_SUM).any():
        notes.append(
            "this trace records no Total Allocated: allocated is the running sum of Bytes from the "
            "first event (memory allocated before the capture is not in it), and without Addr no "
            "allocation can be paired with its free (alive_at_peak is empty)"
        )
    devices = mem.devices(s)
    tables = {
        "devices": devices,
        "alive_at_peak": _alive(s, sel),
        "ops": mem.per_op(s),
        "steps": mem.step_memory(s),
    }
    if timeline:
        t0 = int(s["ts_ns"].min()) if len(s) else 0
        tables["timeline"] = pd.DataFrame(
            {
                "device": s["device"].to_numpy(),
                "t_ns": s["ts_ns"].to_numpy() - t0,
                "allocated_bytes": s["allocated"].to_numpy(),
                "reserved_bytes": s["reserved"].to_numpy(),
            }
        )
        info["t0_ns"] = t0
    findings = [_peak_words(row) for row in devices.itertuples(index=False)]
    findings += _growth_words(tables["steps"])
    return Report(
        kind="memory",
        title=f"Memory of {trace.label}",
        tables=tables,
        info=info,
        findings=findings,
        notes=notes,
    )


def _alive(s: pd.DataFrame, sel: Selection) -> pd.DataFrame:
    """alive_at_peak; with --step, what was allocated before is before the step, not the capture."""
    alive = mem.alive_at_peak(s)
    if sel.step is not None:
        alive["made_by"] = alive["made_by"].replace(mem.BEFORE, "(allocated before the step)")
    return alive


def _selected(trace, s: pd.DataFrame, sel: Selection) -> pd.DataFrame:
    """The events of the step and GPU selected, their allocations paired again among themselves
    (a free outside the selection does not free an allocation inside it)."""
    if sel.step is None and sel.device is None:
        return s
    keep = np.ones(len(s), dtype=bool)
    if sel.step is not None:
        keep &= (s["step"] == sel.step).fillna(False).to_numpy()
        if not keep.any() and len(trace.memory):
            raise TraceviewError(f"{trace.path}: no [memory] event in step {sel.step}")
    if sel.device is not None:  # s is in trace.memory's row order (series keeps it)
        m = trace.memory
        keep &= (m["device_id"].to_numpy() == sel.device) & (m["device_type"].to_numpy() != 0)
        if not keep.any() and len(trace.memory):
            raise TraceviewError(f"{trace.path}: no [memory] event on GPU {sel.device} in the selection")
    s = s[keep].reset_index(drop=True)
    s["freed_at"] = mem.pair(s)
    return s


def _peak_words(row) -> str:
    return f"{row.device}: peak {mem.size_words(row.peak_allocated_bytes)} allocated, in {row.peak_made_by}"


def _growth_words(steps: pd.DataFrame) -> list[str]:
    out = []
    for device, g in steps.groupby("device", sort=True):
        if len(g) >= 2 and g["growing"].iloc[1:].all():
            out.append(
                f"{device}: memory grows step after step ({len(g)} steps each keep allocations they "
                "do not free)"
            )
    return out
