"""What ``traceview report`` shows, as Reports: the comparison (findings and table), each
trace's diff from the baseline in words, GPU time by category per trace, tensor-core share
and attention backend per trace, the lines of the user's code with the most GPU time per trace
recorded with stacks, and one step's timeline per trace."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import TraceviewError
from ..report import Report
from .measure.sources import has_stacks
from .select.region import Selection
from .trace.breakdown import breakdown
from .trace.source_lines import source_stats
from .trace.stacks import call_tree
from .trace.summary import summary
from .trace.timeline import timeline
from .variants.compare import compare
from .variants.diff import diff


@dataclass
class ReportSet:
    compare: Report  # the comparison; of one trace, its summary (there is nothing to compare)
    glance: Report  # tensor-core share and attention backend per trace
    breakdown: Report
    diffs: list = field(default_factory=list)  # each trace vs the baseline
    # (label, its timeline or None, why not)
    timelines: list[tuple[str, Report | None, str]] = field(default_factory=list)
    sources: list = field(default_factory=list)  # per trace with stacks: its top source lines
    # per trace with stacks: (label, its whole call tree, table form), drawn as a flame graph
    flames: list[tuple[str, Report]] = field(default_factory=list)


#: how many source lines the report shows per trace (kernels --by source lists them all)
TOP_SOURCES = 10


def report_set(traces, sel: Selection | None = None, baseline=None) -> ReportSet:
    traces = list(traces)
    if not traces:
        raise TraceviewError("report needs at least one trace")
    cmp = compare(traces, baseline=baseline, sel=sel)
    table = cmp["compare"]
    labels = table["label"].tolist()
    base = labels.index(cmp.info["baseline"])
    cols = [
        c for c in ("label", "device", "tensor_core_pct", "gemm_family", "attention_backend") if c in table
    ]
    glance = Report(
        kind="glance",
        title="Tensor cores and attention per trace",
        tables={"glance": table[cols]},
        info={"tensor_core_pct": "share of GEMM time on tensor cores"},
    )
    diffs = [diff(traces[base], t, sel) for i, t in enumerate(traces) if i != base]
    lines: list[tuple[str, Report | None, str]] = []  # None: no timeline, and the reason why
    for label, t in zip(labels, traces, strict=True):
        try:
            lines.append((label, timeline(t, sel), ""))
        except TraceviewError as exc:
            lines.append((label, None, str(exc)))
    sources = [_top_sources(t, sel) for t in traces if has_stacks(t)]
    flames = [
        (lb, call_tree(t, sel, form="table")) for lb, t in zip(labels, traces, strict=True) if has_stacks(t)
    ]
    parts = breakdown(traces, sels=[sel] * len(traces), labels=labels)
    head = cmp if len(traces) > 1 else summary(traces[0], sel)
    return ReportSet(head, glance, parts, diffs, lines, sources, flames)


def _top_sources(trace, sel) -> Report:
    r = source_stats(trace, sel)
    rows = r.tables["sources"]
    if len(rows) > TOP_SOURCES:
        r.notes.append(
            f"the {TOP_SOURCES} lines with the most GPU time of {len(rows)}: kernels --by source lists all"
        )
        r.tables["sources"] = rows.head(TOP_SOURCES)
    return r
