"""Pictures: stacked bars of where the time goes per trace, and one step on a time axis.

matplotlib is optional (``pip install traceview[plot]``) and imported only here,
only when a picture is asked for. The file's suffix picks the format: ``.png``,
``.svg``, or ``.html`` (the SVG inside a minimal HTML page); the file is written
atomically (``traceview.atomic``).

Every text comes from the trace (kernel, op, thread and file names) and is drawn as
it is: figures are built and saved with matplotlib's mathtext and TeX off (``$\\frac{A}{B}$``
stays those characters, a bad macro cannot fail the save), and legends are given
their labels after creation (matplotlib leaves out labels that start with ``_``).
Control and bidi characters are drawn escaped (``render.safe.visible``, as in every text
output): no font has them, and matplotlib's missing-glyph warning would print them raw.
"""

from __future__ import annotations

import contextlib
import functools
import html
import io
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd

from ..atomic import atomic_open, write_text
from ..errors import TraceviewError
from .fit import column
from .safe import visible

SUFFIXES = (".png", ".svg", ".html")
PALETTE = [
    "#4e79a7",
    "#f28e2b",
    "#e15759",
    "#76b7b2",
    "#59a14f",
    "#edc948",
    "#b07aa1",
    "#ff9da7",
    "#9c755f",
    "#bab0ac",
    "#1f77b4",
    "#aec7e8",
    "#ffbb78",
    "#98df8a",
    "#c5b0d5",
    "#8c564b",
    "#e377c2",
    "#7f7f7f",
    "#bcbd22",
    "#17becf",
]
#: fixed colours so a category looks the same in every picture
CATEGORY_COLORS = {
    "gemm": "#4e79a7",
    "attention": "#e15759",
    "softmax": "#f28e2b",
    "elementwise": "#76b7b2",
    "copy": "#edc948",
    "memcpy": "#b07aa1",
    "memset": "#ff9da7",
    "reduction": "#59a14f",
    "norm": "#79706e",
    "conv": "#1f77b4",
    "communication": "#8c564b",
    "embedding": "#17becf",
    "sort": "#bcbd22",
    "rng": "#c5b0d5",
    "optimizer": "#98df8a",
    "pooling": "#aec7e8",
    "moe": "#ffbb78",
    "fused": "#e377c2",
    "sleep": "#c7c7c7",
    "other": "#bab0ac",
    "other ops": "#bab0ac",
}


def pyplot():
    try:
        import matplotlib

        matplotlib.use("Agg", force=True)
        import matplotlib.pyplot as plt
    except ImportError:
        raise TraceviewError("--plot needs matplotlib: install traceview[plot]") from None
    return plt


#: rcParams under which every figure is built and drawn: trace text is never markup
LITERAL_TEXT = {"text.parse_math": False, "text.usetex": False}


@contextlib.contextmanager
def literal_text():
    """matplotlib reads these when each text is made, and tick labels are made when the
    figure is drawn: both building and saving run inside this."""
    import matplotlib

    with matplotlib.rc_context(LITERAL_TEXT):
        yield


def _literal(build):
    """Decorator: the figure function runs under ``literal_text``."""

    @functools.wraps(build)
    def wrapper(*args, **kwargs):
        pyplot()
        with literal_text():
            return build(*args, **kwargs)

    return wrapper


def _legend(ax, handles: list, labels: list, **kwargs):
    """A legend that shows every label as given, one starting with "_" included (matplotlib
    drops those, so the legend is made with placeholders and the texts set afterwards)."""
    legend = ax.legend(handles, ["x"] * len(handles), **kwargs)
    for text, label in zip(legend.get_texts(), short_labels(labels), strict=True):
        text.set_text(label)
    return legend


LABEL_MAX = 48  # characters of one legend entry or lane name: trace text is unbounded, and
# matplotlib lays a 350,000-character name out for minutes (a fuzz case hung the timeline plot)


def short_labels(labels: list, width: int = LABEL_MAX) -> list[str]:
    """Each label escaped and cut in the middle to ``width`` characters, kept distinct."""
    return column([visible(label) for label in labels], width)


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


