"""Pictures: stacked bars of where the time goes per trace, and one step on a time axis.

matplotlib is optional (``pip install traceview[plot]``) and imported only here,
only when a picture is asked for. The file's suffix picks the format: ``.png``,
``.svg``, or ``.html`` (the SVG inside a minimal HTML page).
"""
from __future__ import annotations

import html
import io
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import TraceviewError

SUFFIXES = (".png", ".svg", ".html")
PALETTE = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7",
           "#9c755f", "#bab0ac", "#1f77b4", "#aec7e8", "#ffbb78", "#98df8a", "#c5b0d5", "#8c564b",
           "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"]
#: fixed colours so a category looks the same in every picture
CATEGORY_COLORS = {
    "gemm": "#4e79a7", "attention": "#e15759", "softmax": "#f28e2b", "elementwise": "#76b7b2",
    "copy": "#edc948", "memcpy": "#b07aa1", "memset": "#ff9da7", "reduction": "#59a14f", "norm": "#79706e",
    "conv": "#1f77b4", "communication": "#8c564b", "embedding": "#17becf", "sort": "#bcbd22",
    "rng": "#c5b0d5", "optimizer": "#98df8a", "pooling": "#aec7e8", "moe": "#ffbb78", "fused": "#e377c2",
    "sleep": "#c7c7c7", "other": "#bab0ac", "other ops": "#bab0ac",
}
MAX_OPS = 10


def pyplot():
    try:
        import matplotlib

        matplotlib.use("Agg", force=True)
        import matplotlib.pyplot as plt
    except ImportError:
        raise TraceviewError("--plot needs matplotlib: install traceview[plot]") from None
    return plt


def check_path(path) -> Path:
    path = Path(path)
    if path.suffix.lower() not in SUFFIXES:
        raise TraceviewError(f"{path}: a plot file must end in .png, .svg or .html")
    if path.parent and not path.parent.exists():
        raise TraceviewError(f"{path}: folder {path.parent} does not exist")
    return path


def _colors(groups) -> dict:
    out, spare = {}, iter(PALETTE[::-1] * 4)
    for g in groups:
        out[g] = CATEGORY_COLORS.get(g) or next(spare)
    return out


def _save(fig, path: Path, title: str) -> str:
    plt = pyplot()
    suffix = path.suffix.lower()
    try:
        if suffix == ".html":
            buf = io.StringIO()
            fig.savefig(buf, format="svg", bbox_inches="tight")
            svg = buf.getvalue()
            svg = svg[svg.find("<svg"):]
            path.write_text("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\">"
                            f"<title>{html.escape(title)}</title></head>\n<body>\n{svg}\n</body></html>\n",
                            encoding="utf-8")
        else:
            fig.savefig(path, format=suffix[1:], dpi=130, bbox_inches="tight")
    except OSError as exc:
        raise TraceviewError(f"{path}: cannot write the plot ({exc.strerror or exc})") from None
    finally:
        plt.close(fig)
    return str(path)


def _time_unit(max_ns: float) -> tuple[float, str]:
    for scale, unit in ((1e9, "s"), (1e6, "ms"), (1e3, "us")):
        if max_ns >= scale:
            return scale, unit
    return 1.0, "ns"


def plot_breakdown(traces, path, sel=None, labels=None, title: str | None = None, sels=None) -> str:
    """Stacked bars, one per trace: GPU time per step by kernel category, or on CPU-only
    traces CPU time per step of the outermost CPU ops by name."""
    from ..analyses.region import region

    path = check_path(path)
    plt = pyplot()
    sels = sels or [sel] * len(traces)
    sides = [region(t, s) for t, s in zip(traces, sels)]
    gpu = any(s.has_gpu for s in sides)
    labels = labels or [t.label for t in traces]
    frame = _breakdown_frame(sides, labels, gpu)
    what = "GPU time per step by kernel category" if gpu else "CPU self time per step by CPU op (CPU-only traces)"
    fig, ax, tops = _stacked_bars(plt, frame, gpu)
    ax.set_title(title or what)
    ax.set_ylim(0, max(tops.max() * 1.12, 1e-9) if len(tops) else 1)
    ax.spines[["top", "right"]].set_visible(False)
    if len(frame.columns):
        handles, lbls = ax.get_legend_handles_labels()
        ax.legend(handles[::-1], lbls[::-1], loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False,
                  fontsize=8, title="category" if gpu else "CPU op")
    return _save(fig, path, title or what)


