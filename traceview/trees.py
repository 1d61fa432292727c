"""Per-node walks over a forest of parent pointers, for link and sources: compiled where built.

Each walk visits every node once in an order that puts parents first (``src/ctree``, the GIL
released); where the extension was not built, or ``TRACEVIEW_DECODER=python`` turns compiled
code off, numpy does the same walks in passes (pointer jumping: log2(depth) passes, so a hostile
10,000-deep nesting costs 14 passes, not 10,000). Both give identical arrays
(``tests/test_trees.py``). A parent is a node index or -1 (a root); the compiled walks refuse a
parent out of range or a loop of parents with a ValueError, where numpy's would not end.
"""

from __future__ import annotations

import os

import numpy as np
import pandas as pd

from .read.compiled import ENV, PYTHON

try:
    from ._ctree import open_depths as _c_open_depths  # type: ignore[import-not-found]
    from ._ctree import walk as _c_walk
except ImportError:  # not built: numpy walks
    _c_open_depths = _c_walk = None

BUILT = _c_walk is not None


def compiled() -> bool:
    """Whether the compiled walks run here: built, and not turned off by TRACEVIEW_DECODER."""
    return BUILT and os.environ.get(ENV, "").strip().lower() != PYTHON


def _i64(a) -> np.ndarray:
    return np.ascontiguousarray(a, dtype=np.int64)


def nearest(parent: np.ndarray, marked: np.ndarray) -> np.ndarray:
    """Per node: the nearest marked node among itself and its ancestors, -1 if none."""
    return marked_walks(parent, "nearest", marked)[0]


def farthest(parent: np.ndarray, marked: np.ndarray) -> np.ndarray:
    """Per node: the marked node nearest the root among itself and its ancestors, -1 if none."""
    return marked_walks(parent, "farthest", marked)[0]


def marked_walks(parent: np.ndarray, kind: str, *marks: np.ndarray) -> list[np.ndarray]:
    """``nearest`` or ``farthest`` (``kind``) for several markings of one forest at once."""
    if not compiled():
        walk = _nearest if kind == "nearest" else _farthest
        return [walk(parent, np.asarray(m, dtype=bool)) for m in marks]
    outs = [np.empty(len(parent), dtype=np.int64) for _ in marks]
    items = [(np.ascontiguousarray(m, dtype=np.uint8), out) for m, out in zip(marks, outs, strict=True)]
    _c_walk(_i64(parent), kind, tuple(x for pair in items for x in pair))
    return outs


def count_ancestors(parent: np.ndarray) -> np.ndarray:
    """Per node, its number of ancestors."""
    if not compiled():
        return _count_ancestors(parent)
    out = np.empty(len(parent), dtype=np.int64)
    _c_walk(_i64(parent), "depth", (out,))
    return out


def subtree_sums(parent: np.ndarray, depth: np.ndarray, *values) -> list[np.ndarray]:
    """Each value summed over the node and all below it (int64). ``depth``: count_ancestors'."""
    totals = [np.array(v, dtype=np.int64) for v in values]
    if not compiled():
        return _subtree_sums(parent, depth, totals)
    _c_walk(_i64(parent), "sum", tuple(totals))
    return totals


