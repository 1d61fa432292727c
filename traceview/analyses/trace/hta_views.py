"""HTA's analyses as traceview Reports, with HTA's COMPUTATION bucket split by traceview's taxonomy.

Each function takes the traceview ``Trace`` and an ``hta.trace_analysis.TraceAnalysis``
of the same file (see :mod:`traceview.interop.hta`) and returns a Report. HTA's own
numbers are shown in HTA's unit (µs, columns ending ``_us``); traceview's split of
the computation kernels is in exact nanoseconds (``_ns``).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ...interop import hta as bridge
from ...model import per_category
from ...report import Report
from ..wording.names import kernel_label
from ..wording.words import num, pct1

SPLIT_COLUMNS = ["group", "count", "total_ns", "pct_of_computation"]


def _rank(ta, rank):
    ranks = sorted(ta.t.get_ranks())
    if rank is None:
        return ranks[0]
    if rank not in ranks:
        from ...errors import TraceviewError

        raise TraceviewError(f"rank {rank} is not loaded in HTA (ranks: {ranks})")
    return rank


def _path(trace, ta):
    return trace.path if trace is not None else (ta.label if isinstance(ta, bridge.HTARun) else "")


def hta_kernel_types(names) -> pd.Series:
    """HTA's kernel type (COMPUTATION, COMMUNICATION, MEMORY, OTHER) per distinct name, by HTA's own rules."""
    from hta.utils.utils import get_kernel_type

    uniq = pd.unique(pd.Series(names, dtype=object).astype(str))
    return pd.Series({n: get_kernel_type(n) for n in uniq}, dtype=object)


def split_group(k: pd.DataFrame) -> pd.Series:
    """traceview's finer label for each GPU activity: gemm by core type, attention by backend,
    else category."""
    if "category" not in k.columns:
        return pd.Series("unclassified", index=k.index, dtype=object)
    cat = k["category"].astype(object).where(k["category"].notna(), "other").astype(str)
    out = cat.to_numpy(dtype=object).copy()
    if "tensor_core" in k.columns:
        tc = k["tensor_core"]
        gemm = (cat == "gemm").to_numpy()
        out[gemm & (tc == True).fillna(False).to_numpy()] = "gemm (tensor cores)"  # noqa: E712
        out[gemm & (tc == False).fillna(False).to_numpy()] = "gemm (CUDA cores)"  # noqa: E712
        out[gemm & tc.isna().to_numpy()] = "gemm (cores unknown)"
    if "attention_backend" in k.columns:
        att = (cat == "attention").to_numpy()
        be = k["attention_backend"].astype(object)
        labels = np.where(
            be.notna().to_numpy(),
            "attention (" + be.fillna("").astype(str) + ")",
            "attention (backend unknown)",
        )
        out[att] = labels[att]
    return pd.Series(out, index=k.index, dtype=object)


def kept_by_hta(trace, ta, rank) -> np.ndarray:
    """Mask over ``trace.kernels``: the GPU activities HTA kept (matched by correlation id)."""
    g = bridge.gpu_events(ta, rank)
    kept = set(g["correlation"][g["correlation"] >= 0].astype("int64").tolist())
    corr = trace.kernels["correlation"]
    return corr.isin(kept).fillna(False).to_numpy(dtype=bool) & corr.notna().to_numpy()


def computation_split(trace, ta, rank=None) -> pd.DataFrame:
    """The kernels HTA calls COMPUTATION (and kept), grouped by traceview's categories."""
    rank = _rank(ta, rank)
    k = trace.kernels
    if ta is not None:
        k = k[kept_by_hta(trace, ta, rank)]
    types = hta_kernel_types(k["name"].astype(str)) if len(k) else pd.Series(dtype=object)
    comp = k[k["name"].astype(str).map(types).eq("COMPUTATION").to_numpy()] if len(k) else k
    if not len(comp):
        return pd.DataFrame(
            {
                c: pd.Series(dtype=t)
                for c, t in zip(SPLIT_COLUMNS, (object, "int64", "int64", float), strict=True)
            }
        )
    g = comp.assign(group=split_group(comp)).groupby("group")["dur_ns"]
    out = pd.DataFrame({"count": g.size().astype("int64"), "total_ns": g.sum().astype("int64")})
    total = out["total_ns"].sum()
    out["pct_of_computation"] = 100.0 * out["total_ns"] / total if total else 0.0
    return out.sort_values("total_ns", ascending=False, kind="stable").reset_index()[SPLIT_COLUMNS]


def _split_findings(split: pd.DataFrame, top: int = 4) -> list[str]:
    if not len(split):
        return []
    parts = [f"{r.group} {pct1(r.pct_of_computation)}%" for r in split.head(top).itertuples()]
    return ["HTA's COMPUTATION time by traceview category (sum of kernel durations): " + ", ".join(parts)]


def _info(trace, ta, rank, analysis):
    return {
        "trace": _path(trace, ta),
        "label": trace.label if trace is not None else None,
        "rank": rank,
        "hta": bridge.hta_version(),
        "analysis": analysis,
    }


