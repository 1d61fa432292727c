"""The tree walks link and sources use (``traceview.trees``): the compiled ones (``src/ctree``)
give the same arrays as numpy's, node for node, on random forests in any node order and on
random spans with ties, zero-length and overlapping ones; each is also checked against a plain
walk; bad input to the compiled ones is a ValueError, never a read out of bounds; and every
corpus trace links to the same tables either way (read once, linked twice)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from corpus import CORPUS, corpus_params
from forests import deep_forest
from hypothesis import given, settings
from hypothesis import strategies as st

from traceview import trees
from traceview.link import _order, link
from traceview.model import build_events
from traceview.read import read

needs_ctree = pytest.mark.skipif(not trees.BUILT, reason="the compiled tree walks are not built")


def both(monkeypatch, fn):
    """fn() with the compiled walks, then with numpy's."""
    monkeypatch.delenv("TRACEVIEW_DECODER", raising=False)
    got = fn()
    monkeypatch.setenv("TRACEVIEW_DECODER", "python")
    assert not trees.compiled()
    want = fn()
    monkeypatch.delenv("TRACEVIEW_DECODER")
    return got, want


def shuffled_forest(rng: np.random.Generator, n: int) -> np.ndarray:
    """deep_forest with its nodes relabelled at random: parents no longer come before children."""
    parent = deep_forest(rng, n)
    label = rng.permutation(n)
    out = np.full(n, -1, dtype=np.int64)
    out[label] = np.where(parent >= 0, label[np.clip(parent, 0, None)], -1)
    return out


def plain(parent: np.ndarray, marked: np.ndarray):
    """nearest, farthest, depth and subtree sums of the node numbers, stepping up one parent at a time."""
    n = len(parent)
    near, far, depth, sums = [-1] * n, [-1] * n, [0] * n, [0] * n
    for x in range(n):
        path = [x]
        while parent[path[-1]] >= 0:
            path.append(int(parent[path[-1]]))
        hits = [p for p in path if marked[p]]
        near[x], far[x] = (hits[0], hits[-1]) if hits else (-1, -1)
        depth[x] = len(path) - 1
        for p in path:
            sums[p] += x
    return near, far, depth, sums


@needs_ctree
@pytest.mark.parametrize("seed", range(6))
def test_walks_agree_on_forests_in_any_order(seed, monkeypatch):
    rng = np.random.default_rng(seed)
    n = [1, 2, 50, 800, 3000, 3000][seed]
    parent = shuffled_forest(rng, n) if seed % 2 else deep_forest(rng, n)
    marked = rng.random(n) < [0.0, 0.02, 0.5, 1.0, 0.1, 0.3][seed]
    values = np.arange(n)

    def run():
        depth = trees.count_ancestors(parent)
        return (
            trees.nearest(parent, marked).tolist(),
            trees.farthest(parent, marked).tolist(),
            depth.tolist(),
            trees.subtree_sums(parent, depth, values)[0].tolist(),
        )

    got, want = both(monkeypatch, run)
    assert got == want == tuple(plain(parent, marked))


def spans(draw_pairs):
    """Spans in nesting order (the order nest sorts them in), as (ks, ke)."""
    start = np.array([s for s, _ in draw_pairs], dtype=np.int64)
    end = start + np.array([d for _, d in draw_pairs], dtype=np.int64)
    prio = np.zeros(len(start), dtype=np.int64)
    order, _ = _order(start, end, prio)
    return start[order], end[order]


def plain_open_depths(ks, ke):
    """Per span, the earlier spans that end after its start; the last earlier one a level up."""
    depth = [sum(1 for j in range(i) if ke[j] > ks[i]) for i in range(len(ks))]
    up = [
        max((j for j in range(i) if depth[j] == d - 1), default=-1) if d else -1 for i, d in enumerate(depth)
    ]
    return depth, up


