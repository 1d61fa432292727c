"""The ops and GPU activities of every step are cut when first used (``Region.ops`` and
``Region.activities`` each a ``Deferred``), so that a warm run, which reads what it needs of them
from the cache entry, never reads the trace's ops (nor, for a summary, its kernels) table.

What is checked: the cut, when made, is the ops of every step with ``outer`` as a plain pandas
recount says (an op is outermost when it has no parent, or its parent is in no step); every Region
of one trace and selection shares the one ``Deferred`` (made once, whoever reads it first), so a
table kept for the region is served before and after the ops are made, and worked out once; a
copy (``replaced``) keeps it deferred; a Region built by hand with frames of its own is never
served a table kept for the trace's own region.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from corpus import CORPUS, SKIP_REASON

import traceview as tv
from traceview.analyses.measure.derived import of_region
from traceview.analyses.select.region import Selection, op_columns, op_rows, outer_rows, region
from traceview.deferred import Deferred, held, replaced, unmade

SAMPLES = Path(__file__).resolve().parents[1] / "sample_traces"
STEPPED = [
    SAMPLES / "naive.json.gz",
    CORPUS / "hta/trace_diff__control__control.json.gz",
    CORPUS / "param/dlrm_kineto__worker0_step_12.1694128201545.pt.trace.json.gz",
]


def _plain_cut(ops: pd.DataFrame) -> pd.DataFrame:
    """The ops of every step, ``outer`` recounted with pandas alone."""
    stepped = ops["step"].notna()
    parent = ops["parent"]
    parent_in_step = pd.Series(False, index=ops.index)
    has = parent >= 0
    parent_in_step[has] = stepped.iloc[parent[has].to_numpy()].to_numpy()
    kept = ops[stepped.to_numpy()].copy()
    kept["outer"] = ~parent_in_step[stepped].to_numpy()
    return kept


@pytest.mark.parametrize("path", STEPPED, ids=lambda p: p.name[:40])
def test_the_ops_of_every_step_are_cut_when_used_as_a_recount_says(path):
    if not path.exists():
        pytest.skip(SKIP_REASON)
    t = tv.load(path, cache=False)
    assert len(t.steps)
    r = region(t)
    assert unmade(r, "ops")
    want = _plain_cut(t.ops)
    pd.testing.assert_frame_equal(r.ops, want, check_exact=True)
    assert not unmade(r, "ops") and isinstance(held(r, "ops"), Deferred)
    assert 0 < int(want["outer"].sum()) < len(want) or path.name == "naive.json.gz"


@pytest.mark.parametrize("path", STEPPED, ids=lambda p: p.name[:40])
def test_the_ops_of_every_step_are_found_without_the_cut_as_a_recount_says(path):
    """``op_rows``: positions in the trace's op table and ``outer``, the same before the cut (found
    from the steps) and after it (read from the cut); a cold summary asks no more, so cuts nothing."""
    if not path.exists():
        pytest.skip(SKIP_REASON)
    t = tv.load(path, cache=False)
    want = _plain_cut(t.ops)
    r = region(t)
    for _ in ("before the cut", "after it"):
        rows, outer = op_rows(r)
        np.testing.assert_array_equal(rows, want.index.to_numpy())
        np.testing.assert_array_equal(outer, want["outer"].to_numpy())
        assert len(r.ops) == len(want)  # makes the cut for the second round
    fresh = tv.load(path, cache=False)
    tv.summary(fresh)
    assert unmade(region(fresh), "ops")


@pytest.mark.parametrize("path", STEPPED, ids=lambda p: p.name[:40])
def test_some_columns_of_the_ops_of_every_step_are_taken_without_the_cut(path):
    """``op_columns``: the very rows and values of the cut's columns, before and after it."""
    if not path.exists():
        pytest.skip(SKIP_REASON)
    t = tv.load(path, cache=False)
    want = _plain_cut(t.ops)[["chain", "name", "dur_ns"]]
    r = region(t)
    pd.testing.assert_frame_equal(op_columns(r, "chain", "name", "dur_ns"), want, check_exact=True)
    assert unmade(r, "ops")
    assert len(r.ops)
    pd.testing.assert_frame_equal(op_columns(r, "chain", "name", "dur_ns"), want, check_exact=True)


@pytest.mark.skipif(not (CORPUS / "hta").is_dir(), reason=SKIP_REASON)
def test_a_cold_diff_and_compare_of_gpu_traces_cut_no_ops():
    """Their per-op and per-chain tables and their work read the columns they use (a trace with no
    GPU activity is shown by its CPU ops' self times and spans, from its cut)."""
    paths = [STEPPED[1], CORPUS / "hta/trace_diff__test__test.json.gz", STEPPED[2]]
    traces = [tv.load(p, cache=False) for p in paths]
    tv.diff(traces[0], traces[1])
    tv.compare(traces)
    assert all(unmade(region(t), "ops") for t in traces)


