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
from traceview.analyses.select.region import region
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