def _breakdown_frame(sides, labels, gpu: bool) -> pd.DataFrame:
    """One row per bar, one column per group, largest group first and "other ops" last."""
    from ..analyses.region import breakdown

    series = []
    for s in sides:
        if gpu and not s.has_gpu:
            series.append(pd.Series(dtype=float))
        else:
            series.append(breakdown(s, top=None)[1])
    frame = pd.DataFrame(series, index=labels).fillna(0.0)
    if not gpu and len(frame.columns) > MAX_OPS:  # the same few op names for every bar, the rest grouped
        keep = frame.sum().sort_values(ascending=False).index[:MAX_OPS]
        rest = frame.drop(columns=keep).sum(axis=1)
        frame = frame[keep].assign(**{"other ops": rest})
    order = frame.sum().sort_values(ascending=False).index.tolist()
    if "other ops" in order:
        order = [g for g in order if g != "other ops"] + ["other ops"]
    return frame[order] if order else frame


def _stacked_bars(plt, frame: pd.DataFrame, gpu: bool):
    """A figure with one stacked bar per row of ``frame``, each total written on top; also
    returns the axes and the bars' heights."""
    order = frame.columns.tolist()
    labels = frame.index.tolist()
    scale, unit = _time_unit(float(frame.sum(axis=1).max()) if len(frame.columns) else 0.0)
    colors = _colors(order)
    n = len(labels)
    fig, ax = plt.subplots(figsize=(max(6.0, 1.3 * n + 4.5), 5.2))
    x = np.arange(n)
    bottom = np.zeros(n)
    for g in order:
        vals = frame[g].to_numpy() / scale
        ax.bar(x, vals, bottom=bottom, color=colors[g], label=g, width=0.6, edgecolor="white", linewidth=0.5)
        bottom += vals
    for xi, total in zip(x, bottom):
        ax.annotate(f"{total:.3g} {unit}", (xi, total), ha="center", va="bottom", fontsize=8,
                    xytext=(0, 2), textcoords="offset points")
    ax.set_xticks(x)
    ax.set_xticklabels(labels, rotation=20 if n > 3 else 0, ha="right" if n > 3 else "center")
    ax.set_ylabel(f"{'GPU time' if gpu else 'CPU self time'} per step ({unit})")
    return fig, ax, bottom


def plot_timeline(trace, path, step: int | None = None) -> str:
    """One step on a time axis: GPU activities, a lane per device/stream, coloured by category;
    on a CPU-only trace the CPU ops, a lane per thread (nested ops stacked inside it)."""
    path = check_path(path)
    plt = pyplot()
    k = trace.kernels
    steps = trace.steps
    if step is not None and (not len(steps) or step not in set(steps["step"].tolist())):
        listing = ", ".join(map(str, sorted(steps["step"].tolist())[:10])) or "none"
        raise TraceviewError(f"{trace.path}: has no step {step} (steps: {listing})")
    if step is None and len(steps):
        step = int(steps["step"].iloc[0])
    if len(k):
        sub = k[(k["step"] == step).fillna(False).to_numpy()] if step is not None else k
        if not len(sub):
            raise TraceviewError(f"{trace.path}: no GPU activity in step {step}")
        return _gpu_timeline(plt, trace, sub, step, path)
    ops = trace.ops
    sub = ops[(ops["step"] == step).fillna(False).to_numpy()] if step is not None else ops
    if not len(sub):
        raise TraceviewError(f"{trace.path}: nothing to draw (no GPU activity and no CPU ops)")
    return _cpu_timeline(plt, trace, sub, step, path)