def svg_text(fig) -> str:
    """The figure as an ``<svg>`` element (text drawn as paths: no font or link leaves it)."""
    plt = pyplot()
    try:
        buf = io.StringIO()
        with literal_text():
            fig.savefig(buf, format="svg", bbox_inches="tight")
    finally:
        plt.close(fig)
    svg = buf.getvalue()
    return svg[svg.find("<svg") :]


def wrap_label(text: str, width: int = 22, lines: int = 3) -> str:
    """A tick label on at most ``lines`` lines of ``width`` characters (middle cut past that);
    control characters escaped first, so a newline in the name is shown, not obeyed."""
    text = visible(text)
    limit = width * lines
    if len(text) > limit:
        text = text[: limit // 2 - 1] + "…" + text[-(limit - limit // 2) :]
    parts = textwrap.wrap(text, width, break_on_hyphens=False) or [text]
    if len(parts) > lines:  # word breaks took more lines: cut at fixed widths instead
        parts = [text[i : i + width] for i in range(0, len(text), width)]
    return "\n".join(parts)


def _save(fig, path: Path, title: str) -> str:
    """Draw ``fig`` into ``path`` (atomically: a failed or interrupted save leaves no file
    and an existing one as it was); an OSError is ``atomic.OutputError`` naming the file."""
    suffix = path.suffix.lower()
    if suffix == ".html":
        svg = svg_text(fig)
        write_text(
            path,
            '<!DOCTYPE html>\n<html><head><meta charset="utf-8">'
            f"<title>{html.escape(visible(title))}</title></head>\n<body>\n{svg}\n</body></html>\n",
        )
        return str(path)
    plt = pyplot()
    try:
        with atomic_open(path, "wb") as fh, literal_text():
            fig.savefig(fh, format=suffix[1:], dpi=130, bbox_inches="tight")
    finally:
        plt.close(fig)
    return str(path)


def _time_unit(max_ns: float) -> tuple[float, str]:
    for scale, unit in ((1e9, "s"), (1e6, "ms"), (1e3, "us")):
        if max_ns >= scale:
            return scale, unit
    return 1.0, "ns"


def plot_breakdown(report, path, title: str | None = None) -> str:
    """Stacked bars, one per trace, from a ``breakdown`` Report (``analyses.trace.breakdown``)."""
    path = check_path(path)
    return _save(breakdown_figure(report, title), path, title or report.title)


@_literal
def breakdown_figure(report, title: str | None = None):
    plt = pyplot()
    gpu = report.info["basis"] == "gpu"
    long = report["breakdown"]
    frame = long.pivot(index="trace", columns="group", values="time_per_step_ns")
    frame = frame.loc[list(dict.fromkeys(long["trace"])), list(dict.fromkeys(long["group"]))]
    fig, ax, tops, bars = _stacked_bars(plt, frame, gpu)
    ax.set_title(wrap_label(title or report.title, 90, 2))
    ax.set_ylim(0, max(tops.max() * 1.12, 1e-9) if len(tops) else 1)
    ax.spines[["top", "right"]].set_visible(False)
    if len(frame.columns):
        _legend(
            ax,
            bars[::-1],
            frame.columns.tolist()[::-1],
            loc="upper left",
            bbox_to_anchor=(1.01, 1.0),
            frameon=False,
            fontsize=8,
            title="category" if gpu else "CPU op",
        )
    return fig


def _stacked_bars(plt, frame: pd.DataFrame, gpu: bool):
    """A figure with one stacked bar per row of ``frame``, each total written on top; also
    returns the axes, the bars' heights and one bar container per column (legend handles)."""
    order = frame.columns.tolist()
    labels = frame.index.tolist()
    scale, unit = _time_unit(float(frame.sum(axis=1).max()) if len(frame.columns) else 0.0)
    colors = _colors(order)
    n = len(labels)
    fig, ax = plt.subplots(figsize=(max(6.0, 1.8 * n + 4.5), 5.2))
    x = np.arange(n)
    bottom = np.zeros(n)
    bars = []
    for g in order:
        vals = frame[g].to_numpy() / scale
        bars.append(
            ax.bar(x, vals, bottom=bottom, color=colors[g], width=0.6, edgecolor="white", linewidth=0.5)
        )
        bottom += vals
    for xi, total in zip(x, bottom, strict=True):
        ax.annotate(
            f"{total:.3g} {unit}",
            (xi, total),
            ha="center",
            va="bottom",
            fontsize=8,
            xytext=(0, 2),
            textcoords="offset points",
        )
    ax.set_xticks(x)  # labels wrapped so that neighbours never touch; rotated when there are many
    ax.set_xticklabels(
        [wrap_label(lbl, 18 if n <= 3 else 24) for lbl in labels],
        fontsize=8,
        rotation=30 if n > 3 else 0,
        ha="right" if n > 3 else "center",
    )
    ax.set_ylabel(f"{'GPU time' if gpu else 'CPU self time'} per step ({unit})")
    return fig, ax, bottom, bars


def plot_roofline(report, path) -> str:
    """A roofline (log-log: FLOP per byte against achieved TFLOP/s) of one step's kernels from a
    ``roofline`` Report (``analyses.measure.efficiency.roofline``), coloured by category, with the
    device's roofs for the paths the kernels take."""
    path = check_path(path)
    return _save(roofline_figure(report), path, report.title)


@_literal
def roofline_figure(report):
    plt = pyplot()
    t = report["roofline"]
    t = t[(t["flops"] > 0) & (t["bytes_moved"] > 0)]
    fig, ax = plt.subplots(figsize=(8.0, 5.2))
    colors = _colors(list(dict.fromkeys(t["category"])))
    points, cats = [], []
    for cat, g in t.groupby("category", sort=False):
        points.append(
            ax.scatter(
                g["intensity"],
                g["tflops"],
                s=12 + 60 * g["dur_ns"] / max(t["dur_ns"].max(), 1),
                color=colors[cat],
                alpha=0.75,
                edgecolors="none",
            )
        )
        cats.append(cat)
    bw = report.info.get("memory_gbps")
    x = np.logspace(-1, 4, 200)
    for key in dict.fromkeys(f"{p} {q}" for p, q in zip(t["path"], t["peak_precision"], strict=True)):
        peak = report.info.get("peaks_tflops", {}).get(key)
        if peak and bw:
            ax.plot(x, np.minimum(peak, bw * x / 1e3), lw=1, color="#555555")
            ax.annotate(
                wrap_label(f"{key} {peak:.4g} TFLOP/s", 60, 1),
                (x[-1], peak),
                ha="right",
                va="bottom",
                fontsize=7,
            )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP per byte)")
    ax.set_ylabel("achieved TFLOP/s")
    ax.set_title(wrap_label(report.title, 90, 2), fontsize=9)
    if len(t):
        _legend(ax, points, cats, loc="upper left", fontsize=8, frameon=False, title="category")
    return fig


