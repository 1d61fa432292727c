"""``compare(traces)``: one row per trace, per step, with ratios to a baseline.

The table that ends the attention story: kernels and GPU time per step, the
ratio to the baseline, where the GEMMs ran (tensor-core share of GEMM time),
which attention backend ran, and where the time went. On CPU-only traces the
same rows carry CPU ops and CPU time per step.
"""

from __future__ import annotations

import os

import numpy as np
import pandas as pd

from ...errors import TraceviewError
from ...report import Report
from ...run import one_job
from ..measure import memory, metrics
from ..measure.efficiency import efficiency, efficiency_findings, efficiency_notes
from ..measure.groups import breakdown, category_times, trace_labels
from ..measure.registry import per_step, shown_in
from ..select.region import Region, Selection, region
from ..wording.words import human, num, ratio, times


def compare(traces, baseline=None, sel: Selection | None = None) -> Report:
    """Compare any number of traces (loaded Trace objects) per step.

    ``baseline``: which trace the ratios are relative to: an index, a label, a path or
    a Trace (default: the first).
    """
    traces = list(traces)
    if not traces:
        raise TraceviewError("compare needs at least one trace")
    base = _baseline_index(traces, baseline)
    sides = [region(t, sel) for t in traces]
    labels = trace_labels(traces)
    gpu = any(s.has_gpu for s in sides)
    rows = [per_step(s) for s in sides]
    table = pd.DataFrame(
        [_row(label, s, m, rows[base], gpu) for label, s, m in zip(labels, sides, rows, strict=True)]
    )
    if gpu:
        tables = {"compare": table, "by_category": _category_table(labels, sides)}
    else:
        tables = {"compare": table, "by_op": _op_table(labels, sides)}
    findings = _findings(table, labels, base, gpu, sides)
    if any(len(t.memory) for t in traces):  # whole traces: the peak is one moment, not per step
        tables["memory"], words = _memory_table(traces, labels, base)
        findings += words
    notes = [w for t in traces for w in t.warnings] + [n for s in sides for n in s.notes]
    notes += [n for t in traces for n in efficiency_notes(t)] if gpu else []
    notes += [h for h in [one_job(traces)] if h]  # rank traces compared as variants: say --run exists
    per = sides[0].per_word if len({s.per_word for s in sides}) == 1 else "step"
    info = {
        "traces": len(traces),
        "baseline": labels[base],
        "selection": sides[0].selection.describe(),
        "per": per,
        "gpu": gpu,
        "per_step_tables": [n for n in tables if n != "memory"],  # the peak is one moment
    }
    return Report(
        kind="compare",
        title=f"Compare {len(traces)} traces (per {per}, baseline {labels[base]})",
        tables=tables,
        findings=findings,
        info=info,
        notes=notes,
    )


def _memory_table(traces, labels, base: int) -> tuple[pd.DataFrame, list[str]]:
    """Each trace's peak allocated per device beside the baseline's, and the diff's sentence for
    each trace whose peak differs from the baseline's."""
    rows, words = [], []
    for t, label in zip(traces, labels, strict=True):
        for r in memory.peaks(t).itertuples(index=False):
            rows.append(
                {
                    "trace": label,
                    "device": r.device,
                    "peak_allocated_bytes": r.peak_allocated_bytes,
                    "peak_made_by": r.peak_made_by,
                }
            )
        if t is not traces[base]:
            words += memory.peak_difference(traces[base], t, labels[base], label)[1]
    table = pd.DataFrame(rows, columns=["trace", "device", "peak_allocated_bytes", "peak_made_by"])
    at_base = table[table["trace"] == labels[base]].set_index("device")["peak_allocated_bytes"]
    table["vs_baseline_bytes"] = (table["peak_allocated_bytes"] - table["device"].map(at_base)).astype(
        "Int64"
    )
    return table, words


