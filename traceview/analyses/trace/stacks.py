"""``traceview stacks``: GPU time per place in the code, as a call tree, an nn.Module tree or
the user's lines (:mod:`..measure.stacks`), with the line to edit read from the source where the
file is here (:mod:`..measure.call_lines`)."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from ...report import Report
from ...sources import SEP, callee, frame_parts, library_test, user_frame_parts
from ..measure import metrics
from ..measure.call_lines import FIRST_LINE, CallLines
from ..measure.sources import NO_SOURCE, NO_STACKS, has_stacks
from ..measure.stacks import (
    CPU_WEIGHT,
    build_tree,
    leaves,
    module_frames,
    node_paths,
    preorder,
    stack_frames,
)
from ..select.region import Selection, region

BY = ("frame", "module", "line")
FORMS = ("tree", "table")
_MODULE_SEP = "."
#: a tree level: no-break spaces, which markdown and HTML keep where they drop leading spaces
_INDENT = "\u00a0\u00a0"
#: the part of an installed file's path before its package (``/env/lib/python3.10/site-packages/``)
_SITE = re.compile(r"^.*/(?:site-packages|dist-packages|lib/python[\d.]+)/")


def call_tree(
    trace,
    sel: Selection | None = None,
    *,
    by: str = "frame",
    fold_layers: bool = False,
    depth: int | None = None,
    min_pct: float | None = None,
    form: str = "tree",
    library: tuple[str, ...] = (),
    own: tuple[str, ...] = (),
    source_root=None,
) -> Report:
    """Table ``stacks``: one row per node of the tree ``by`` frame, module or line (see the
    module's doc); ``form`` tree (``frame`` indented by depth, depth first) or table (each node
    with its ``path``). ``depth`` and ``min_pct`` leave out deeper and smaller nodes."""
    if by not in BY or form not in FORMS:
        raise ValueError(f"by must be one of {BY} and form one of {FORMS}, not {by!r}, {form!r}")
    r = region(trace, sel)
    lv = leaves(r)
    lines = CallLines(source_root)
    tree, extra = _tree(by, lv, fold_layers, tuple(library), tuple(own), lines)
    table, hidden = _shown(tree, extra, depth, min_pct, form, by, lv.weight == CPU_WEIGHT)
    notes = list(trace.warnings) + r.notes + _notes(trace, lv, hidden, by, own, library)
    return Report(
        kind="stacks",
        title=f"{'GPU' if lv.weight != CPU_WEIGHT else 'CPU'} time of {trace.label} by {by}",
        tables={"stacks": table},
        info={
            "trace": trace.path,
            "selection": r.selection.describe(),
            "by": by,
            "weight": lv.weight,
            "total_ns": int(tree["weight_ns"].iloc[0]),
            "gpu_time_ns": metrics.gpu_time_ns(r),
            "nodes": len(tree),
            "library": list(library),
            "own": list(own),
            "source_root": str(lines.root),
        },
        notes=notes,
    )


def _tree(by, lv, fold, library, own, lines) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The tree and, per node, the extra columns of its view."""
    if by == "frame":
        tree = build_tree([stack_frames(t) for t in lv.texts], lv.figures)
        return tree, _called_at(tree, lines)
    if by == "module":
        tree = build_tree([module_frames(t, fold) for t in lv.texts], lv.figures)
        kind = tree["frame"].str.replace(r"_\d+$", "", regex=True).where(tree["depth"] > 0, "")
        return tree, pd.DataFrame({"module_type": kind})
    is_library = library_test(library, own)
    found = [_line_of(t, is_library, lines) for t in lv.texts]
    tree = build_tree([[f[0]] for f in found], lv.figures)
    how = dict(zip((f[0] for f in found), (f[1] for f in found), strict=True))
    return tree, pd.DataFrame({"line_from": tree["frame"].map(how).fillna("")})


def _line_of(text: str, is_library, lines: CallLines) -> tuple[str, str]:
    """A leaf's user line (``file.py:113 _naive``, the call's line where the source says it)
    and how it was found."""
    parts = user_frame_parts(text, is_library)
    if parts is None:
        return NO_SOURCE, ""
    file, first, func, call = parts
    line, how = lines.resolve(file, first, func, call)
    return f"{file}:{line} {func}", how