def open_depths(ks: np.ndarray, ke: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For spans in nesting order with one start key ``ks`` (not decreasing) and one end key
    ``ke`` each: per span, the earlier spans still open at its start (its depth), and the position
    of the nearest earlier span one level up (-1: none)."""
    if not compiled():
        depth = _open_depths(ks, ke)
        return depth, parents_by_depth(depth)
    depth, up = np.empty(len(ks), dtype=np.int64), np.empty(len(ks), dtype=np.int64)
    _c_open_depths(_i64(ks), _i64(ke), depth, up)
    return depth, up


def number_paths(
    parent: np.ndarray, depth: np.ndarray, label: np.ndarray, limit: int
) -> tuple[np.ndarray, list[tuple[int, int]]]:
    """Number every node's path of labels from its root, one level at a time (``depth``:
    count_ancestors'; nodes ``limit`` deep or deeper get -1): nodes with the same path share a
    number. Returns the number per node, and per number in order (up, label): ``up`` is 1 + the
    number of the path above (0 at a root), so each distinct path's text is built once from its
    parent's (op chains, call stacks). Within a level numbers follow the sorted (up, label)."""
    code = np.full(len(parent), -1, dtype=np.int64)
    paths: list[tuple[int, int]] = []
    width = int(label.max(initial=-1)) + 2
    # the levels present (at most ``limit`` of them): a count, not a sort of the depths
    for d in np.flatnonzero(np.bincount(depth[depth < limit])):
        rows = np.flatnonzero(depth == d)  # parents come first
        above = np.where(parent[rows] >= 0, code[np.clip(parent[rows], 0, None)], -1)
        pairs, inverse = sorted_codes((above + 1) * width + label[rows])
        code[rows] = len(paths) + inverse
        paths.extend(divmod(p, width) for p in pairs.tolist())
    return code, paths


def sorted_codes(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(keys, return_inverse=True)`` by hashing the keys and sorting only the distinct
    ones: a level holds ~10^6 ops and ~10^2 distinct chains, so this is ~5x faster than its sort."""
    codes, uniques = pd.factorize(keys)
    order = np.argsort(uniques, kind="stable")
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order))
    return uniques[order], rank[codes]


# ------------------------------------------------------------------ numpy, in passes


def _nearest(parent: np.ndarray, marked: np.ndarray) -> np.ndarray:
    """Pointer jumping: ``hop`` is the first node not yet looked at (-1 once found or at the root);
    each pass takes over the answer of the node it points to and doubles the reach."""
    found = np.where(marked, np.arange(len(parent)), -1)
    hop = np.where(marked, -1, parent)
    while len(todo := np.flatnonzero(hop >= 0)):
        h = hop[todo]
        found[todo] = found[h]
        hop[todo] = hop[h]
    return found


def _farthest(parent: np.ndarray, marked: np.ndarray) -> np.ndarray:
    """Pointer jumping: ``found`` covers the path from the node up to ``hop`` (not included);
    the answer further up, where there is one, wins."""
    found = np.where(marked, np.arange(len(parent)), -1)
    hop = parent.copy()
    while len(todo := np.flatnonzero(hop >= 0)):
        h = hop[todo]
        above = found[h]
        found[todo] = np.where(above >= 0, above, found[todo])
        hop[todo] = hop[h]
    return found


def _count_ancestors(parent: np.ndarray) -> np.ndarray:
    """Pointer jumping, each pass adding the distance already known at the node jumped to."""
    depth = (parent >= 0).astype(np.int64)
    hop = parent.copy()
    while len(todo := np.flatnonzero(hop >= 0)):
        h = hop[todo]
        depth[todo] += depth[h]
        hop[todo] = hop[h]
    return depth


def _subtree_sums(parent: np.ndarray, depth: np.ndarray, totals: list[np.ndarray]) -> list[np.ndarray]:
    """One level at a time from the deepest, each pass touching only that level's nodes, so a
    deep tree costs its size, not size x depth."""
    by_level = np.argsort(depth, kind="stable")
    bounds = np.searchsorted(depth[by_level], np.arange(depth.max(initial=0) + 2))
    for d in range(len(bounds) - 2, 0, -1):
        rows = by_level[bounds[d] : bounds[d + 1]]
        for total in totals:  # a level's parents are one level up, never among its rows
            np.add.at(total, parent[rows], total[rows])
    return totals


def _open_depths(ks: np.ndarray, ke: np.ndarray) -> np.ndarray:
    """A span's depth is its position less the ends before its start, here counted by one
    search in the sorted ends. A search counts an end at a start's own key as before it; in the
    sweep that holds only for spans earlier in the order, and the spans at the same key later in
    the order (or the span itself) that end there are the zero-length ones, which sort last among
    the spans that start at that key: they are taken back out."""
    n = len(ks)
    before = np.searchsorted(np.sort(ke), ks, side="right")
    zero = np.concatenate(([0], np.cumsum(ke == ks)))
    run_starts = np.flatnonzero(np.r_[True, ks[1:] != ks[:-1]])
    run_end = np.repeat(np.r_[run_starts[1:], n], np.diff(np.r_[run_starts, n]))
    pos = np.arange(n)
    return pos - (before - (zero[run_end] - zero[pos]))


def parents_by_depth(depth: np.ndarray) -> np.ndarray:
    """Position of the nearest earlier span one level up (-1 for roots)."""
    n = len(depth)
    # the positions level by level, each level in position order: a stable sort of the depths,
    # a radix sort when they fit 16 bits (always, but in a hostile trace): ~6x faster than sorting keys
    small = depth.astype(np.int16) if depth.max(initial=0) < 2**15 else depth
    by_level = np.argsort(small, kind="stable")
    level = depth[by_level]
    key = level * (n + 1) + by_level  # (depth, position), sorted
    # each span's query (its depth - 1, its position) in that same order is sorted too, which
    # makes the search ~3x faster than in position order
    at = np.searchsorted(key, key - (n + 1)) - 1
    found = key[np.clip(at, 0, None)]
    ok = (level > 0) & (at >= 0) & (found // (n + 1) == level - 1)
    out = np.empty(n, dtype=np.int64)
    out[by_level] = np.where(ok, found % (n + 1), -1)
    return out
