"""The figures ``traceview check`` rules can name: every metric of the registry, and the sets a
rule about "something new" needs (a new kernel category, a new copy, a GEMM that left the tensor
cores), which no other output shows. docs/metrics.md defines each one.

A set is compared with the baseline's as a set: ``<=`` is "no element the baseline lacks".
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ...domain import domain
from ...link import ARROW
from ..measure import memory, registry
from ..measure.exposed import COMM, exposed
from ..measure.groups import kernel_keys
from ..select.region import Region


@dataclass(frozen=True)
class CheckMetric:
    name: str
    compute: Callable[[Region], object]
    unit: str  # count, ns, bytes, pct, text or set
    gpu: bool  # needs GPU activity: a CPU-only trace skips the rule
    per_step: bool  # a per-step figure: a relative rule judges it against the steps' noise
    counts: str  # its definition, for docs and errors


def _where(test) -> np.ndarray:
    """A mask from a comparison that may hold NA (a nullable column: ``tensor_core`` is unknown for a
    kernel no rule placed, ``step`` for an event outside every step): an unknown is not a match."""
    return test.to_numpy(dtype=bool, na_value=False)


def copy_ops(r: Region) -> int:
    """CPU ops (at every depth) named as copies in rules/ops.toml ``[copies]``."""
    return int(_where(r.ops["name"].astype(str).isin(domain().copy_ops)).sum()) if len(r.ops) else 0


def copying_ops(r: Region) -> frozenset:
    """The outer ops under which a copy op runs (``aten::masked_fill`` for ``masked_fill → clone →
    copy_``): the first op of every chain ending in a copy op, unless that op is a copy itself."""
    if not len(r.ops):
        return frozenset()
    copies = set(domain().copy_ops)
    o = r.ops[_where(r.ops["name"].astype(str).isin(copies))]
    outer = {str(c).split(ARROW)[0] for c in o["chain"].astype(str).unique()}  # per distinct chain
    return frozenset(outer - copies)


def kernel_categories(r: Region) -> frozenset:
    """The categories of the region's GPU activities."""
    a = r.activities
    return frozenset(a["category"].astype(str).unique()) if len(a) else frozenset()


def cuda_core_gemms(r: Region) -> frozenset:
    """GEMM kernels (by the normalised name diff matches kernels on) that run on CUDA cores: those
    whose ``tensor_core`` is False. An unknown path (NA: no rule said) is not counted, since a rule
    must not fail on a kernel nobody classified (issue 38: NA in the mask was an exit 3)."""
    a = r.activities
    if not len(a):
        return frozenset()
    g = a[_where(a["category"].astype(str).eq("gemm")) & _where(a["tensor_core"].eq(False))]
    return frozenset(np.unique(kernel_keys(g)).tolist()) if len(g) else frozenset()


def peak_allocated_bytes(r: Region) -> float:
    """The largest memory allocated (``memory``'s ``allocated``) over the [memory] events in the
    region's steps (the whole trace when the region is not ProfilerSteps), bytes (the unit and name
    of memory's and summary's ``peak_allocated_bytes``), on the accelerators (the host's only when
    the trace has no other device); nan without [memory] events."""
    s = memory.series(r.trace)
    if r.region_kind == "step":
        s = s[_where(s["step"] == r.selection.step)]
    elif r.region_kind == "steps":
        s = s[_where(s["step"].notna())]
    accelerator = _where(s["device"].astype(str).ne("cpu"))
    if accelerator.any():
        s = s[accelerator]
    return int(s["allocated"].max()) if len(s) else float("nan")


def exposed_comm_pct(r: Region) -> float:
    """Communication exposed (``exposed``: a communication kernel runs and no computation does) as a
    percentage of the wall time of the region's windows; nan when the windows have no wall time."""
    totals = exposed(r).totals()
    return 100.0 * totals[COMM] / totals["wall_ns"] if totals["wall_ns"] > 0 else float("nan")


def _per(f):
    return lambda r: float(f(r)) / r.regions


CHECK_ONLY = [
    CheckMetric("copy_ops_per_step", _per(copy_ops), "count", False, True,
                "CPU ops named as copies in rules/ops.toml [copies], at every depth, per step"),
    CheckMetric("copying_ops", copying_ops, "set", False, False,
                "the outer ops under which a copy op runs (first op of each chain ending in a copy)"),
    CheckMetric("peak_allocated_bytes", peak_allocated_bytes, "bytes", False, True,
                "the largest memory allocated on the accelerators in the region's steps, bytes "
                '(a rule\'s value may say "100 MiB")'),
    CheckMetric("exposed_comm_pct", exposed_comm_pct, "pct", True, True,
                "communication exposed (not under computation) as a % of the steps' wall time"),
    CheckMetric("kernel_categories", kernel_categories, "set", True, False,
                "the categories of the region's GPU activities"),
    CheckMetric("cuda_core_gemms", cuda_core_gemms, "set", True, False,
                "GEMM kernels (normalised names) whose path is CUDA cores, not tensor cores"),
]  # fmt: skip


def _from_registry(m) -> CheckMetric:
    per_step = m.name.endswith(("_per_step", "_per_step_ns")) or m.unit == "pct"
    return CheckMetric(m.name, m.compute, m.unit, m.gpu, per_step, m.counts)


def check_metrics() -> dict[str, CheckMetric]:
    """Every metric a rule can name, by name: the registry's (read now: one registered at runtime too),
    then the check-only ones."""
    found = {m.name: _from_registry(m) for m in registry.METRICS}
    return found | {m.name: m for m in CHECK_ONLY}
