"""``kernels --by source``: the region's GPU work and allocations per line of the user's code."""

from __future__ import annotations

from ...report import Report
from ..measure import metrics
from ..measure.sources import NO_STACKS, has_stacks, per_source
from ..select.region import Selection, region


def source_stats(trace, sel: Selection | None = None, library: tuple[str, ...] = ()) -> Report:
    """Table ``sources``: per ``file.py:42 function`` (:func:`.measure.sources.per_source`)."""
    r = region(trace, sel)
    notes = list(trace.warnings) + r.notes
    if not has_stacks(trace):
        notes.append(f"{trace.path}: {NO_STACKS}")
    return Report(
        kind="kernels",
        title=f"GPU activities of {trace.label} by source line",
        tables={"sources": per_source(r, tuple(library))},
        info={
            "trace": trace.path,
            "selection": r.selection.describe(),
            "by": "source",
            "library": list(library),
            "gpu_activities": metrics.gpu_activities(r),
            "gpu_time_ns": metrics.gpu_time_ns(r),
        },
        notes=notes,
    )