def temporal(trace, ta, rank=None) -> Report:
    """HTA's temporal breakdown (idle / compute / non-compute) with COMPUTATION split by category."""
    rank = _rank(ta, rank)
    df = bridge.call(ta, "temporal", ta.get_temporal_breakdown, visualize=False, path=_path(trace, ta))
    row = df[df["rank"] == rank].iloc[0]
    total = float(row["kernel_time(us)"])
    parts = [
        ("idle", "idle_time(us)"),
        ("computation", "compute_time(us)"),
        ("non-computation", "non_compute_time(us)"),
    ]
    breakdown = pd.DataFrame(
        {
            "bucket": [p for p, _ in parts],
            "time_us": [float(row[c]) for _, c in parts],
        }
    )
    breakdown["pct_of_span"] = 100.0 * breakdown["time_us"] / total if total else 0.0
    split = computation_split(trace, ta, rank)
    info = _info(trace, ta, rank, "temporal")
    info["gpu_span_us"] = total
    # the sentence states the table's cells (HTA's own *_pctg columns round differently: 6.45 vs 6.44996)
    pcts = dict(zip(breakdown["bucket"], breakdown["pct_of_span"].map(pct1), strict=True))
    findings = [
        f"GPU idle {pcts['idle']}% of the {total:,.0f} µs span from first to last GPU activity; "
        f"computation {pcts['computation']}%, non-computation (memory, communication, sync) "
        f"{pcts['non-computation']}%",
        *_split_findings(split),
    ]
    g = bridge.gpu_events(ta, rank)
    sync = g[g["s_cat"].str.lower().eq("cuda_sync")]
    if len(sync):
        kinds = ", ".join(f"{n} x{c}" for n, c in sync["s_name"].value_counts().items())
        findings.append(
            f"HTA counts {num(len(sync))} CUDA sync events ({kinds}) as GPU activity: they widen its span "
            "and count as non-computation; traceview does not count them as GPU activities"
        )
    rounding = "rounded inward" if getattr(ta, "ns_rounding", True) else "not rounded"
    notes = [
        *trace.warnings,
        f"HTA's times are in µs from its own parse (ns timestamps {rounding}); "
        "the computation split sums traceview's exact kernel durations, "
        "overlap between streams counted twice.",
    ]
    return Report(
        kind="hta-temporal",
        title=f"HTA temporal breakdown of {trace.label} (rank {rank})",
        tables={"breakdown": breakdown, "computation_split": split},
        findings=findings,
        info=info,
        notes=notes,
    )


def idle(trace, ta, rank=None, consecutive_kernel_delay: int = 30) -> Report:
    """HTA's idle time per stream (host wait, kernel wait, other) and its interval statistics."""
    rank = _rank(ta, rank)
    by_stream, stats = bridge.call(
        ta,
        "idle",
        ta.get_idle_time_breakdown,
        ranks=[rank],
        visualize=False,
        show_idle_interval_stats=True,
        consecutive_kernel_delay=consecutive_kernel_delay,
        path=_path(trace, ta),
    )
    table = by_stream.rename(columns={"idle_time": "idle_time_us"}).reset_index(drop=True)
    table["pct_of_stream_idle"] = 100.0 * table.pop("idle_time_ratio").astype(float)
    tables = {"idle_by_stream": table}
    if stats is not None and len(stats):
        # describe()'s quartile columns (25%, 50%, 75%) under snake_case names, as every column
        quartiles = {"index": "idle_category", "25%": "p25", "50%": "p50", "75%": "p75"}
        tables["idle_intervals_us"] = stats.reset_index().rename(columns=quartiles)
    totals = table.groupby("idle_category")["idle_time_us"].sum()
    all_idle = float(totals.sum())
    findings = []
    if all_idle:
        findings.append(
            "idle time over all streams: "
            + ", ".join(
                f"{c} {100.0 * v / all_idle:.1f}%" for c, v in totals.sort_values(ascending=False).items()
            )
        )
    info = _info(trace, ta, rank, "idle")
    info["idle_time_us"] = all_idle
    return Report(
        kind="hta-idle",
        title=f"HTA idle time breakdown of {trace.label} (rank {rank})",
        tables=tables,
        findings=findings,
        info=info,
        notes=list(trace.warnings),
    )


def kernels(trace, ta, rank=None, num_kernels: int = 10) -> Report:
    """HTA's GPU kernel breakdown by type and top kernels, with COMPUTATION split by category."""
    rank = _rank(ta, rank)
    by_type, top = bridge.call(
        ta,
        "kernels",
        ta.get_gpu_kernel_breakdown,
        visualize=False,
        num_kernels=num_kernels,
        include_memory_kernels=True,
        path=_path(trace, ta),
    )
    by_type = by_type.rename(columns={"sum": "sum_us", "percentage": "pct"}).reset_index(drop=True)
    top = top[top["rank"] == rank] if "rank" in top.columns else top
    top = top.drop(columns=[c for c in ("rank",) if c in top.columns]).reset_index(drop=True)
    top.columns = [str(c).replace(" (us)", "_us").replace(" ", "_") for c in top.columns]
    split = computation_split(trace, ta, rank)
    findings = [
        "HTA kernel types: " + ", ".join(f"{r.kernel_type} {r.pct:.1f}%" for r in by_type.itertuples())
    ]
    findings += _split_findings(split)
    return Report(
        kind="hta-kernels",
        title=f"HTA GPU kernel breakdown of {trace.label} (rank {rank})",
        tables={"by_type": by_type, "computation_split": split, "top_kernels": top},
        findings=findings,
        info=_info(trace, ta, rank, "kernels"),
        notes=list(trace.warnings),
    )