def plot_timeline(report, path) -> str:
    """One step on a time axis from a ``timeline`` Report: a lane per device/stream (or per
    thread, nested ops stacked inside it), coloured by category (or outermost op)."""
    path = check_path(path)
    fig, title = timeline_figure(report)
    return _save(fig, path, title)


@_literal
def timeline_figure(report):
    plt = pyplot()
    t = report["timeline"]
    gpu = report.info["basis"] == "gpu"
    scale, unit = _time_unit(float(report.info["span_ns"]))
    lanes = sorted(t["lane"].unique().tolist(), key=str)  # an unnamed lane is NaN: never str < float
    depth = int(t["level"].max()) + 1 if len(t) else 1
    row = {lane: i * (depth + 1) for i, lane in enumerate(lanes)}
    groups = t.groupby("group")["dur_ns"].sum().sort_values(ascending=False).index.tolist()
    groups = [g for g in groups if g != "other ops"] + (["other ops"] if "other ops" in groups else [])
    colors = _colors(groups)
    fig, ax = plt.subplots(figsize=(11, max(2.2, 0.32 * depth * len(lanes) + 1.6)))
    floor = float(report.info["span_ns"]) / scale / 2000.0  # the shortest activity stays visible
    bars = []
    for g in groups:
        m = (t["group"] == g).to_numpy()
        ys = np.array([row[lane] for lane in t["lane"][m]]) + t["level"].to_numpy()[m]
        bars.append(
            ax.barh(
                ys,
                np.maximum(t["dur_ns"].to_numpy()[m] / scale, floor),
                left=t["start_ns"].to_numpy()[m] / scale,
                height=0.7 if gpu else 0.8,
                color=colors[g],
                edgecolor="white" if not gpu else "none",
                linewidth=0.3,
            )
        )
    ax.set_yticks([row[lane] for lane in lanes])
    ax.set_yticklabels(short_labels(lanes), fontsize=8)
    ax.invert_yaxis()
    first = "GPU activity" if gpu else "CPU op"
    ax.set_xlabel(
        f"time since the step's first {first} ({unit})" + ("" if gpu else "; nested ops below their parent")
    )
    title = report.title + (
        f" (GPU busy {report.info['gpu_busy_pct']:.0f}% of the span, "
        f"idle {100 - report.info['gpu_busy_pct']:.0f}%)"
        if gpu
        else " (CPU-only trace)"
    )
    ax.set_title(wrap_label(title, 90, 2), fontsize=10)
    ax.spines[["top", "right"]].set_visible(False)
    _legend(
        ax,
        bars,
        groups,
        loc="upper left",
        bbox_to_anchor=(1.01, 1.0),
        frameon=False,
        fontsize=8,
        title="category" if gpu else "outermost op",
    )
    return fig, title


