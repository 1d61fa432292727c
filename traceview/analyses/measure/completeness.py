"""Comparability first: is the trace complete, which kernels are graph replays, what work it ran.

Three questions a diff must answer before any delta (issue 18, item 1):

- completeness: the runtime launches with no GPU activity in the file, and the GPU activities
  with no launch in it, and where in the file they lie. Worked out by ``traceview.launches`` (a
  fact of the link: ``load`` puts its warning in ``Trace.warnings``, so every command carries it);
  here as table ``completeness`` and as findings that cite its cells.
- CUDA graphs: the kernels whose launch is a ``cudaGraphLaunch`` (``launches.graph_replays``) are
  graph replays. They have no CPU op of their own, hence no shapes and no FLOPs.
- workload: per step the FLOPs and bytes of the region's ops (``work.op_work``) and the set of
  (op, Input Dims) they ran, and the rows M of each matrix product.
"""

from __future__ import annotations

import json
import math
from typing import NamedTuple

import numpy as np
import pandas as pd

# by_api and graph_replays: imported from here by summary, groups and efficiency (re-exported)
from ...launches import by_api as by_api
from ...launches import completeness, consequence, rules, warned, where
from ...launches import graph_replays as graph_replays
from ...model import list_codes
from ...report import Finding
from ..select.region import Region, op_rows
from ..wording.words import Cite
from .derived import kept_for_region, kept_for_trace, texts
from .work import shapes_recorded, trace_work

GRAPH_REPLAY = "(graph replay: {})"  # what stands where a graph kernel's CPU op would
_BATCHED = ("aten::bmm", "aten::baddbmm")  # M is per matrix of the batch


def completeness_table(sides) -> pd.DataFrame:
    """``sides``: (label, trace) pairs. One row each: the completeness figures (no warning text)."""
    rows = []
    for label, t in sides:
        rows.append({"trace": label, **{k: v for k, v in completeness(t).items() if k != "warning"}})
    out = pd.DataFrame(rows)
    times = [c for c in out.columns if c.endswith(("_from_ns", "_to_ns"))]  # empty where nothing is lost
    return out.astype(dict.fromkeys(times, "Int64"))


def launches_by_api(trace) -> pd.DataFrame:
    """``by_api`` of the trace (the table ``launches``), kept in its cache entry (a warm summary
    reads no launch table); each caller gets its own copy of the few rows."""
    return kept_for_trace(trace, "launches_by_api", by_api).copy()


# ------------------------------------------------------------------ the work a region ran


def workload(r: Region) -> dict:
    """Per step: ``flops`` and ``bytes`` of the region's counted ops (None without shapes),
    ``shapes`` (the set of (op, Input Dims) of those that carry FLOPs), ``gemm_m`` (M -> op count) and
    ``gemm_m_by_op`` ((op, M) -> op count)."""
    return dict(kept_for_region(r, "workload", _workload, value=True))  # its own dict; values not changed


def _workload(r: Region) -> dict:
    t = r.trace
    at, _ = op_rows(r)
    if not len(at) or not shapes_recorded(t):
        return {"flops": None, "bytes": None, "shapes": None, "gemm_m": {}, "gemm_m_by_op": {}}
    w = trace_work(t)
    # arrays of the trace's op table taken at the region's counted ops (in the region's order),
    # not a frame cut per column; names as their codes, Input Dims as codes of their lists
    at = at[w["counted"].to_numpy()[at]]
    flops = w["flops"].to_numpy(dtype=np.int64, na_value=0)[at]
    moved = w["bytes_moved"].to_numpy(dtype=np.int64, na_value=0)[at]
    names, name_text = texts(t.ops["name"])
    dims, distinct = list_codes(t.ops["input_dims"].to_numpy(dtype=object)[at])
    ops = _Coded(names[at], dims, name_text, distinct)
    # the shapes of the ops that carry FLOPs (matrix products, convolutions, attention): an
    # elementwise op made in-place or fused is a change of code, not of the work asked for
    fl = flops > 0
    return {
        "flops": int(flops.sum()) / r.regions,
        "bytes": int(moved.sum()) / r.regions,
        "shapes": _shapes(ops.at(fl)),
        "gemm_m_by_op": (by_op := _gemm_m(ops)),
        "gemm_m": _m_of(by_op, {n for n, _ in by_op}),
    }


