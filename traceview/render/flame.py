"""Flame-graph exports of a ``stacks`` report: folded stacks (``flamegraph.pl``, inferno) and
speedscope's JSON file format, each leaf weighted by its self time (GPU time, or CPU op self
time on a trace without GPU activity: the report's ``info["weight"]``).

Both are made from the report's table in its table form (``node``, ``parent``, ``frame`` and
the self time), whole: a tree cut by ``--depth`` or ``--min-pct`` would not sum to the time,
so it is refused. Frame names are trace text: a line break in one would start a new stack
line, so it becomes a space; ``;`` (folded's frame separator) never occurs in a frame.
"""

from __future__ import annotations

import json
import re

import pandas as pd

from .._version import __version__
from .safe import esc

SPEEDSCOPE_SCHEMA = "https://www.speedscope.app/file-format-schema.json"
_FRAME = re.compile(r"^(?P<file>.+)\((?P<line>\d{1,9})\): (?P<func>.*)$", re.S)
_BREAKS = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")  # line breaks and terminal controls


def leaf_stacks(report) -> tuple[list[list[str]], list[int], str]:
    """Per node with self time: its frames (outermost first, the root left out) and that time;
    and the unit's name (``gpu``/``cpu``). ValueError for a report that is not a whole tree."""
    t = report.tables.get("stacks")
    if t is None or "node" not in t.columns:
        raise ValueError("a flame graph needs the stacks table in its table form (form='table')")
    self_col = next((c for c in ("self_gpu_ns", "self_cpu_ns") if c in t.columns), None)
    if self_col is None or len(t) != report.info.get("nodes"):
        raise ValueError("a flame graph needs the whole tree: give neither --depth nor --min-pct")
    frame = dict(zip(t["node"].tolist(), (_BREAKS.sub(" ", str(f)) for f in t["frame"]), strict=True))
    parent = dict(zip(t["node"].tolist(), t["parent"].tolist(), strict=True))
    rows = t.loc[t[self_col] > 0, ["node", self_col]]
    stacks = []
    for node in rows["node"].tolist():
        chain = []
        while parent[node] >= 0:
            chain.append(frame[node])
            node = parent[node]
        stacks.append(chain[::-1])
    return stacks, [int(w) for w in rows[self_col].tolist()], self_col.split("_")[1]


def render_folded(report) -> str:
    """One line per stack: frames outermost first joined by ``;``, a space, its weight in ns."""
    stacks, weights, _ = leaf_stacks(report)
    return "".join(f"{';'.join(s)} {w}\n" for s, w in zip(stacks, weights, strict=True))


def render_speedscope(report) -> str:
    """speedscope's file format (``SPEEDSCOPE_SCHEMA``): one sampled profile whose samples are the
    stacks (frame indexes, outermost first) and whose weights are their times in nanoseconds."""
    stacks, weights, unit = leaf_stacks(report)
    names = pd.unique(pd.Series([f for s in stacks for f in s], dtype=object)).tolist()
    index = {n: i for i, n in enumerate(names)}
    title = f"{report.title}"
    profile = {
        "type": "sampled",
        "name": f"{unit.upper()} time ({report.info.get('by', 'frame')})",
        "unit": "nanoseconds",
        "startValue": 0,
        "endValue": sum(weights),
        "samples": [[index[f] for f in s] for s in stacks],
        "weights": weights,
    }
    doc = {
        "$schema": SPEEDSCOPE_SCHEMA,
        "shared": {"frames": [_frame(n) for n in names]},
        "profiles": [profile],
        "name": title,
        "activeProfileIndex": 0,
        "exporter": f"traceview {__version__}",
    }
    return json.dumps(doc) + "\n"


def _frame(name: str) -> dict:
    """A speedscope frame: its name, with file and line where the frame is a file frame."""
    m = _FRAME.match(name)
    if not m:
        return {"name": name}
    return {"name": f"{m['func']} ({m['file']}:{m['line']})", "file": m["file"], "line": int(m["line"])}


def flame_svg(report, width: int = 1100, row: int = 17, char_px: float = 6.6) -> str:
    """A static icicle flame graph of a whole ``stacks`` table (form "table"): the root on top, each
    node a box as wide as its inclusive time, children left to right largest first; the frame's
    name in the box where it fits and in full in the box's ``<title>`` (a tooltip, no script, so
    the HTML report's policy holds). Trace text is escaped as every HTML output escapes it."""
    t = report.tables.get("stacks")
    weight = next((c for c in ("gpu_ns", "cpu_ns") if t is not None and c in t.columns), None)
    if t is None or weight is None or "node" not in t.columns or len(t) != report.info.get("nodes"):
        raise ValueError("a flame graph needs the whole stacks table (form='table', no depth or min_pct)")
    total = float(t[weight].iloc[0]) or 1.0
    x = _offsets(t, weight)
    boxes = []
    for node, depth, frame, w in zip(t["node"], t["depth"], t["frame"], t[weight], strict=True):
        px = width * float(w) / total
        if px < 0.5:  # narrower than a pixel: its time is in its parent's box
            continue
        left, top = width * x[node] / total, depth * row
        label = (
            str(frame)
            if len(str(frame)) * char_px <= px - 4
            else str(frame)[: max(int((px - 4) / char_px) - 1, 0)]
        )
        label = label + "…" if label and label != str(frame) else label
        tip = f"{frame}: {_ns_words(int(w))} ({100.0 * float(w) / total:.1f}%)"
        boxes.append(
            f'<g><title>{esc(tip)}</title><rect x="{left:.1f}" y="{top}" width="{px:.1f}" height="{row - 1}" '
            f'fill="{_colour(str(frame))}"/>'
            + (f'<text x="{left + 2:.1f}" y="{top + row - 5}">{esc(label)}</text>' if label else "")
            + "</g>"
        )
    height = (int(t["depth"].max()) + 1) * row
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" width="{width}" '
        f'height="{height}" font-family="monospace" font-size="11">' + "".join(boxes) + "</svg>"
    )


def _offsets(t: pd.DataFrame, weight: str) -> dict:
    """Each node's left edge in weight units: its parent's, plus the earlier siblings' widths
    (siblings largest first). Rows come parents first, as the table lists them."""
    x: dict = {}
    used: dict = {}
    order = t.sort_values(["depth", weight], ascending=[True, False], kind="stable")
    for node, parent, w in zip(order["node"], order["parent"], order[weight], strict=True):
        start = 0.0 if parent < 0 else x[parent] + used.get(parent, 0.0)
        x[node] = start
        if parent >= 0:
            used[parent] = used.get(parent, 0.0) + float(w)
    return x


def _colour(frame: str) -> str:
    """A warm colour fixed by the frame's file (the part before its line), so a file reads as one hue."""
    import zlib

    key = frame.split("(", 1)[0]
    h = zlib.crc32(key.encode("utf-8", "replace"))
    return f"hsl({h % 50},{60 + h % 25}%,{62 + (h >> 8) % 14}%)"


def _ns_words(ns: int) -> str:
    from ..units import human_ns

    return human_ns(ns)