def plot_memory(report, path) -> str:
    """Allocated (solid) and reserved (dashed) memory over time from a ``memory`` Report made with
    ``timeline=True``: one colour per device, each device's peak marked and labelled with its op."""
    path = check_path(path)
    fig = memory_figure(report)
    return _save(fig, path, report.title)


@_literal
def memory_figure(report):
    plt = pyplot()
    t = report["timeline"]
    peaks = report["devices"]
    scale, unit = _time_unit(float(t["t_ns"].max()) if len(t) else 0.0)
    colors = _colors(sorted(t["device"].unique().tolist()))
    fig, ax = plt.subplots(figsize=(11, 4.2))
    for device, g in t.groupby("device", sort=True):
        x = g["t_ns"].to_numpy() / scale
        ax.step(
            x,
            g["allocated_bytes"].to_numpy() / 2**20,
            where="post",
            color=colors[device],
            label=f"{device} allocated",
        )
        reserved = g["reserved_bytes"].astype("Float64").to_numpy(dtype=float, na_value=np.nan)
        if not np.isnan(reserved).all():
            ax.step(
                x,
                reserved / 2**20,
                where="post",
                color=colors[device],
                linestyle="--",
                linewidth=0.8,
                label=f"{device} reserved",
            )
    t0 = report.info.get("t0_ns", 0)
    for row in peaks.itertuples(index=False):
        x, y = (row.peak_ts_ns - t0) / scale, row.peak_allocated_bytes / 2**20
        ax.plot([x], [y], marker="v", color=colors.get(row.device, "black"), markersize=8)
        right = x > 0.6 * float(t["t_ns"].max()) / scale if len(t) else False  # keep the label inside
        ax.annotate(
            wrap_label(f"peak {y:,.1f} MiB: {row.peak_op}", 40, 2),
            (x, y),
            textcoords="offset points",
            xytext=(-6 if right else 6, 6),
            ha="right" if right else "left",
            fontsize=8,
        )
    ax.set_xlabel(f"time since the first [memory] event ({unit})")
    ax.set_ylabel("MiB")
    ax.set_title(wrap_label(report.title, 90, 2), fontsize=10)
    ax.spines[["top", "right"]].set_visible(False)
    if len(t):
        _legend(
            ax,
            *ax.get_legend_handles_labels(),
            loc="upper left",
            bbox_to_anchor=(1.01, 1.0),
            frameon=False,
            fontsize=8,
        )
    return fig