def _left_out(trace, df: pd.DataFrame) -> dict[str, int]:
    """GPU activities HTA's launch statistics leave out, by the call that launched them: HTA matches
    only the runtime API's launch calls, so driver-API launches (``cuLaunchKernel``) drop out."""
    k = trace.kernels
    out = k[~k["correlation"].isin(df["correlation"].astype("int64"))]
    names = out["launch_name"].astype("string").fillna("no linked launch call")
    return {str(n): int(c) for n, c in names.value_counts().items()}


def launch(
    trace, ta, rank=None, runtime_cutoff: int = 50, launch_delay_cutoff: int = 100, top: int = 10
) -> Report:
    """HTA's kernel launch statistics: CPU launch duration, GPU duration and launch delay per correlation."""
    rank = _rank(ta, rank)
    res = bridge.call(
        ta,
        "launch",
        ta.get_cuda_kernel_launch_stats,
        ranks=[rank],
        runtime_cutoff=runtime_cutoff,
        launch_delay_cutoff=launch_delay_cutoff,
        visualize=False,
        path=_path(trace, ta),
    )
    df = res.get(rank, pd.DataFrame(columns=["correlation", "cpu_duration", "gpu_duration", "launch_delay"]))
    cols = ["cpu_duration", "gpu_duration", "launch_delay"]
    summary = pd.DataFrame(
        {
            "metric": [f"{c}_us" for c in cols],
            "count": [int(df[c].notna().sum()) for c in cols],
            "mean": [float(df[c].mean()) if len(df) else 0.0 for c in cols],
            "median": [float(df[c].median()) if len(df) else 0.0 for c in cols],
            "p95": [float(df[c].quantile(0.95)) if len(df) else 0.0 for c in cols],
            "max": [float(df[c].max()) if len(df) else 0.0 for c in cols],
        }
    )
    short = int((df["gpu_duration"] < df["cpu_duration"]).sum())
    slow_rt = int((df["cpu_duration"] > runtime_cutoff).sum())
    slow_launch = int((df["launch_delay"] > launch_delay_cutoff).sum())
    names = trace.kernels.dropna(subset=["correlation"]).drop_duplicates("correlation")
    names = names.set_index(names["correlation"].astype("int64"))
    worst = df.sort_values("launch_delay", ascending=False).head(top).copy()
    corr = worst["correlation"].astype("int64")
    # readable kernel names, as the other tables (raw cutlass names of different GEMMs read alike)
    readable = per_category(names["name"].astype("category"), kernel_label, "")
    worst["name"] = pd.Series(readable, index=names.index).reindex(corr).to_numpy()
    worst["group"] = split_group(names).reindex(corr).to_numpy()
    worst = worst.rename(columns={c: f"{c}_us" for c in cols}).reset_index(drop=True)
    n = len(df)
    findings = [
        f"{num(short)} of {num(n)} GPU activities ran shorter than their CPU launch call (launch-bound)",
        f"{num(slow_rt)} launch calls took over {runtime_cutoff} µs; {num(slow_launch)} activities "
        f"started over {launch_delay_cutoff} µs after their launch returned",
    ]
    left = _left_out(trace, df)
    if left:
        findings.append(
            f"{num(sum(left.values()))} of {num(len(trace.kernels))} GPU activities are not in HTA's launch "
            "statistics (HTA counts only cudaLaunchKernel, cudaLaunchKernelExC, cudaMemcpyAsync and "
            "cudaMemsetAsync launches): " + ", ".join(f"{num(c)} launched by {k}" for k, c in left.items())
        )
    info = _info(trace, ta, rank, "launch")
    info.update(
        {
            "gpu_activities": len(trace.kernels),
            "launches": n,
            "gpu_shorter_than_launch": short,
            "runtime_outliers": slow_rt,
            "launch_delay_outliers": slow_launch,
        }
    )
    return Report(
        kind="hta-launch",
        title=f"HTA kernel launch statistics of {trace.label} (rank {rank})",
        tables={"summary": summary, "longest_launch_delay": worst},
        findings=findings,
        info=info,
        notes=list(trace.warnings),
    )


VIEWS = {"temporal": temporal, "idle": idle, "kernels": kernels, "launch": launch}


def hta_report(trace, ta, analysis: str, rank=None) -> Report:
    """The Report of one of :data:`traceview.interop.hta.ANALYSES`."""
    report = VIEWS[analysis](trace, ta, rank)
    report.notes += list(
        getattr(ta, "notes", ())
    )  # what the bridge did (an HTARun; HTA's own object has none)
    return report
