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
from ...report import Finding, Report
from ...run import one_job
from ..measure import memory, metrics
from ..measure.completeness import completeness_table, incomplete_findings, workload_table
from ..measure.efficiency import (
    efficiency,
    efficiency_findings,
    efficiency_notes,
    peak_columns,
    tensor_peak_columns,
)
from ..measure.groups import category_times, stacked_bar, trace_labels
from ..measure.registry import metrics_of, shown_in
from ..select.region import Region, Selection, region
from ..trace.advise import advice_of
from ..wording.words import Cite, listing, ratio
from .workload import compare_verdicts


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
    rows = [metrics_of(s) for s in sides]
    table = pd.DataFrame(
        [_row(label, s, m, rows[base], gpu) for label, s, m in zip(labels, sides, rows, strict=True)]
    )
    if gpu:  # a CUDA-core row's own tensor-core peak, against the tensor-core row's precision
        vs = pd.DataFrame(tensor_peak_columns(list(zip(labels, sides, strict=True))))
        table = pd.concat([table, vs], axis=1)
    if gpu:
        tables = {"compare": table, "by_category": _category_table(labels, sides)}
    else:
        tables = {"compare": table, "by_op": _op_table(labels, sides)}
    # comparability first (issue 18): each file's completeness and each trace's work, before any ratio
    first = incomplete_findings(list(zip(labels, traces, strict=True)))
    # each trace's work against the baseline's: the verdict diff says first (issue 32)
    verdicts, judged = compare_verdicts(labels, sides, base)
    first += judged
    done = completeness_table(list(zip(labels, traces, strict=True)))
    if done[["kernel_launches", "gpu_activities"]].to_numpy().any():  # a CPU-only set has nothing to lose
        tables["completeness"] = done
    if len(verdicts):
        tables["verdict"] = verdicts
    tables["workload"] = workload_table(list(zip(labels, sides, strict=True)))
    findings = first + _findings(table, labels, base, gpu, sides)
    advice, said = advice_of(list(zip(labels, sides, strict=True)))  # what to do, after what was measured
    if len(advice):
        tables["advice"] = advice
        findings += said
    if any(len(t.memory) for t in traces):  # whole traces: the peak is one moment, not per step
        tables["memory"], words = _memory_table(traces, labels, base)
        findings += words
    notes = [w for t in traces for w in t.warnings] + [n for s in sides for n in s.notes]
    notes += [n for t in traces for n in efficiency_notes(t)] if gpu else []
    notes += [h for h in [one_job(traces)] if h]  # rank traces compared as variants: say --run exists
    notes = [n for n in notes if n not in set(map(str, findings))]  # a warning said as a finding once
    per = sides[0].per_word if len({s.per_word for s in sides}) == 1 else "step"
    info = {
        "traces": len(traces),
        "baseline": labels[base],
        "selection": sides[0].selection.describe(),
        "per": per,
        "gpu": gpu,
        # the peak is one moment; completeness counts the whole file
        "per_step_tables": [n for n in tables if n not in ("memory", "completeness")],
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
    """Each trace's peak allocated per device beside the baseline's, the op whose tensors alive at
    the peak changed most with it (``made_by``), and the diff's sentence for each trace whose peak
    differs from the baseline's (citing this table)."""
    rows, words, grew = [], [], {}
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
            table, said = memory.peak_difference(traces[base], t, labels[base], label, in_compare=True)
            words += said
            grew.update({(label, d.device): (d.made_by, d.made_by_diff_bytes) for d in table.itertuples()})
    table = pd.DataFrame(rows, columns=["trace", "device", "peak_allocated_bytes", "peak_made_by"])
    at_base = table[table["trace"] == labels[base]].set_index("device")["peak_allocated_bytes"]
    table["vs_baseline_bytes"] = (table["peak_allocated_bytes"] - table["device"].map(at_base)).astype(
        "Int64"
    )
    pairs = [grew.get(k, (None, None)) for k in zip(table["trace"], table["device"], strict=True)]
    table["made_by"] = pd.Series([p[0] for p in pairs], index=table.index, dtype=object)
    table["made_by_diff_bytes"] = pd.array([p[1] for p in pairs], dtype="Int64")
    return table, words


def _row(label: str, s: Region, m: dict, b: dict, gpu: bool) -> dict:
    """One trace's row of the compare table: the registry's compare metrics ``m`` (``b``: the baseline's),
    each followed by its ratio to the baseline where it has one, then what only compare shows."""
    row: dict[str, object] = {"label": label, "device": s.trace.device_name or "-"}
    for x in shown_in("compare", gpu):
        row[x.name] = m[x.name]
        if x.ratio:
            row[x.ratio] = ratio(b[x.name], m[x.name])
    if gpu:
        row["gemm_family"] = next(iter(metrics.gemm_families(s)), "-")
        row["top_categories"] = _top_categories(s)
        row.update(efficiency(s))  # GEMM and attention TFLOP/s and percent of peak
        row.update(peak_columns(s))  # the device and peaks the efficiency sentence cites
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
    """Per trace and CPU op (CPU-only traces): self time per step, as :func:`.groups.stacked_bar` has it."""
    rows = []
    for label, s in zip(labels, sides, strict=True):
        _, series = stacked_bar(s)
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
    _, s = stacked_bar(side, top=n)
    total = s.sum()
    if not total:
        return "-"
    s = s[s.index != "other ops"].head(n)
    return ", ".join(f"{op} {100.0 * v / total:.0f}%" for op, v in s.items())


def _findings(table: pd.DataFrame, labels, base: int, gpu: bool, sides) -> list[str]:
    """Each sentence cites the compare table's cells (``label`` is the row key: the label shown)."""
    bl = labels[base]
    if len(labels) < 2:
        c = Cite()
        return [c.finding(f"only one trace ({_t(c, bl)}): nothing to compare it with")]
    f = []
    per = sides[0].per_word if len({s.per_word for s in sides}) == 1 else "step"
    t = table.set_index("label")
    devices = t["device"][t["device"] != "-"]
    if devices.nunique() > 1:  # each device named once, by the first row that ran on it
        c = Cite()
        first = devices.drop_duplicates().sort_values(kind="stable")
        named = ", ".join(c("compare", {"label": lbl}, "device", d, "text") for lbl, d in first.items())
        f.append(c.finding(f"the traces come from different devices ({named}): times include the hardware"))
    if gpu:
        return (
            f
            + _gpu_findings(t, labels, bl, per)
            + efficiency_findings(list(zip(labels, sides, strict=True)), "compare", by="label")
        )
    return f + _cpu_findings(t, labels, bl, per)


def _t(c: Cite, label: str) -> str:
    """A trace's label as the sentence names it: the compare row's ``label``."""
    return c("compare", {"label": label}, "label", label, "text")


def _backend(c: Cite, t: pd.DataFrame, label: str) -> str:
    return c("compare", {"label": label}, "attention_backend", t.loc[label, "attention_backend"], "text")


def _who(c: Cite, rows) -> str:
    return listing([_t(c, lbl) for lbl in rows], 12)


def _extremes(c: Cite, t: pd.DataFrame, column: str, how: str, ratio_column: str | None, bl: str):
    """The rows at the column's minimum and at its maximum (every tie), each side's figure and
    its ratio to the baseline as cited words; None when every row ties."""
    v = t[column]
    low, high = list(v.index[v == v.min()]), list(v.index[v == v.max()])
    if len(low) == len(t):
        return None

    def figure(rows) -> str:
        one = rows[0]
        text = c("compare", {"label": one}, column, v[one], how)
        if ratio_column is None or one == bl or np.isnan(t.loc[one, ratio_column]):
            return text  # the baseline against itself (1.00x) says nothing
        r = c("compare", {"label": one}, ratio_column, t.loc[one, ratio_column], "ratio")
        return f"{text}, {r} {_t(c, bl)}"

    return low, high, figure(low), figure(high)


def _least_most(t: pd.DataFrame, column: str, ratio_column: str, what: str, bl: str, per: str):
    """Which rows of ``t`` take the least and which the most ``column`` (a time per step); ties as ties."""
    c = Cite()
    got = _extremes(c, t, column, "ns", ratio_column, bl)
    if got is None:
        same = c("compare", {"label": t.index[0]}, column, t[column].iloc[0], "ns")
        return c.finding(f"every trace takes the same {what} per {per} ({same})")
    low, high, lo, hi = got
    verb = "take" if len(low) > 1 else "takes"
    return c.finding(
        f"{_who(c, low)} {verb} the least {what} per {per} ({lo}); {_who(c, high)} the most ({hi})"
    )


def _count_extremes(t: pd.DataFrame, column: str, ratio_column, what: tuple[str, str], bl: str, per: str):
    """Which rows have the most and the fewest ``column`` (a count per step); ties as ties. Without a
    ratio column the baseline's own count is stated too (cited), to read the extremes against."""
    c = Cite()
    got = _extremes(c, t, column, "count", ratio_column, bl)
    if got is None:
        same = c("compare", {"label": t.index[0]}, column, t[column].iloc[0], "count")
        return c.finding(f"every trace {what[0]} the same number of {what[1]} per {per} ({same})")
    low, high, lo, hi = got
    if ratio_column is None:  # no ratio to the baseline beside the figures: its own count instead
        lo += f"; {_t(c, bl)}: {c('compare', {'label': bl}, column, t.loc[bl, column], 'count')}"
    return c.finding(
        f"{_who(c, high)} {what[0]} the most {what[1]} per {per} ({hi}); {_who(c, low)} the fewest ({lo})"
    )


def _gpu_findings(t: pd.DataFrame, labels, bl: str, per: str) -> list[str]:
    f: list[str] = []
    idle = [lbl for lbl in labels if t.loc[lbl, "gpu_activities_per_step"] == 0]
    busy = t[t["gpu_activities_per_step"] > 0]
    if idle:
        c = Cite()
        f.append(c.finding("no GPU activity in: " + ", ".join(_t(c, lbl) for lbl in idle)))
    f.append(_least_most(busy, "gpu_time_per_step_ns", "ratio_gpu_time", "GPU time", bl, per))
    f.append(_count_extremes(busy, "kernels_per_step", "ratio_kernels", ("launches", "kernels"), bl, per))
    f += _gemm_findings(t, bl)
    c = Cite()
    f.append(c.finding("attention: " + "; ".join(f"{_t(c, lbl)} {_backend(c, t, lbl)}" for lbl in labels)))
    return f


def _gemm_findings(t: pd.DataFrame, bl: str) -> list[str]:
    tc = t["tensor_core_pct"]
    cuda = [str(lbl) for lbl, v in tc.items() if metrics.on_tensor_cores(v) is False]
    tensor = [str(lbl) for lbl, v in tc.items() if metrics.on_tensor_cores(v)]
    c = Cite()

    def family(lbl: str) -> str:
        return (
            f"{_t(c, lbl)} ({c('compare', {'label': lbl}, 'gemm_family', t.loc[lbl, 'gemm_family'], 'text')})"
        )

    if cuda and tensor:
        return [
            c.finding(
                "GEMMs run on CUDA cores in "
                + ", ".join(family(lbl) for lbl in cuda)
                + "; on tensor cores in "
                + ", ".join(family(lbl) for lbl in tensor)
            )
        ]
    if cuda and not np.isnan(tc.loc[bl]):
        return [c.finding("GEMMs run on CUDA cores in every trace")]
    return []


def _cpu_findings(t: pd.DataFrame, labels, bl: str, per: str) -> list[str]:
    f: list[str] = [
        Finding(
            f"no trace holds GPU activity (CPU-only traces): the rows compare CPU ops and CPU time per {per}"
        )
    ]
    f.append(_count_extremes(t, "cpu_ops_per_step", None, ("runs", "CPU ops"), bl, per))
    f.append(_least_most(t, "cpu_time_per_step_ns", "ratio_cpu_time", "CPU time", bl, per))
    if (t["attention_backend"] != "none").any():
        c = Cite()
        f.append(
            c.finding(
                "attention (from the SDPA op each trace runs): "
                + "; ".join(f"{_t(c, lbl)} {_backend(c, t, lbl)}" for lbl in labels)
            )
        )
    return f
