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