class _Coded(NamedTuple):
    """Some ops' names and Input Dims as codes: ``name_text[names]`` is the name's text (the last:
    missing), ``distinct[dims]`` the Input Dims (-1: none)."""

    names: np.ndarray
    dims: np.ndarray
    name_text: np.ndarray
    distinct: np.ndarray

    def at(self, rows: np.ndarray) -> _Coded:
        return self._replace(names=self.names[rows], dims=self.dims[rows])

    def pairs(self) -> np.ndarray:
        """Each op's (name, Input Dims) as one int64: name * (distinct + 1) + dims + 1."""
        return self.names * (len(self.distinct) + 1) + (self.dims + 1)

    def pair(self, key: int) -> tuple[str, object]:
        """The (name text, Input Dims or None) of a ``pairs`` key."""
        name, dims = divmod(key, len(self.distinct) + 1)
        return self.name_text[name], self.distinct[dims - 1] if dims else None


def _shapes(ops: _Coded) -> set:
    """The set of (op name, Input Dims as JSON text), each distinct pair written once."""
    return {(name, _text(dims)) for name, dims in map(ops.pair, np.unique(ops.pairs()).tolist())}


def _text(dims) -> str:
    return json.dumps(dims) if isinstance(dims, list) else str(dims)


def _gemm_m(ops: _Coded) -> dict:
    """(op name, M) -> how many matrix-product ops had it (M: rows of the left operand)."""
    at = rules().gemm_m
    gemm = np.flatnonzero([isinstance(n, str) and n in at for n in ops.name_text])
    # each distinct (op, dims) once, with how many ops had it, in the order the ops first have it
    keys, distinct = pd.factorize(ops.at(np.isin(ops.names, gemm)).pairs())
    counts = np.bincount(keys, minlength=len(distinct))
    out: dict = {}
    for key, count in zip(distinct.tolist(), counts.tolist(), strict=True):
        name, held = ops.pair(key)
        i = at[name]
        shape = held[i] if isinstance(held, list) and len(held) > i else None
        if isinstance(shape, list) and len(shape) >= 2:
            m = int(np.prod(shape[-2:-1] if name in _BATCHED else shape[:-1]))
            out[(name, m)] = out.get((name, m), 0) + int(count)
    return out


def workload_table(sides) -> pd.DataFrame:
    """``sides``: (label, Region) pairs. Per side: FLOPs and bytes per step, distinct FLOP-op shapes,
    the GEMMs' M values."""
    rows = []
    for label, r in sides:
        w = workload(r)
        rows.append(
            {
                "trace": label,
                "device": r.trace.device_name or "-",
                "flops_per_step": w["flops"],
                "bytes_per_step": w["bytes"],
                "op_shapes": len(w["shapes"]) if w["shapes"] is not None else None,
                "gemm_m": _m_text(w["gemm_m"]) or "-",
            }
        )
    return pd.DataFrame(rows)


def _m_text(ms: dict, n: int = 3) -> str:
    """The commonest M values with their op counts, ``788 (72 ops), 4 (1)``."""
    top = sorted(ms, key=lambda m: (-ms[m], m))[:n]
    words = [f"{m:,} ({ms[m]:,} op{'s' if ms[m] != 1 else ''})" if i == 0 else f"{m:,} ({ms[m]:,})"
             for i, m in enumerate(top)]  # fmt: skip
    return ", ".join(words) + (f" and {len(ms) - n:,} more" if len(ms) > n else "")


# ------------------------------------------------------------------ the first findings of a diff


def comparable_findings(sides) -> tuple[list[Finding], bool]:
    """``sides``: two (name, label, Region) triples, A then B (``name`` as the sentence says it,
    ``label`` the row of tables completeness and workload). The sentences that must come before any
    delta: each incomplete side, then how the two workloads differ; and whether they ran the same
    work (True also when it cannot be told: no shapes recorded)."""
    words = workload_finding(*sides)
    first = incomplete_findings([(label, r.trace) for _, label, r in sides])
    return first + ([words] if words else []), not words


