"""A diff of two paths works each side's tables out on the thread that loaded it
(``analyses.variants.sides.prepare``, issue 35): the report must be the one a diff of the two
traces loaded beforehand gives (no thread, every table worked out by the diff itself), and an
error must still be said as the diff says it, A's first.
"""

from __future__ import annotations

from pathlib import Path

import corpus
import pytest

import traceview as tv
from traceview.errors import TraceviewError
from traceview.read import read_together
from traceview.render import render

SAMPLES = Path(__file__).resolve().parents[1] / "sample_traces"
PAIRS = [
    (SAMPLES / "naive.json.gz", SAMPLES / "naive_inplace.json.gz"),
    (SAMPLES / "naive.json.gz", SAMPLES / "sdpa_math.json.gz"),
    (SAMPLES / "sdpa_auto.json.gz", SAMPLES / "sdpa_flash.json.gz"),
]
C = corpus.CORPUS
#: GPU pairs of the corpus: the HTA diff pair, a before/after fix, two ranks of one job
GPU_PAIRS = [
    (C / "hta" / "trace_diff__control__control.json.gz", C / "hta" / "trace_diff__test__test.json.gz"),
    (
        C / "kineto" / "docs_traces__before_fix_trace.json.gz",
        C / "kineto" / "docs_traces__after_fix_trace.json.gz",
    ),
    (
        C / "param" / "dlrm_kineto__worker0_step_12.1694128201545.pt.trace.json.gz",
        C / "param" / "dlrm_kineto__worker1_step_12.1694128201556.pt.trace.json.gz",
    ),
]


def _same(a: Path, b: Path, **kw) -> None:
    assert read_together([a, b])  # the paths are read on two threads, each side prepared there
    threaded = tv.diff(a, b, cache=False, **kw)
    loaded = tv.diff(tv.load(a, cache=False), tv.load(b, cache=False), **kw)
    assert render(threaded, "json") == render(loaded, "json")
    assert render(threaded, "table", width=None) == render(loaded, "table", width=None)


@pytest.mark.parametrize("pair", PAIRS, ids=lambda p: f"{p[0].name}-{p[1].name}")
def test_a_diff_of_paths_is_the_diff_of_loaded_traces(pair):
    _same(*pair)


@pytest.mark.parametrize("pair", GPU_PAIRS, ids=lambda p: p[0].parent.name + "/" + p[0].name[:30])
def test_the_same_on_corpus_gpu_pairs(pair):
    if not all(p.is_file() for p in pair):
        pytest.skip(corpus.SKIP_REASON)
    _same(*pair)


@pytest.mark.parametrize("kw", [{"kind": "kernel"}, {"top": 3}, {"top": 0}])
def test_the_same_with_a_selection(kw):
    if not all(p.is_file() for p in GPU_PAIRS[0]):
        pytest.skip(corpus.SKIP_REASON)
    _same(*GPU_PAIRS[0], **kw)


def test_a_selection_b_lacks_is_said_for_b_and_one_a_lacks_for_a(tmp_path):
    a, b = PAIRS[0]
    with pytest.raises(TraceviewError, match=f"^{a}: has no GPU activity"):
        tv.diff(a, b, kind="kernel", cache=False)
    with pytest.raises(TraceviewError) as e:
        tv.diff(a, b, step=10**6, cache=False)
    assert str(e.value).startswith(str(a))  # A's error first, as without the threads


def test_tables_kept_per_region_are_handed_out_as_copies():
    """The per-side tables ``sides.prepare`` works out ahead are kept once per trace and selection;
    each caller gets its own copy, so a caller that changes what it got (a report's table) changes
    nothing a later analysis of the same trace reads."""
    from traceview.analyses.measure.groups import category_times, chain_table, op_table
    from traceview.analyses.select.region import region
    from traceview.analyses.trace.advise import advice_table

    path = C / "hta" / "trace_diff__control__control.json.gz"  # a GPU trace: every table has rows
    if not path.is_file():
        pytest.skip(corpus.SKIP_REASON)
    trace = tv.load(path)
    r = region(trace, None)
    makers = {
        "category_times": category_times,
        "op_table": op_table,
        "chain_table": chain_table,
        "advice": lambda r: advice_table(r)[1],  # the rules table: every rule, so never empty
    }
    for name, make in makers.items():
        first = make(r)
        assert len(first), name
        want = first.copy()
        for column in first.columns:  # a caller rearranging its copy in place
            first[column] = first[column].iloc[::-1].to_numpy()
        assert not first.equals(want), name
        again = make(region(trace, None))
        assert again.equals(want), name
        assert again is not make(r), name
