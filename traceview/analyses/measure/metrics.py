"""Every metric that more than one command shows, each computed by one function.

Which outputs show each, its unit and how a run combines it: ``registry.METRICS``.
The names here are the names in every output (summary info, the compare table,
the diff overview, JSON and CSV); docs/metrics.md defines each one: what it
counts and what it leaves out. "Per step" means per region (see ``region``): a
ProfilerStep, an annotated span, or the whole trace when it has no steps.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ...domain import domain, gemm_family
from ..select.region import Region, op_rows
from .derived import is_text, kept_for_region, of_region, texts


def _per(r: Region, value) -> float:
    return float(value) / r.regions


def _time(frame: pd.DataFrame) -> int:
    return int(frame["dur_ns"].clip(lower=0).sum()) if len(frame) else 0


def _time_of(frame: pd.DataFrame, rows: np.ndarray) -> int:
    """``_time(frame[rows])``, one column cut instead of the frame."""
    return int(np.clip(frame["dur_ns"].to_numpy()[rows], 0, None).sum()) if len(frame) else 0


def _is_kind(r: Region, kind: str) -> np.ndarray:
    """Which of the region's activities are of ``kind`` (a mask: the rows are not copied)."""
    a = r.activities
    return (a["kind"] == kind).to_numpy() if len(a) else np.zeros(0, dtype=bool)


# ------------------------------------------------------------------ GPU


def gpu_activities(r: Region) -> int:
    """Kernels, memcpys and memsets in the region."""
    return len(r.activities)


def memcpys(r: Region) -> int:
    """GPU activities of kind memcpy."""
    return int(_is_kind(r, "memcpy").sum())


def memsets(r: Region) -> int:
    """GPU activities of kind memset."""
    return int(_is_kind(r, "memset").sum())


def gpu_time_ns(r: Region) -> int:
    """Summed duration of the region's GPU activities (overlaps on streams count twice)."""
    return _time(r.activities)


def kernels(r: Region) -> int:
    """GPU activities of kind kernel (no memcpy, no memset)."""
    return int(_is_kind(r, "kernel").sum())


def kernel_launches(r: Region) -> int:
    """Distinct runtime calls that launched the region's kernels (a graph launch counts once)."""
    return of_region(r, "kernel_launches", _kernel_launches)


def _kernel_launches(r: Region) -> int:
    if not r.has_gpu:
        return 0
    launch = r.activities["launch"].to_numpy()[_is_kind(r, "kernel")]
    return len(pd.unique(launch[launch >= 0]))  # a hash table: the count np.unique's sort gives


def cpu_ops(r: Region) -> int:
    """CPU ops (cpu_op events, at every depth) in the region."""
    return _op_figures(r)[0]


def cpu_op_time_ns(r: Region) -> int:
    """Time in the region's outermost CPU ops (nested ops are inside it, so not added again)."""
    return _op_figures(r)[1]


def _op_figures(r: Region) -> tuple[int, int]:
    """``cpu_ops`` and ``cpu_op_time_ns``, kept in the trace's cache entry for the whole trace (a
    warm run reads neither the ops table nor the region's cut of it)."""

    def make(r: Region) -> tuple[int, int]:
        rows, outer = op_rows(r)
        return len(rows), _time_of(r.trace.ops, rows[outer])

    return kept_for_region(r, "op_figures", make, value=True)


def gemm_time_ns(r: Region) -> int:
    return _time_of(r.activities, _is_gemm(r))


def _is_gemm(r: Region) -> np.ndarray:
    """Which of the region's activities are GEMMs (a mask: the rows are not copied)."""
    a = r.activities
    return is_text(a["category"], "gemm") if len(a) else np.zeros(0, dtype=bool)


def tensor_core_ns(r: Region) -> tuple[int, int]:
    """(GEMM time on tensor cores, GEMM time whose path is known), ns: what ``tensor_core_pct`` divides."""
    gemm = _is_gemm(r)
    if not gemm.any():
        return 0, 0
    a = r.activities
    tc = a["tensor_core"]
    known, on = tc.notna().to_numpy()[gemm], tc.fillna(False).to_numpy(dtype=bool)[gemm]
    dur = np.clip(a["dur_ns"].to_numpy()[gemm], 0, None)
    return int(dur[known & on].sum()), int(dur[known].sum())