def _row(label: str, s: Region, m: dict, b: dict, gpu: bool) -> dict:
    """One trace's row of the compare table: the registry's compare metrics ``m`` (``b``: the baseline's),
    each followed by its ratio to the baseline where it has one, then what only compare shows."""
    row = {"trace": label, "device": s.trace.device_name or "-"}
    for x in shown_in("compare", gpu):
        row[x.name] = m[x.name]
        if x.ratio:
            row[x.ratio] = ratio(b[x.name], m[x.name])
    if gpu:
        row["gemm_family"] = next(iter(metrics.gemm_families(s)), "-")
        row["top_categories"] = _top_categories(s)
        row.update(efficiency(s))  # GEMM and attention TFLOP/s and percent of peak
    else:
        row["top_ops"] = _top_ops(s)
    return row


def _category_table(labels, sides) -> pd.DataFrame:
    """Per trace and kernel category (largest first): count and GPU time per step, share of GPU time."""
    rows = []
    for label, s in zip(labels, sides, strict=True):
        ct = category_times(s)
        total = ct["time_ns"].sum()
        ct = ct.sort_values("time_ns", ascending=False, kind="stable")
        rows.append(
            pd.DataFrame(
                {
                    "trace": label,
                    "category": ct.index.to_numpy(dtype=object),
                    "count": ct["count"].to_numpy(),
                    "time_ns": ct["time_ns"].to_numpy(),
                    "pct_time": 100.0 * ct["time_ns"].to_numpy() / total if total else 0.0,
                }
            )
        )
    cols = ["trace", "category", "count", "time_ns", "pct_time"]
    rows = [f for f in rows if len(f)]  # an empty frame's dtypes would turn the counts into objects
    return pd.concat(rows, ignore_index=True)[cols] if rows else pd.DataFrame({c: [] for c in cols})


def _op_table(labels, sides) -> pd.DataFrame:
    """Per trace and CPU op (CPU-only traces): self time per step, as :func:`.region.breakdown` groups it."""
    rows = []
    for label, s in zip(labels, sides, strict=True):
        _, series = breakdown(s)
        for group, ns in series.items():
            rows.append({"trace": label, "op": str(group), "self_time_ns": float(ns)})
    return pd.DataFrame(rows, columns=["trace", "op", "self_time_ns"])


def _baseline_index(traces, baseline) -> int:
    if baseline is None:
        return 0
    if isinstance(baseline, (int, np.integer)) and not isinstance(baseline, bool):
        if not 0 <= baseline < len(traces):
            raise TraceviewError(f"baseline index {baseline} is out of range (0..{len(traces) - 1})")
        return int(baseline)
    for i, t in enumerate(traces):
        if baseline is t:
            return i
    text = (
        os.fspath(baseline)
        if not isinstance(baseline, str) and hasattr(baseline, "__fspath__")
        else str(baseline)
    )
    for i, t in enumerate(traces):
        if text in (t.label, t.path) or os.path.abspath(text) == os.path.abspath(t.path):
            return i
    raise TraceviewError(
        f"baseline {text!r} is none of the compared traces ({', '.join(t.label for t in traces)})"
    )


def _top_categories(side, n: int = 3) -> str:
    ct = category_times(side)
    total = ct["time_ns"].sum()
    if not total:
        return "-"
    ct = ct.sort_values("time_ns", ascending=False).head(n)
    return ", ".join(f"{c} {100.0 * v / total:.0f}%" for c, v in ct["time_ns"].items())


def _top_ops(side, n: int = 3) -> str:
    _, s = breakdown(side, top=n)
    total = s.sum()
    if not total:
        return "-"
    s = s[s.index != "other ops"].head(n)
    return ", ".join(f"{op} {100.0 * v / total:.0f}%" for op, v in s.items())


def _vs(r: float, baseline: str) -> str:
    return "" if np.isnan(r) else f", {times(r)} {baseline}"


