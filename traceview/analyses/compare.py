"""``compare(traces)``: one row per trace, per step, with ratios to a baseline.

The table that ends the attention story: kernels and GPU time per step, the
ratio to the baseline, where the GEMMs ran (tensor-core share of GEMM time),
which attention backend ran, and where the time went. On CPU-only traces the
same rows carry CPU ops and CPU time per step.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..errors import TraceviewError
from ..report import Report
from .diff import (_human, _num, _ratio, _times, attention_label, attention_stats, breakdown, category_times,
                   gemm_stats, region)
from .select import Selection


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
    labels = _labels(traces)
    gpu = any(s.has_gpu for s in sides)
    b = sides[base]
    rows = []
    cats = []
    for label, s in zip(labels, sides):
        g = gemm_stats(s)
        att = attention_stats(s)
        row = {"trace": label, "device": s.trace.device_name or "-", "steps": s.regions}
        if gpu:
            row.update({
                "kernels_per_step": s.kernels_per_step,
                "ratio_kernels": _ratio(b.kernels_per_step, s.kernels_per_step),
                "gpu_time_per_step_ns": s.gpu_ns_per_step,
                "ratio_gpu_time": _ratio(b.gpu_ns_per_step, s.gpu_ns_per_step),
                "tensor_core_pct": g["tensor_core_pct"],
                "gemm_family": g["dominant_family"] or "-",
                "attention": attention_label(att),
                "top_categories": _top_categories(s),
                "launches_per_step": s.launches_per_step,
            })
        else:
            row["attention"] = attention_label(att)
        row.update({
            "cpu_ops_per_step": s.cpu_ops_per_step,
            "cpu_time_per_step_ns": s.cpu_time_per_step_ns,
            "ratio_cpu_time": _ratio(b.cpu_time_per_step_ns, s.cpu_time_per_step_ns),
        })
        if not gpu:
            row["top_ops"] = _top_ops(s)
        rows.append(row)
        kind, series = breakdown(s)
        for group, ns in series.items():
            cats.append({"trace": label, "group": str(group), "time_ns": float(ns)})
    table = pd.DataFrame(rows)
    breakdown_table = pd.DataFrame(cats, columns=["trace", "group", "time_ns"])
    if gpu:
        cat_rows = []
        for label, s in zip(labels, sides):
            ct = category_times(s)
            total = ct["time_ns"].sum()
            for cat, r in ct.sort_values("time_ns", ascending=False).iterrows():
                cat_rows.append({"trace": label, "category": cat, "count": r["count"], "time_ns": r["time_ns"],
                                 "pct_time": 100.0 * r["time_ns"] / total if total else 0.0})
        tables = {"compare": table,
                  "by_category": pd.DataFrame(cat_rows, columns=["trace", "category", "count", "time_ns", "pct_time"])}
    else:
        tables = {"compare": table, "by_op": breakdown_table.rename(columns={"group": "op", "time_ns": "self_time_ns"})}
    findings = _findings(table, labels, base, gpu, sides)
    notes = [w for t in traces for w in t.warnings] + [n for s in sides for n in s.notes]
    info = {"traces": len(traces), "baseline": labels[base], "selection": (sel or Selection()).describe(),
            "per": sides[0].region_kind, "gpu": gpu}
    return Report(kind="compare", title=f"Compare {len(traces)} traces (per step, baseline {labels[base]})",
                  tables=tables, findings=findings, info=info, notes=notes)


def _labels(traces) -> list[str]:
    """Each trace's label; repeated labels get the file name added, then the full path."""
    import os
    from collections import Counter

    labels = [t.label for t in traces]
    counts = Counter(labels)
    labels = [f"{lbl} ({os.path.basename(t.path)})" if counts[lbl] > 1 else lbl for lbl, t in zip(labels, traces)]
    if len(set(labels)) == len(labels):
        return labels
    return [t.path for t in traces]


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
    import os

    text = os.fspath(baseline) if not isinstance(baseline, str) and hasattr(baseline, "__fspath__") else str(baseline)
    for i, t in enumerate(traces):
        if text in (t.label, t.path) or os.path.abspath(text) == os.path.abspath(t.path):
            return i
    raise TraceviewError(f"baseline {text!r} is none of the compared traces "
                         f"({', '.join(t.label for t in traces)})")


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


