"""One list of metrics: every figure more than one output shows, by its one name.

Each ``Metric`` says which function computes it from one Region (``metrics``), its
unit, how a run's ``overall`` row combines the ranks' values, which outputs show it,
and its definition. summary, compare, ``summary --run`` and ``compare --run`` take
their metric columns from ``METRICS`` in this order; docs/metrics.md's table of
metrics is generated from it (``python -m traceview.analyses.measure.registry``,
tests/test_registry.py checks it is up to date). Adding a Metric here is enough for
it to show in every output its ``outputs`` name.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from ..select.region import Region
from . import metrics as m
from .derived import kept_for_region, of_region

#: the outputs a metric can be shown in: ``summary``, ``compare``, ``summary --run``, ``compare --run``,
#: the ``diff`` overview, ``report`` (its page shows compare's and diff's tables), the ``check`` CI gate
OUTPUTS = ("summary", "compare", "run_summary", "run_compare", "diff", "report", "check")
#: how a run's ``overall`` row combines its ranks' values (docs/metrics.md, "Runs")
COMBINE = ("sum", "same", "ratio_of_sums", "join", "none")


@dataclass(frozen=True)
class Metric:
    name: str
    compute: Callable[[Region], object]  # the value, from one Region
    unit: str  # count, ns, pct or text
    combine: str  # one of COMBINE
    outputs: tuple[str, ...]  # of OUTPUTS
    counts: str  # its definition: what it counts
    leaves_out: str = ""
    gpu: bool = False  # a GPU figure: left out of compare and the diff overview when no trace has GPU work
    ratio: str | None = None  # the column of its ratio to the baseline in compare and compare --run
    parts: Callable[[Region], tuple[int, int]] | None = None  # ratio_of_sums: (numerator, denominator)
    of: Callable[[int, int], float] | None = None  # ratio_of_sums: the value from the ranks' summed parts


def _per(f: Callable[[Region], int | float]) -> Callable[[Region], float]:
    return lambda r: float(f(r)) / r.regions


def _linked_pct(r: Region):
    k = r.activities
    return 100.0 * float(k["op"].notna().mean()) if len(k) else None


ALL = ("summary", "compare", "run_summary", "run_compare", "diff", "report", "check")
TOTAL = ("summary", "run_summary", "check")  # a total, not per step: no compare or diff column
ONE = ("summary", "compare", "run_summary", "diff", "report", "check")  # not in compare --run
MORE = ("summary", "run_summary", "diff", "report", "check")  # a detail compare leaves out

METRICS: list[Metric] = [
    Metric("regions", lambda r: r.regions, "count", "same", ALL, "the divisor above", "—"),
    Metric("gpu_activities", m.gpu_activities, "count", "sum", TOTAL,
           "kernels + memcpys + memsets in the region (total, not per step)", "activities outside the region",
           gpu=True),
    Metric("gpu_time_ns", m.gpu_time_ns, "ns", "sum", TOTAL,
           "summed duration of those activities, ns (total); overlapping activities on different streams "
           "both count", "negative durations (counted as 0)", gpu=True),
    Metric("gpu_activities_per_step", _per(m.gpu_activities), "count", "sum", ALL,
           "`gpu_activities / regions`", gpu=True),
    Metric("kernels_per_step", _per(m.kernels), "count", "sum", ALL,
           "GPU activities of kind `kernel` per step", "memcpys and memsets",
           gpu=True, ratio="ratio_kernels"),
    Metric("memcpys_per_step", _per(m.memcpys), "count", "sum", MORE,
           "GPU activities of kind `memcpy` per step", gpu=True),
    Metric("memsets_per_step", _per(m.memsets), "count", "sum", MORE,
           "GPU activities of kind `memset` per step", gpu=True),
    Metric("gpu_time_per_step_ns", _per(m.gpu_time_ns), "ns", "sum", ALL,
           "`gpu_time_ns / regions`", gpu=True, ratio="ratio_gpu_time"),
    Metric("kernel_launches_per_step", _per(m.kernel_launches), "count", "sum", ONE,
           "distinct runtime calls (`cudaLaunchKernel`, `cudaGraphLaunch`, …) that launched the region's "
           "kernels, per step; a graph launch of 50 kernels counts once",
           "memcpy/memset calls; kernels whose launch is not in the trace", gpu=True),
    Metric("cpu_ops_per_step", _per(m.cpu_ops), "count", "sum", ONE,
           "CPU ops (`cpu_op` events at every depth) in the region, per step",
           "`ProfilerStep#N` markers, annotations, runtime calls"),
    Metric("cpu_time_per_step_ns", _per(lambda r: r.cpu_wall_ns), "ns", "sum", ALL,
           "wall time of the region on the CPU (the steps' or spans' durations; for a whole trace, first op "
           "start to last op end), per step", ratio="ratio_cpu_time"),
    Metric("cpu_op_time_per_step_ns", _per(m.cpu_op_time_ns), "ns", "sum", MORE,
           "time inside the region's outermost CPU ops, per step (nested ops are inside their parent, so "
           "not added again)", "gaps between ops"),
    Metric("tensor_core_pct", m.tensor_core_pct, "pct", "ratio_of_sums", ALL,
           "share of GEMM kernel time on tensor cores, among GEMM kernels whose path the rules know "
           "(0–100); empty without GEMMs", "GEMMs whose path is unknown",
           gpu=True, parts=m.tensor_core_ns, of=m.tensor_core_pct_of),
    Metric("attention_backend", m.attention_backend, "text", "join",
           ("summary", "compare", "run_summary", "run_compare", "report", "check"),
           "the fused attention kernels' backend(s) (`flash`, `mem_efficient`, `cudnn`, …), else the "
           "backend of the SDPA CPU op (`math` for the unfused math path), else `none`"),
    Metric("left_out_gpu_activities", lambda r: r.left_out, "count", "none", ("summary",),
           "selected GPU activities launched outside every ProfilerStep (summary only)"),
    Metric("linked_to_op_pct", _linked_pct, "pct", "none", ("summary",),
           "share of the region's GPU activities linked to the CPU op that launched them (summary only)"),
]  # fmt: skip


def shown_in(output: str, gpu: bool = True) -> list[Metric]:
    """The metrics ``output`` shows, in order (``gpu``: whether any of its traces has GPU work)."""
    return [x for x in METRICS if output in x.outputs and (gpu or not x.gpu)]


def metrics_of(r: Region) -> dict:
    """Every metric of the region, by its one name (counts and times per region where the name says);
    each is computed once per trace and selection (``derived.of_region``), however many outputs and
    calls ask."""
    held = of_region(r, "metrics", _kept_values)
    for x in METRICS:
        if x.name not in held:
            held[x.name] = x.compute(r)
    return {x.name: held[x.name] for x in METRICS}


def _kept_values(r: Region) -> dict:
    """Every metric of the region, kept in the trace's cache entry for the whole trace (a warm run
    works none out)."""
    every = kept_for_region(r, "metrics", _every_metric, value=True, reads_devices=True)
    return dict(every)


def _every_metric(r: Region) -> dict:
    return {x.name: x.compute(r) for x in METRICS}


def shown(values: dict, output: str, gpu: bool = True) -> dict:
    """``values`` (of ``metrics_of``) narrowed to the metrics ``output`` shows, in their order."""
    return {x.name: values[x.name] for x in shown_in(output, gpu)}


def numeric(gpu: bool = True) -> list[str]:
    """The diff overview's rows: counts, times and shares (``gpu``: whether either side has GPU work)."""
    return [x.name for x in shown_in("diff", gpu)]


