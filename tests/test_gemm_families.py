"""``metrics.gemm_families`` (GEMM family -> percent of GEMM time, largest first; the diff's and
compare's GEMM mix) against a plain recount: every GEMM activity of the region visited in Python,
its family by the domain rule, summed as ints; equal times ordered by family name."""

from __future__ import annotations

import corpus
import numpy as np
import pytest

import traceview as tv
from traceview.analyses.measure import metrics
from traceview.analyses.select.region import Selection, region
from traceview.domain import gemm_family


def _recount(r) -> list:
    a = r.activities
    ns: dict[str, int] = {}
    rows = zip(a["name"].astype(object), a["category"].astype(object), a["dur_ns"], strict=True)
    for name, category, dur in rows:
        if category == "gemm":
            family = gemm_family(name) if isinstance(name, str) else "other"
            ns[family] = ns.get(family, 0) + max(int(dur), 0)
    total = sum(ns.values())
    largest_first = sorted(ns.items(), key=lambda kv: (-kv[1], kv[0]))
    return [(f, 100.0 * v / total) for f, v in largest_first] if total else []


@pytest.mark.parametrize("path", corpus.corpus_params())
def test_gemm_families_equal_a_plain_recount(path):
    t = tv.load(path, cache=False)
    for sel in (None, Selection(step=int(t.steps["step"].iloc[-1])) if len(t.steps) else None):
        r = region(t, sel)
        assert list(metrics.gemm_families(r).items()) == _recount(r)


def test_equal_times_come_in_family_name_order_and_no_name_is_other():
    path = corpus.CORPUS / "hta" / "trace_diff__control__control.json.gz"
    if not path.is_file():
        pytest.skip(corpus.SKIP_REASON)
    r = region(tv.load(path, cache=False))
    a = r.activities
    gemm = np.flatnonzero((a["category"] == "gemm").to_numpy())
    family = [gemm_family(str(a["name"].iloc[i])) for i in gemm]
    # a row of each family a rule names
    first = {f: i for i, f in zip(gemm[::-1], family[::-1], strict=True) if f != "other"}
    assert len(first) >= 2
    rows = sorted(first.values())[:2]
    picked = a.iloc[[*rows, rows[0]]].copy()
    picked["dur_ns"] = 1000  # every family the same time: their names decide the order
    picked["name"] = picked["name"].astype(object)
    picked.iloc[2, picked.columns.get_loc("name")] = None  # a GEMM with no name
    r.activities = picked.reset_index(drop=True)
    got = list(metrics.gemm_families(r).items())
    assert got == _recount(r)
    named = [gemm_family(str(a["name"].iloc[i])) for i in rows]
    assert [f for f, _ in got] == sorted([*named, "other"])  # three equal times: by name