def incomplete_findings(sides) -> list[Finding]:
    """``sides``: (label, trace) pairs. Each incomplete trace's warning as a finding citing the
    completeness table's cells."""
    out = []
    for label, t in sides:
        got = completeness(t)
        if got["warning"] is None:
            continue
        c = Cite()
        row = {"trace": label}

        def cell(col: str, how: str, row=row, got=got, c=c) -> str:
            return c("completeness", row, col, got[col], how)

        def say(got: dict, col: str, how: str, cell=cell) -> str:  # where(): a figure, cited
            return cell(col, how)

        lost, unlaunched = warned(got)
        parts = []
        if lost:
            parts.append(
                f"{cell('launches_without_gpu', 'count')} of {cell('kernel_launches', 'count')} kernel "
                f"launches ({cell('launches_without_gpu_pct', 'pct')}) have no GPU activity in the file, "
                + where(got, "launches_without_gpu", say)
            )
        if unlaunched:
            parts.append(
                f"{cell('activities_without_launch', 'count')} of {cell('gpu_activities', 'count')} GPU "
                f"activities ({cell('activities_without_launch_pct', 'pct')}) have no launch in the file, "
                + where(got, "activities_without_launch", say)
            )
        name = c("completeness", row, "trace", label, "text")
        out.append(c.finding(f"{name} is incomplete: " + "; ".join(parts) + consequence(got)))
    return out


def workload_finding(a, b) -> Finding | None:
    """``a``, ``b``: (name, label, Region). How their work differs, citing table workload's cells;
    None when it does not (or cannot be told)."""
    c = Cite()
    words = _workload_words(c, (a[0], a[1], workload(a[2])), (b[0], b[1], workload(b[2])), a[2].per_word)
    return (
        c.finding(words + ": the differences below are differences of workload, not regressions")
        if words
        else None
    )


def _workload_words(c: Cite, a, b, unit: str) -> str | None:
    (na, la, wa), (nb, lb, wb) = a, b
    if wa["shapes"] is None or wb["shapes"] is None:
        return None

    def cell(label: str, col: str, value, how: str = "count") -> str:
        return c("workload", {"trace": label}, col, value, how)

    def who(name: str, label: str) -> str:  # a trace label (digits and all) is cited where it stands
        return cell(label, "trace", label, "text") if name == label else name

    def flops() -> str:
        x, y = cell(la, "flops_per_step", wa["flops"]), cell(lb, "flops_per_step", wb["flops"])
        return f"{who(na, la)} {x} vs {who(nb, lb)} {y} FLOPs per {unit}"

    # matrix-product ops both sides call (naive attention's bmm against SDPA is a change of code)
    both = {n for n, _ in wa["gemm_m_by_op"]} & {n for n, _ in wb["gemm_m_by_op"]}
    ma, mb = _m_of(wa["gemm_m_by_op"], both), _m_of(wb["gemm_m_by_op"], both)
    if ma and mb and set(ma) != set(mb):
        m_b, m_a = (cell(lbl, "gemm_m", _m_text(w["gemm_m"]), "text") for lbl, w in ((lb, wb), (la, wa)))
        gemms = f"{who(nb, lb)}'s GEMMs have M = {m_b}, {who(na, la)}'s M = {m_a}"
        return f"{gemms} ({flops()}): not the same workload"
    # an op on both sides called with other shapes: the same code asked for other work (an op on
    # one side only is a change of code, naive attention's bmm against SDPA, which a diff is for)
    common = {n for n, _ in wa["shapes"]} & {n for n, _ in wb["shapes"]}
    if {x for x in wa["shapes"] ^ wb["shapes"] if x[0] in common}:
        sa, sb = (cell(lbl, "op_shapes", len(w["shapes"])) for lbl, w in ((la, wa), (lb, wb)))
        return (
            f"{who(na, la)} and {who(nb, lb)} call the same ops with other shapes ({sa} and {sb} distinct "
            f"FLOP-op shapes; {flops()}): not the same workload"
        )
    if wa["shapes"] != wb["shapes"]:  # the code changed; the FLOPs may too (causal attention)
        return None
    if not math.isclose(wa["flops"], wb["flops"], rel_tol=1e-9):  # same shapes, another count of ops
        both_names = f"{who(na, la)} and {who(nb, lb)}"
        return f"{both_names} ran the same op shapes but not as often ({flops()}): not the same workload"
    return None


def _m_of(by_op: dict, names: set) -> dict:
    """M -> op count over the ops of ``names``."""
    out: dict = {}
    for (name, m), n in by_op.items():
        if name in names:
            out[m] = out.get(m, 0) + n
    return out
