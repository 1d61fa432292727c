"""One list of metrics (issue 21 item 3): the registry is what summary, compare and the run
commands show, docs/metrics.md's table is generated from it, and each metric is computed once
per region however many outputs ask."""

from __future__ import annotations

import inspect
import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner
from corpus import CORPUS

import traceview as tv
from traceview.analyses.measure import registry
from traceview.analyses.measure.registry import METRICS, Metric
from traceview.cli import main

SAMPLES = Path(__file__).resolve().parents[1] / "sample_traces"
RANKS = sorted((CORPUS / "param").glob("dlrm_kineto__worker[01]_*.json.gz"))
needs_ranks = pytest.mark.skipif(len(RANKS) < 2, reason="corpus absent (param dlrm ranks)")
CALLS: list[str] = []


def _ops_per_step(r) -> float:
    CALLS.append(r.trace.path)
    return float(len(r.ops)) / r.regions


@pytest.fixture
def added():
    """A metric registered at runtime, shown in summary, compare and summary --run; removed after."""
    metric = Metric(
        "test_ops_per_step",
        _ops_per_step,
        "count",
        "sum",
        ("summary", "compare", "run_summary"),
        "CPU ops per step (added by tests/test_registry.py)",
    )
    METRICS.append(metric)
    CALLS.clear()
    yield metric
    METRICS.remove(metric)


def run(*args, tmp=None):
    env = {"TRACEVIEW_CACHE_DIR": str(tmp)} if tmp else {}
    out = CliRunner(env=env).invoke(main, [*map(str, args), "--format", "json", "--no-cache"])
    assert out.exit_code == 0, out.output
    return json.loads(out.stdout)  # a warning goes to stderr


def test_docs_table_is_generated_from_the_registry():
    doc = registry.DOC.read_text(encoding="utf-8")
    assert registry.with_table(doc) == doc, "run: python -m traceview.analyses.measure.registry"
    for x in METRICS:
        assert f"| `{x.name}` |" in doc, x.name


def test_every_metric_says_how_it_combines_and_where_it_shows():
    for x in METRICS:
        assert x.combine in registry.COMBINE and set(x.outputs) <= set(registry.OUTPUTS), x.name
        assert x.combine != "ratio_of_sums" or (x.parts and x.of), x.name
    assert len({x.name for x in METRICS}) == len(METRICS)


def test_an_added_metric_shows_in_summary_and_compare(added, tmp_path):
    a, b = SAMPLES / "naive.json.gz", SAMPLES / "sdpa_flash.json.gz"
    info = run("summary", a, tmp=tmp_path)["info"]
    ops = info["cpu_ops_per_step"]  # the same count through metrics.cpu_ops, a different function
    assert info["test_ops_per_step"] == ops
    rows = run("compare", a, b, tmp=tmp_path)["tables"]["compare"]
    assert rows[0]["test_ops_per_step"] == ops and rows[1]["test_ops_per_step"] == rows[1]["cpu_ops_per_step"]


@needs_ranks
def test_an_added_metric_shows_in_summary_run(added, tmp_path):
    for p in RANKS:
        os.symlink(p, tmp_path / p.name)
    ranks = run("summary", "--run", tmp_path, tmp=tmp_path / "cache")["tables"]["ranks"]
    each = [r["test_ops_per_step"] for r in ranks[:-1]]
    assert each == [r["cpu_ops_per_step"] for r in ranks[:-1]] and all(each)
    assert ranks[-1]["rank"] == "overall" and ranks[-1]["test_ops_per_step"] == pytest.approx(sum(each))


def test_a_diff_measures_each_side_once(added, tmp_path):
    """diff asked for the shared metrics up to 7 times per side; each is computed once per region now."""
    a, b = SAMPLES / "naive.json.gz", SAMPLES / "sdpa_flash.json.gz"
    run("diff", a, b, tmp=tmp_path)
    assert sorted(CALLS) == sorted([str(a), str(b)]), CALLS


# ------------------------------------------------------------------ GPU time by category, one function

ALEXNET = CORPUS / "hta" / "critical_path__alexnet__benchmark_result_2869224_1695835535_trace.json.gz"
needs_alexnet = pytest.mark.skipif(not ALEXNET.exists(), reason="corpus absent (hta alexnet)")


def test_every_table_of_gpu_time_by_category_calls_one_function():
    from traceview.analyses.measure import gpu_breakdown, groups
    from traceview.analyses.runs import run_summary
    from traceview.analyses.trace import summary
    from traceview.analyses.variants import compare

    for f in (
        groups.category_times,
        gpu_breakdown.categories,
        summary.by_category,
        run_summary.run_categories,
    ):
        assert "category_time(" in inspect.getsource(f), f.__qualname__
    assert "category_times(" in inspect.getsource(compare._category_table)


@needs_alexnet
def test_gpu_time_by_category_agrees_everywhere(tmp_path):
    from test_corpus_exact import independent_counts

    from traceview.analyses.measure.gpu_breakdown import categories

    _, dur, _, _ = independent_counts(ALEXNET)  # a plain json + Decimal recount
    trace = tv.load(ALEXNET, cache=False)
    assert int(categories(trace.kernels)["time_ns"].sum()) == sum(dur.values())
    s = run("summary", ALEXNET, tmp=tmp_path)
    by_cat = {r["category"]: r["total_ns"] for r in s["tables"]["by_category"]}
    assert sum(by_cat.values()) == s["info"]["gpu_time_ns"]
    regions = s["info"]["regions"]
    c = run("compare", ALEXNET, tmp=tmp_path)["tables"]["by_category"]
    assert {r["category"]: r["time_ns"] * regions for r in c} == pytest.approx(by_cat)


def test_the_rank_figures_are_those_their_functions_compute():
    """ranks' GPU-state columns and the run diff's summed figures come from RANK_METRICS, whose
    gpu_states group is what gpu_breakdown.gpu_states computes."""
    from traceview.analyses.measure.gpu_breakdown import gpu_states
    from traceview.analyses.runs import ranks, run_diff

    computed = set(gpu_states(tv.load(SAMPLES / "naive.json.gz", cache=False).kernels)) - {"busy_ns"}
    assert set(ranks.GPU_STATES) == computed == set(registry.rank_metrics("ranks", group="gpu_states"))
    assert [*ranks.GPU_STATES, "wait_caused_ns"] == run_diff.METRICS