@pytest.mark.skipif(not (CORPUS / "hta").is_dir(), reason=SKIP_REASON)
def test_the_ops_of_one_step_are_outermost_as_a_recount_says():
    """A region cut at once (``--step``): ``outer`` is whether the parent op is in no row of the
    region, recounted with pandas' ``isin`` on the events."""
    t = tv.load(CORPUS / "hta/trace_diff__control__control.json.gz", cache=False)
    step = int(t.steps["step"].iloc[1])
    r = region(t, Selection(step=step))
    kept = t.ops[(t.ops["step"] == step).fillna(False).to_numpy()]
    parent = kept["parent"].to_numpy()
    parent_event = pd.Series(np.where(parent >= 0, t.ops["event"].to_numpy()[parent.clip(0)], -1))
    want = ~parent_event.isin(set(kept["event"])).to_numpy()
    np.testing.assert_array_equal(r.ops["outer"].to_numpy(), want)
    assert 0 < want.sum() < len(want)
    rows, outer = op_rows(r)
    np.testing.assert_array_equal(rows, kept.index.to_numpy())
    np.testing.assert_array_equal(outer, want)


@pytest.mark.parametrize("seed", range(5))
def test_outermost_is_a_parent_outside_the_rows_as_isin_says(seed):
    """``outer_rows`` on random forests and random subsets (parents left out, -1 roots), against
    the definition it replaced: the parent's event is not among the events of the rows."""
    rng = np.random.default_rng(seed)
    n = 2_000
    parent = np.array([rng.integers(-1, i) if i else -1 for i in range(n)], dtype=np.int64)
    ops = pd.DataFrame({"parent": parent, "event": rng.permutation(n) * 3 + 7})
    rows = np.sort(rng.choice(n, size=n // 3, replace=False))
    parent_event = np.where(parent[rows] >= 0, ops["event"].to_numpy()[parent[rows].clip(0)], -1)
    want = ~np.isin(parent_event, ops["event"].to_numpy()[rows])
    assert 0 < want.sum() < len(want) and (parent[rows][want] >= 0).any()
    np.testing.assert_array_equal(outer_rows(ops, rows), want)


@pytest.mark.parametrize("path", STEPPED, ids=lambda p: p.name[:40])
def test_the_activities_of_every_step_are_cut_when_used_as_a_recount_says(path, tmp_path):
    """From the trace and from a cache hit (whose count of activities outside every step is kept)."""
    if not path.exists():
        pytest.skip(SKIP_REASON)
    for cache in (False, tmp_path, tmp_path):
        t = tv.load(path, cache=cache)
        r = region(t)
        assert unmade(r, "activities")
        stepped = t.kernels["step"].notna().to_numpy()
        assert r.left_out == int((~stepped).sum())
        pd.testing.assert_frame_equal(r.activities, t.kernels[stepped], check_exact=True)


@pytest.mark.skipif(not (CORPUS / "hta").is_dir(), reason=SKIP_REASON)
def test_every_region_of_a_selection_shares_one_cut_and_its_kept_tables():
    t = tv.load(CORPUS / "hta/trace_diff__control__control.json.gz", cache=False)
    first, second = region(t), region(t)
    assert first is not second and held(first, "ops") is held(second, "ops")
    assert held(first, "activities") is held(second, "activities")
    made = []

    def count(r):
        made.append(1)
        return len(r.ops)

    n = of_region(first, "test_rows", count)  # makes the ops through the first region
    assert not unmade(second, "ops")
    assert of_region(second, "test_rows", count) == n == len(second.ops)
    assert of_region(region(t), "test_rows", count) == n and made == [1]
    copy = replaced(first, notes=[])
    assert held(copy, "ops") is held(first, "ops") and of_region(copy, "test_rows", count) == n
    own = replaced(first, ops=first.ops.iloc[:10])  # a region built by hand: its own table
    assert of_region(own, "test_rows", count) == 10 and made == [1, 1]


def test_a_trace_without_steps_is_cut_at_once():
    """Its wall time is the span of its ops: nothing to defer."""
    t = tv.load(SAMPLES / "naive.json.gz", cache=False)
    flat = replaced(t, steps=t.steps.iloc[:0])
    r = region(flat)
    assert not unmade(r, "ops") and not isinstance(held(r, "ops"), Deferred)
    assert r.region_kind == "trace" and bool(np.all(r.ops["outer"].to_numpy() == (r.ops["parent"] < 0)))
