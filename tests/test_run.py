"""A run: rank traces of one job, ranks from distributedInfo; duplicates refused, missing reported,
unreadable files named (or skipped with skip_bad). Real corpus files; damaged copies live in tmp_path."""

from __future__ import annotations

import gzip
import os

import numpy as np
import pytest
from corpus import CORPUS, SKIP_REASON
from hypothesis import given, settings
from hypothesis import strategies as st

import traceview as tv
from traceview.analyses.measure import intervals as iv
from traceview.errors import TraceviewError
from traceview.run import RULE_META, RULE_ORDER

PARAM = CORPUS / "param"
needs_param = pytest.mark.skipif(not PARAM.is_dir(), reason=SKIP_REASON)


def ranks_files():
    return sorted(PARAM.glob("dlrm_kineto__worker*"))


@needs_param
def test_folder_is_a_run_of_8_ranks_from_distributed_info():
    run = tv.load_run(PARAM)
    assert sorted(run.traces) == list(range(8)) and run.world_size == 8 and run.rule == RULE_META
    for r, t in run.traces.items():  # rank r is the file whose metadata says r (here also worker<r>)
        assert t.meta["distributedInfo"]["rank"] == r and f"worker{r}_" in t.path
    left_out = [n for n in run.notes if "no distributedInfo" in n]
    assert len(left_out) == 2 and all("et_replay" in n for n in left_out)
    k = run.frame("kernels")
    assert list(k.columns[:1]) == ["rank"] and sorted(k["rank"].unique()) == list(range(8))
    assert len(k) == sum(len(t.kernels) for t in run.traces.values())


@needs_param
def test_missing_ranks_are_reported():
    files = [f for f in ranks_files() if "worker3_" not in f.name and "worker5_" not in f.name]
    run = tv.load_run(files)
    assert run.missing == [3, 5] and any("missing ranks: 3, 5 of world size 8" in n for n in run.notes)
    report = tv.ranks(files)
    assert report.info["missing_ranks"] == "3, 5"
    assert any("2 of 8 ranks have no trace: 3, 5" in f for f in report.findings)


@needs_param
def test_duplicate_rank_refused_naming_both(tmp_path):
    twin = tmp_path / "again.json.gz"
    os.symlink(ranks_files()[0], twin)
    with pytest.raises(TraceviewError, match=r"rank 0 again .*; one trace per rank") as exc:
        tv.load_run([*ranks_files(), twin])
    assert "again.json.gz" in str(exc.value) and "worker0_" in str(exc.value)
    with pytest.raises(TraceviewError, match="rank 0 again"):
        tv.ranks([*ranks_files(), twin])


@needs_param
def test_without_distributed_info_ranks_follow_sorted_paths():
    files = sorted(PARAM.glob("et_replay*"))
    run = tv.load_run(reversed(files))
    assert run.rule == RULE_ORDER and [t.path for t in run.traces.values()] == [str(f) for f in files]
    assert any(RULE_ORDER in n for n in run.notes)


@needs_param
def test_unreadable_rank_is_an_error_naming_it_or_skipped(tmp_path):
    data = gzip.decompress(ranks_files()[2].read_bytes())
    bad = tmp_path / "worker2_cut.json"
    bad.write_bytes(data[: len(data) // 2])
    files = [f for f in ranks_files() if "worker2_" not in f.name] + [bad]
    with pytest.raises(TraceviewError, match=r"worker2_cut\.json"):
        tv.load_run(files)
    with pytest.raises(TraceviewError, match=r"worker2_cut\.json.*skip"):
        tv.ranks(files)
    run = tv.load_run(files, skip_bad=True)
    assert run.missing == [2] and any("worker2_cut.json" in n for n in run.notes)
    report = tv.ranks(files, skip_bad=True)
    assert report.info["missing_ranks"] == "2" and any(
        "skipped" in n and "worker2_cut" in n for n in report.notes
    )


# ------------------------------------------------------------------ interval arithmetic, against brute force

intervals = st.lists(st.tuples(st.integers(0, 60), st.integers(0, 15)), max_size=12)


def _mask(ivs):
    m = np.zeros(80, bool)
    for s, d in ivs:
        m[s : s + d] = True
    return m


def _spans(ivs):
    return (np.array([s for s, _ in ivs], np.int64), np.array([s + d for s, d in ivs], np.int64))


@settings(max_examples=200, deadline=None)
@given(intervals, intervals)
def test_union_and_overlap_match_a_boolean_timeline(a, b):
    assert iv.length(_spans(a)) == _mask(a).sum()
    assert iv.overlap(_spans(a), _spans(b)) == (_mask(a) & _mask(b)).sum()