def _gpu_timeline(plt, trace, k, step, path) -> str:
    t0 = float(k["ts_ns"].min())
    span = float((k["ts_ns"] + k["dur_ns"].clip(lower=0)).max() - t0)
    scale, unit = _time_unit(span)
    lanes = k.groupby([k["device"].astype("Int64").astype(str).to_numpy(),
                       k["stream"].astype("Int64").astype(str).to_numpy()], sort=True).size().index.tolist()
    lane_of = {lane: i for i, lane in enumerate(lanes)}
    cats = k["category"].astype(str).to_numpy()
    order = list(pd.Series(k["dur_ns"].to_numpy(), index=cats).groupby(level=0).sum()
                 .sort_values(ascending=False).index)
    colors = _colors(order)
    fig, ax = plt.subplots(figsize=(11, max(2.2, 0.55 * len(lanes) + 1.6)))
    dev = k["device"].astype("Int64").astype(str).to_numpy()
    stream = k["stream"].astype("Int64").astype(str).to_numpy()
    start = (k["ts_ns"].to_numpy() - t0) / scale
    width = np.maximum(k["dur_ns"].clip(lower=0).to_numpy() / scale, span / scale / 2000.0)
    for cat in order:
        m = cats == cat
        ys = np.array([lane_of[(d, s)] for d, s in zip(dev[m], stream[m])])
        ax.barh(ys, width[m], left=start[m], height=0.7, color=colors[cat], label=cat, edgecolor="none")
    ax.set_yticks(range(len(lanes)))
    ax.set_yticklabels([f"GPU {d} stream {s}" for d, s in lanes], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel(f"time since the step's first GPU activity ({unit})")
    what = f"{trace.label}: GPU activities" + (f" of step {step}" if step is not None else "")
    ax.set_title(what)
    ax.spines[["top", "right"]].set_visible(False)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False, fontsize=8, title="category")
    return _save(fig, path, what)


def _cpu_timeline(plt, trace, ops, step, path) -> str:
    t0 = float(ops["ts_ns"].min())
    span = float((ops["ts_ns"] + ops["dur_ns"].clip(lower=0)).max() - t0)
    scale, unit = _time_unit(span)
    threads = sorted(ops["tid"].astype(str).unique().tolist())
    depth = ops["depth"].to_numpy()
    max_depth = int(depth.max()) + 1 if len(depth) else 1
    fig, ax = plt.subplots(figsize=(11, max(2.4, 0.32 * max_depth * len(threads) + 1.6)))
    root_name, named = _root_groups(trace, ops)
    colors = _colors(named + ["other ops"])
    keep = root_name != ""  # ProfilerStep ops themselves are not drawn
    used = set()
    for ti, tid in enumerate(threads):
        m = (ops["tid"].astype(str) == tid).to_numpy()
        base = ti * (max_depth + 1)
        for grp in named + ["other ops"]:
            if grp == "other ops":
                sel = m & keep & ~np.isin(root_name, named)
            else:
                sel = m & (root_name == grp)
            if not sel.any():
                continue
            left = (ops["ts_ns"].to_numpy()[sel] - t0) / scale
            width = np.maximum(ops["dur_ns"].clip(lower=0).to_numpy()[sel] / scale, span / scale / 2000.0)
            ax.barh(base + depth[sel], width, left=left, height=0.8, color=colors[grp], edgecolor="white",
                    linewidth=0.3, label=None if grp in used else grp)
            used.add(grp)
    ax.set_yticks([ti * (max_depth + 1) for ti in range(len(threads))])
    ax.set_yticklabels([f"thread {tid}" for tid in threads], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel(f"time since the step's first CPU op ({unit}); nested ops below their parent")
    what = f"{trace.label}: CPU ops" + (f" of step {step}" if step is not None else "") + " (CPU-only trace)"
    ax.set_title(what)
    ax.spines[["top", "right"]].set_visible(False)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False, fontsize=8, title="outermost op")
    return _save(fig, path, what)


def _root_groups(trace, ops) -> tuple[np.ndarray, list]:
    """Each op's outermost op name ("" for ProfilerStep ops), and the ten names with the most
    time: colouring by them makes a call tree read as one block."""
    from ..analyses.region import ARROW, ops_with_chains

    chains = ops_with_chains(trace)["chain"].to_numpy()[ops.index.to_numpy()]
    root_name = np.array([c.split(ARROW, 1)[0] if c else "" for c in chains], dtype=object)
    is_root = np.array([bool(c) and ARROW not in c for c in chains])
    names = pd.Series(ops["dur_ns"].to_numpy()[is_root], index=root_name[is_root]).groupby(level=0).sum()
    return root_name, names.sort_values(ascending=False).index[:10].tolist()