def _vs(ratio: float, baseline: str) -> str:
    return "" if np.isnan(ratio) else f", {_times(ratio)} {baseline}"


def _findings(table: pd.DataFrame, labels, base: int, gpu: bool, sides) -> list[str]:
    f = []
    bl = labels[base]
    if len(labels) < 2:
        return [f"only one trace ({bl}): nothing to compare it with"]
    devices = {s.trace.device_name for s in sides if s.trace.device_name}
    if len(devices) > 1:
        f.append(f"the traces come from different devices ({', '.join(sorted(devices))}): "
                 "times include the hardware")
    if gpu:
        t = table.set_index("trace")
        idle = [lbl for lbl in labels if t.loc[lbl, "kernels_per_step"] == 0]
        busy = t[t["kernels_per_step"] > 0]
        if idle:
            f.append("no GPU activity in: " + ", ".join(idle))
        fast, slow = busy["gpu_time_per_step_ns"].idxmin(), busy["gpu_time_per_step_ns"].idxmax()
        f.append(f"{fast} takes the least GPU time per step ({_human(t.loc[fast, 'gpu_time_per_step_ns'])}"
                 f"{_vs(t.loc[fast, 'ratio_gpu_time'], bl)}); {slow} the most "
                 f"({_human(t.loc[slow, 'gpu_time_per_step_ns'])}{_vs(t.loc[slow, 'ratio_gpu_time'], bl)})")
        few, many = busy["kernels_per_step"].idxmin(), busy["kernels_per_step"].idxmax()
        f.append(f"{many} launches the most kernels per step ({_num(t.loc[many, 'kernels_per_step'])}"
                 f"{_vs(t.loc[many, 'ratio_kernels'], bl)}); {few} the fewest "
                 f"({_num(t.loc[few, 'kernels_per_step'])})")
        tc = t["tensor_core_pct"]
        base_tc = tc.loc[bl]
        cuda = [lbl for lbl, v in tc.items() if not np.isnan(v) and v < 50]
        tensor = [lbl for lbl, v in tc.items() if not np.isnan(v) and v >= 50]
        if cuda and tensor:
            fam = {lbl: t.loc[lbl, "gemm_family"] for lbl in cuda}
            f.append("GEMMs run on CUDA cores in " + ", ".join(f"{lbl} ({fam[lbl]})" for lbl in cuda)
                     + "; on tensor cores in " + ", ".join(f"{lbl} ({t.loc[lbl, 'gemm_family']})" for lbl in tensor))
        elif cuda and not np.isnan(base_tc):
            f.append("GEMMs run on CUDA cores in every trace")
        f.append("attention: " + "; ".join(f"{lbl} {t.loc[lbl, 'attention']}" for lbl in labels))
    else:
        t = table.set_index("trace")
        f.append("no trace holds GPU activity (CPU-only traces): the rows compare CPU ops and CPU time per step")
        few, many = t["cpu_ops_per_step"].idxmin(), t["cpu_ops_per_step"].idxmax()
        f.append(f"{many} runs the most CPU ops per step ({_num(t.loc[many, 'cpu_ops_per_step'])}); "
                 f"{few} the fewest ({_num(t.loc[few, 'cpu_ops_per_step'])}; {bl}: "
                 f"{_num(t.loc[bl, 'cpu_ops_per_step'])})")
        fast, slow = t["cpu_time_per_step_ns"].idxmin(), t["cpu_time_per_step_ns"].idxmax()
        f.append(f"{fast} takes the least CPU time per step ({_human(t.loc[fast, 'cpu_time_per_step_ns'])}"
                 f"{_vs(t.loc[fast, 'ratio_cpu_time'], bl)}); {slow} the most "
                 f"({_human(t.loc[slow, 'cpu_time_per_step_ns'])}{_vs(t.loc[slow, 'ratio_cpu_time'], bl)})")
        if (t["attention"] != "none").any():
            f.append("attention (from the SDPA op each trace runs): "
                     + "; ".join(f"{lbl} {t.loc[lbl, 'attention']}" for lbl in labels))
    return f
