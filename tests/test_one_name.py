"""Names that say what they hold (issue 21 item 4): ``gpu_activities`` is a count -- the metric
(analyses.measure.metrics) and the column of every table that shows it -- and no longer also the
model function that builds the table of GPU activity rows (now ``gpu_activity_table``)."""

from pathlib import Path

import pandas as pd

import traceview as tv
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