# ------------------------------------------------------------------ a rank's distributed figures


@dataclass(frozen=True)
class RankMetric:
    """A figure of one rank's whole trace (``traceview ranks``), computed where the rank is loaded."""

    name: str
    group: str  # the function that computes it: gpu_states (gpu_breakdown), overlap, stragglers
    unit: str
    combine: str  # over a run's ranks (diff RUN_A/ RUN_B/, compare --run), one of COMBINE
    outputs: tuple[str, ...]  # of RANK_OUTPUTS
    counts: str


RANK_OUTPUTS = ("ranks", "run_diff", "run_compare")
DIST = RANK_OUTPUTS
RANK_METRICS: list[RankMetric] = [
    RankMetric("span_ns", "gpu_states", "ns", "sum", DIST,
               "the rank's first GPU activity start to its last activity end, ns (whole trace)"),
    RankMetric("computation_ns", "gpu_states", "ns", "sum", DIST,
               "time in the span some computation kernel runs (neither communication nor memcpy/memset)"),
    RankMetric("communication_ns", "gpu_states", "ns", "sum", DIST,
               "time no computation runs but a communication kernel (NCCL/RCCL) does"),
    RankMetric("memory_ns", "gpu_states", "ns", "sum", DIST, "time only memcpys/memsets run"),
    RankMetric("idle_ns", "gpu_states", "ns", "sum", DIST,
               "time in the span nothing runs (the four add up to `span_ns`; overlapping streams count "
               "once)"),
    RankMetric("wait_caused_ns", "stragglers", "ns", "sum", DIST,
               "time the other ranks waited in the collectives this rank reached last (see Clocks)"),
    RankMetric("overlap_pct", "overlap", "pct", "ratio_of_sums", DIST,
               "share of the rank's communication time that computation overlaps; a run: overlapped over "
               "communication time, both summed over the ranks"),
]  # fmt: skip


