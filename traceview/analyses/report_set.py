"""What ``traceview report`` shows, as Reports: the comparison (findings and table), each
trace's diff from the baseline in words, GPU time by category per trace, tensor-core share
and attention backend per trace, and one step's timeline per trace."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import TraceviewError
from ..report import Report
from .select.region import Selection
from .trace.breakdown import breakdown
from .trace.timeline import timeline
from .variants.compare import compare
from .variants.diff import diff


@dataclass
class ReportSet:
    compare: Report
    glance: Report  # tensor-core share and attention backend per trace
    breakdown: Report
    diffs: list = field(default_factory=list)  # each trace vs the baseline
    # (label, its timeline or None, why not)
    timelines: list[tuple[str, Report | None, str]] = field(default_factory=list)


def report_set(traces, sel: Selection | None = None, baseline=None) -> ReportSet:
    traces = list(traces)
    if not traces:
        raise TraceviewError("report needs at least one trace")
    cmp = compare(traces, baseline=baseline, sel=sel)
    table = cmp["compare"]
    labels = table["trace"].tolist()
    base = labels.index(cmp.info["baseline"])
    cols = [
        c for c in ("trace", "device", "tensor_core_pct", "gemm_family", "attention_backend") if c in table
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
    return ReportSet(cmp, glance, breakdown(traces, sels=[sel] * len(traces), labels=labels), diffs, lines)