def tensor_core_pct(r: Region) -> float:
    """Share of GEMM time on tensor cores, among GEMM kernels whose path is known; nan without any."""
    return tensor_core_pct_of(*tensor_core_ns(r))


def tensor_core_pct_of(tc_ns: int, known_ns: int) -> float:
    """``tensor_core_pct`` from its two times (summed over the ranks of a run, for the run's figure)."""
    return 100.0 * tc_ns / known_ns if known_ns > 0 else float("nan")


def on_tensor_cores(pct: float) -> bool | None:
    """Whether GEMMs "run on tensor cores" by the majority rule in rules/ops.toml (None: unknown)."""
    return None if np.isnan(pct) else pct >= domain().tensor_core_majority_pct


def gemm_families(r: Region) -> dict:
    """GEMM family -> percent of GEMM time, largest first."""
    gemm = _is_gemm(r)
    dur = np.clip(r.activities["dur_ns"].to_numpy()[gemm], 0, None)
    total = int(dur.sum())
    if not total:
        return {}
    codes, values = texts(r.activities["name"])
    present, row = np.unique(codes[gemm], return_inverse=True)  # each GEMM name's family once
    missing = len(values) - 1  # no name: "other", as a name no pattern knows
    named = np.array([gemm_family(values[c]) if c != missing else "other" for c in present], dtype=object)
    families, of_row = np.unique(named, return_inverse=True)  # sorted, as a groupby's keys
    ns = np.zeros(len(families), dtype=np.int64)
    np.add.at(ns, of_row[row], dur)
    order = np.argsort(-ns, kind="stable")  # largest first; equal times by family name
    return {str(families[i]): 100.0 * int(ns[i]) / total for i in order}


def attention(r: Region) -> dict:
    """Fused attention kernels by backend (count/time per step, main kernel), and the SDPA CPU ops."""
    a = r.activities
    backends: dict = {}
    att = a[is_text(a["category"], "attention")] if len(a) else a
    if len(att):
        be = (
            att["attention_backend"].astype(object).where(att["attention_backend"].notna(), "fused (unknown)")
        )
        for b, grp in att.groupby(be.astype(str).to_numpy(), sort=False):
            backends[b] = {
                "count": r.per_region_count(len(grp)),
                "time_ns": _per(r, _time(grp)),
                "kernel": grp["name"].astype(str).value_counts().index[0],
                "distinct": grp["name"].nunique(),
                # each kernel name apart: a split-KV forward is two kernels, not one counted twice
                "names": {
                    str(n): {"count": r.per_region_count(len(g)), "time_ns": _per(r, _time(g))}
                    for n, g in grp.groupby(grp["name"].astype(str).to_numpy(), sort=False)
                },
            }
    sdpa_ops = domain().sdpa_ops
    sdpa = kept_for_region(r, "sdpa_ops", _sdpa_ops, value=True)
    return {
        "kernels": backends,
        "sdpa_ops": sdpa,
        "sdpa_backends": list(dict.fromkeys(sdpa_ops[n] for n in sdpa)),
    }


def _sdpa_ops(r: Region) -> list[str]:
    """The region's SDPA ops' names (``domain().sdpa_ops``), in the order of their first row."""
    sdpa_ops = domain().sdpa_ops
    rows, _ = op_rows(r)
    codes, values = texts(r.trace.ops["name"])  # the distinct names looked up, never every row's text
    codes = codes[rows]
    wanted = [i for i, v in enumerate(values) if isinstance(v, str) and v in sdpa_ops]
    return [str(values[c]) for c in pd.unique(codes[np.isin(codes, wanted)])]


def attention_backend(r: Region, stats: dict | None = None) -> str:
    """The fused kernels' backend(s), else the SDPA op's backend, else "none"."""
    stats = stats or attention(r)
    if stats["kernels"]:
        return ", ".join(stats["kernels"])
    if stats["sdpa_backends"]:
        return ", ".join(stats["sdpa_backends"])
    return "none"