def rank_metrics(output: str, group: str | None = None, combine: str | None = None) -> list[str]:
    """The names of the distributed figures ``output`` shows (of one ``group``, one ``combine``)."""
    return [
        x.name
        for x in RANK_METRICS
        if output in x.outputs and group in (None, x.group) and combine in (None, x.combine)
    ]


# ------------------------------------------------------------------ a run's overall row


def parts(r: Region) -> dict:
    """A rank's parts of its ratio-of-sums metrics, as hidden columns of its row."""
    return {f"{x.name}:{i}": v for x in METRICS if x.parts for i, v in enumerate(x.parts(r))}


def overall(per_rank: pd.DataFrame, output: str) -> dict:
    """The run's value of each metric ``output`` shows, from the ranks' rows (docs/metrics.md, "Runs")."""
    return {x.name: _combine(x, per_rank) for x in shown_in(output)}


def _combine(x: Metric, rows: pd.DataFrame):
    col = rows[x.name]
    if x.combine == "sum":
        total = col.sum()
        return int(total) if isinstance(total, (np.integer, int)) else total
    if x.combine == "same":
        same = col.unique()
        return int(same[0]) if len(same) == 1 else np.nan
    if x.combine == "ratio_of_sums" and x.of is not None:
        return x.of(int(rows[f"{x.name}:0"].sum()), int(rows[f"{x.name}:1"].sum()))
    if x.combine == "join":
        seen = [v for text in col for v in str(text).split(", ") if v != "none"]
        return ", ".join(dict.fromkeys(seen)) or "none"
    return None


# ------------------------------------------------------------------ docs/metrics.md

DOC = Path(__file__).resolve().parents[3] / "docs" / "metrics.md"
BEGIN = "<!-- the metrics table: generated from traceview/analyses/measure/registry.py -->"
END = "<!-- end of the generated table -->"


def doc_table() -> str:
    """The tables of metrics docs/metrics.md shows, from METRICS and RANK_METRICS."""
    head = "| name | counts | leaves out | unit | overall of a run | shown in |"
    lines = [head, "|---|---|---|---|---|---|"]
    for x in METRICS:
        where = ", ".join(x.outputs)
        lines.append(f"| `{x.name}` | {x.counts} | {x.leaves_out} | {x.unit} | {x.combine} | {where} |")
    lines += [
        "",
        "Per rank, over its whole trace (`traceview ranks`; a run's figure as the column says):",
        "",
    ]
    lines += ["| name | counts | unit | overall of a run | shown in |", "|---|---|---|---|---|"]
    for r in RANK_METRICS:
        lines.append(f"| `{r.name}` | {r.counts} | {r.unit} | {r.combine} | {', '.join(r.outputs)} |")
    return "\n".join(lines)


def with_table(doc: str) -> str:
    """``doc`` with the text between BEGIN and END replaced by ``doc_table()``."""
    head, rest = doc.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{BEGIN}\n{doc_table()}\n{END}{tail}"


if __name__ == "__main__":  # regenerate the table in docs/metrics.md
    from ...atomic import write_text

    write_text(DOC, with_table(DOC.read_text(encoding="utf-8")))
