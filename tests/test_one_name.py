"""Names that say what they hold (issue 21 item 4): ``gpu_activities`` is a count -- the metric
(analyses.measure.metrics) and the column of every table that shows it -- and no longer also the
model function that builds the table of GPU activity rows (now ``gpu_activity_table``)."""

from pathlib import Path

import pandas as pd

import traceview as tv
import traceview.api
import traceview.model as model
from traceview.analyses.measure import metrics
from traceview.analyses.select.region import region

SAMPLES = Path(__file__).resolve().parents[1] / "sample_traces"


def test_gpu_activities_is_a_count_and_the_table_has_its_own_name():
    assert not hasattr(model, "gpu_activities")
    t = tv.load(SAMPLES / "naive.json.gz", cache=False)
    table = model.gpu_activity_table(t.events)
    assert isinstance(table, pd.DataFrame) and len(table) == len(t.kernels)
    count = metrics.gpu_activities(region(t, None))
    assert isinstance(count, int)


def test_per_step_names_one_thing_per_module():
    """``per_step`` was four functions: the metrics of a region's steps (registry, metrics), the
    summary's per-step table, the stragglers per step and a rank's steps. The two tables that
    were only a table are named for what they hold."""
    from traceview.analyses.runs import stragglers
    from traceview.analyses.trace import summary

    assert not hasattr(stragglers, "per_step") and callable(stragglers.stragglers_per_step)
    assert not hasattr(summary, "per_step") and callable(summary.step_totals)


def test_no_function_is_called_per_step_or_breakdown_twice():
    """The rest of ``per_step`` (a region's metrics: ``registry.metrics_of``; a rank's GPU states per
    step: ``rank_work.step_gpu_metrics``; memory per step: ``memory.step_memory``) and ``breakdown``
    (a stacked bar's parts: ``groups.stacked_bar``; a GPU's span split into states:
    ``gpu_breakdown.gpu_states``): each name holds one thing, and only the report keeps ``breakdown``."""
    from traceview.analyses.measure import gpu_breakdown, groups, memory, registry
    from traceview.analyses.runs import rank_work, ranks

    for module in (registry, rank_work, memory, gpu_breakdown, groups):
        assert not hasattr(module, "per_step") and not hasattr(module, "breakdown"), module.__name__
    t = tv.load(SAMPLES / "naive.json.gz", cache=False)
    r = region(t, None)
    assert registry.metrics_of(r)["gpu_activities"] == metrics.gpu_activities(r)
    assert list(rank_work.step_gpu_metrics(t)["step"]) == list(t.steps["step"])
    assert set(gpu_breakdown.gpu_states(t.kernels)) >= {"span_ns", "busy_ns", "idle_ns"}
    assert groups.stacked_bar(r)[0] == ("gpu" if r.has_gpu else "cpu")
    assert ranks.GPU_STATES == registry.rank_metrics("ranks", group="gpu_states") != []
    assert callable(memory.step_memory) and tv.api.breakdown([t]).kind == "breakdown"