def _called_at(tree: pd.DataFrame, lines: CallLines) -> pd.DataFrame:
    """Per node whose caller is a file frame: the line in the caller that made this call
    (``called_at``) and whether it was read from the source or is the caller's first line."""
    frame, parent = tree["frame"].tolist(), tree["parent"].to_numpy()
    at, how = [""] * len(tree), [""] * len(tree)
    for i in range(1, len(tree)):
        up = frame_parts(frame[parent[i]]) if parent[i] > 0 else None
        if up is not None:
            line, how[i] = lines.resolve(up[0], up[1], up[2], callee(frame[i]))
            at[i] = f"{up[0]}:{line}"
    return pd.DataFrame({"called_at": at, "line_from": how})


def _shown(tree, extra, depth, min_pct, form, by, cpu) -> tuple[pd.DataFrame, int]:
    """The rows to show, in depth-first order, named for the weight; and how many were left out."""
    total = int(tree["weight_ns"].iloc[0])
    pct = 100.0 * tree["weight_ns"] / total if total else pd.Series(0.0, index=tree.index)
    keep = np.ones(len(tree), dtype=bool)
    if depth is not None:
        keep &= tree["depth"].to_numpy() <= depth
    if min_pct is not None:
        keep &= (pct.to_numpy() >= min_pct) | (tree["depth"].to_numpy() == 0)
    order = preorder(tree)
    order = order[keep[order]]
    t = pd.concat([tree, extra], axis=1).assign(pct=pct, node=np.arange(len(tree)))
    t = t.iloc[order].reset_index(drop=True)
    w = "cpu" if cpu else "gpu"
    t = t.rename(columns={"weight_ns": f"{w}_ns", "self_weight_ns": f"self_{w}_ns"})
    if form == "tree":
        t["frame"] = [_INDENT * d + f for d, f in zip(t["depth"].tolist(), t["frame"].tolist(), strict=True)]
        lead = ["frame"]
    else:
        sep = _MODULE_SEP if by == "module" else SEP
        t["path"] = [p.replace(SEP, sep) for p in node_paths(tree, t["node"].to_numpy())]
        lead = ["node", "parent", "depth", "path", "frame"]
    figures = ["kernels", "activities", "flops", "alloc_bytes", "allocs"]
    cols = [*lead, "pct", f"{w}_ns", f"self_{w}_ns", *figures, *extra.columns]
    return t[cols], int((~keep).sum())


def _library_seen(lv, is_library, shown: int = 6) -> str:
    """The library folders of the frames under the selection's time (the folder under
    site-packages, else the path's first), the largest by distinct files first:
    ``torch/ (14 files), transformers/ (5 files)``."""
    texts = [t for t, any_ in zip(lv.texts, lv.figures.to_numpy().any(axis=1), strict=True) if any_]
    files = {p[0] for t in texts for f in t.split(SEP) if (p := frame_parts(f)) and is_library(p[0])}
    folders = pd.Series([_SITE.sub("", f.replace("\\", "/")).split("/")[0] for f in files], dtype=object)
    whole = folders.str.endswith(".py") | folders.str.startswith("<")  # a file, <frozen runpy>
    counts: pd.Series = pd.Series(folders + np.where(whole, "", "/")).value_counts()
    out = [f"{k} ({n} file{'' if n == 1 else 's'})" for k, n in counts.iloc[:shown].items()]
    return ", ".join(out + (["…"] if len(counts) > shown else []))


def _notes(trace, lv, hidden: int, by: str, own, library) -> list[str]:
    notes = []
    if lv.weight == CPU_WEIGHT:
        notes.append(f"no GPU activity in the selection: each node's time is the {CPU_WEIGHT.split(' (')[0]}")
    if hidden:
        nodes = "node" if hidden == 1 else "nodes"
        notes.append(f"{hidden} smaller or deeper {nodes} not shown (--depth, --min-pct)")
    if not has_stacks(trace):
        notes.append(f"{trace.path}: {NO_STACKS.split(':')[0]}: no op has a Python stack")
        return notes
    if by == "line":
        seen = _library_seen(lv, library_test(tuple(library), tuple(own)))
        notes.append(
            f"treated as library, not your lines: {seen or 'no file'} (traceview/rules/sources.toml"
            f"{', --library' if library else ''}); --own PATTERN counts one as yours"
            + (f"; counted as yours: {', '.join(own)}" if own else "")
        )
    if by in ("frame", "line"):
        notes.append(
            f"line_from {FIRST_LINE!r}: the trace records where a function starts; the line of the "
            "call was not found in a local copy of its file (--source-root)"
        )
    return notes