@needs_ctree
@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 30), st.integers(0, 12)), max_size=60))
def test_open_depths_agree_with_ties_zero_lengths_and_overlaps(pairs):
    ks, ke = spans(pairs)
    want = plain_open_depths(ks.tolist(), ke.tolist())
    depth, up = trees.open_depths(ks, ke)
    assert (depth.tolist(), up.tolist()) == want
    depth_np = trees._open_depths(ks, ke)
    assert (depth_np.tolist(), trees.parents_by_depth(depth_np).tolist()) == want


@needs_ctree
def test_bad_input_is_a_value_error():
    import traceview._ctree as c

    i64 = np.zeros(4, dtype=np.int64)
    for parent in ([1, 2, 0, -1], [0, -1, -1, -1], [4, -1, -1, -1], [-2, -1, -1, -1]):  # loops, out of range
        with pytest.raises(ValueError, match="not a forest"):
            c.walk(np.array(parent, dtype=np.int64), "depth", (i64.copy(),))
    with pytest.raises(ValueError, match="wrong length"):
        c.walk(np.full(4, -1, dtype=np.int64), "depth", (np.zeros(3, dtype=np.int64),))
    with pytest.raises(ValueError, match="wrong length"):
        c.walk(np.full(4, -1, dtype=np.int64), "nearest", (np.zeros(3, dtype=np.uint8), i64.copy()))
    with pytest.raises(ValueError, match="bad arguments"):
        c.walk(np.full(4, -1, dtype=np.int64), "widest", (i64.copy(),))
    with pytest.raises(ValueError, match="bad arguments"):
        c.walk(np.full(4, -1, dtype=np.int64), "nearest", (np.zeros(4, dtype=np.uint8),))
    with pytest.raises(ValueError, match="not a forest"):  # starts that decrease
        two = [np.empty(2, np.int64) for _ in range(2)]
        c.open_depths(np.array([2, 1], dtype=np.int64), np.array([3, 3], dtype=np.int64), *two)
    with pytest.raises(BufferError):  # outputs must be writable
        c.walk(np.full(4, -1, dtype=np.int64), "depth", (b"\0" * 32,))


@needs_ctree
@pytest.mark.parametrize("path", [p.values[0] for p in corpus_params("*/*.json*")])
def test_corpus_traces_link_the_same_either_way(path, monkeypatch):
    if path is None:
        pytest.skip(f"corpus not found at {CORPUS}")
    built = build_events(read(str(path)).columns, {})

    def linked():
        out = link(built)
        return out.activities, out.ops, out.memory

    got, want = both(monkeypatch, linked)
    for a, b in zip(got, want, strict=True):
        pd.testing.assert_frame_equal(a, b, check_exact=True)


@pytest.mark.parametrize("seed", range(4))
def test_number_paths_against_the_paths_themselves(seed):
    """Nodes share a number exactly when their paths of labels from the root are equal; the
    (up, label) pairs rebuild each path; numbers follow level, then sorted (up, label)."""
    rng = np.random.default_rng(seed)
    n = [1, 40, 500, 3000][seed]
    parent = shuffled_forest(rng, n)
    label = rng.integers(0, 4, n)
    depth = trees.count_ancestors(parent)
    limit = [5, 3, 8, 1000][seed]
    code, paths = trees.number_paths(parent, depth, label, limit)
    rebuilt = []
    for up, lab in paths:
        rebuilt.append(((*rebuilt[up - 1],) if up else ()) + (int(lab),))
    by_path: dict = {}
    for x in range(n):
        path, y = [], x
        while y >= 0:
            path.insert(0, int(label[y]))
            y = int(parent[y])
        if depth[x] >= limit:
            assert code[x] == -1
            continue
        assert rebuilt[code[x]] == tuple(path)
        assert by_path.setdefault(tuple(path), code[x]) == code[x]
    keys = [(len(p), up, lab) for p, (up, lab) in zip(rebuilt, paths, strict=True)]
    assert keys == sorted(keys) and len(set(rebuilt)) == len(rebuilt)