def _findings(table: pd.DataFrame, labels, base: int, gpu: bool, sides) -> list[str]:
    bl = labels[base]
    if len(labels) < 2:
        return [f"only one trace ({bl}): nothing to compare it with"]
    f = []
    devices = {s.trace.device_name for s in sides if s.trace.device_name}
    if len(devices) > 1:
        f.append(
            f"the traces come from different devices ({', '.join(sorted(devices))}): "
            "times include the hardware"
        )
    t = table.set_index("trace")
    if gpu:
        return f + _gpu_findings(t, labels, bl) + efficiency_findings(list(zip(labels, sides, strict=True)))
    return f + _cpu_findings(t, labels, bl)


def _least_most(t: pd.DataFrame, column: str, ratio_column: str, what: str, bl: str) -> str:
    """Which row of ``t`` takes the least and which the most ``column`` (a time per step)."""
    fast, slow = t[column].idxmin(), t[column].idxmax()
    return (
        f"{fast} takes the least {what} per step ({human(t.loc[fast, column])}"
        f"{_vs(t.loc[fast, ratio_column], bl)}); {slow} the most "
        f"({human(t.loc[slow, column])}{_vs(t.loc[slow, ratio_column], bl)})"
    )


def _gpu_findings(t: pd.DataFrame, labels, bl: str) -> list[str]:
    f = []
    idle = [lbl for lbl in labels if t.loc[lbl, "gpu_activities_per_step"] == 0]
    busy = t[t["gpu_activities_per_step"] > 0]
    if idle:
        f.append("no GPU activity in: " + ", ".join(idle))
    f.append(_least_most(busy, "gpu_time_per_step_ns", "ratio_gpu_time", "GPU time", bl))
    few, many = busy["kernels_per_step"].idxmin(), busy["kernels_per_step"].idxmax()
    f.append(
        f"{many} launches the most kernels per step ({num(t.loc[many, 'kernels_per_step'])}"
        f"{_vs(t.loc[many, 'ratio_kernels'], bl)}); {few} the fewest "
        f"({num(t.loc[few, 'kernels_per_step'])})"
    )
    f += _gemm_findings(t, bl)
    f.append("attention: " + "; ".join(f"{lbl} {t.loc[lbl, 'attention_backend']}" for lbl in labels))
    return f


def _gemm_findings(t: pd.DataFrame, bl: str) -> list[str]:
    tc = t["tensor_core_pct"]
    cuda = [lbl for lbl, v in tc.items() if metrics.on_tensor_cores(v) is False]
    tensor = [lbl for lbl, v in tc.items() if metrics.on_tensor_cores(v)]
    if cuda and tensor:
        return [
            "GEMMs run on CUDA cores in "
            + ", ".join(f"{lbl} ({t.loc[lbl, 'gemm_family']})" for lbl in cuda)
            + "; on tensor cores in "
            + ", ".join(f"{lbl} ({t.loc[lbl, 'gemm_family']})" for lbl in tensor)
        ]
    if cuda and not np.isnan(tc.loc[bl]):
        return ["GEMMs run on CUDA cores in every trace"]
    return []


def _cpu_findings(t: pd.DataFrame, labels, bl: str) -> list[str]:
    f = ["no trace holds GPU activity (CPU-only traces): the rows compare CPU ops and CPU time per step"]
    few, many = t["cpu_ops_per_step"].idxmin(), t["cpu_ops_per_step"].idxmax()
    f.append(
        f"{many} runs the most CPU ops per step ({num(t.loc[many, 'cpu_ops_per_step'])}); "
        f"{few} the fewest ({num(t.loc[few, 'cpu_ops_per_step'])}; {bl}: "
        f"{num(t.loc[bl, 'cpu_ops_per_step'])})"
    )
    f.append(_least_most(t, "cpu_time_per_step_ns", "ratio_cpu_time", "CPU time", bl))
    if (t["attention_backend"] != "none").any():
        f.append(
            "attention (from the SDPA op each trace runs): "
            + "; ".join(f"{lbl} {t.loc[lbl, 'attention_backend']}" for lbl in labels)
        )
    return f
