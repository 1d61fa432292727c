"""Comparability first: is the trace complete, which kernels are graph replays, what work it ran.

Three questions a diff must answer before any delta (issue 18, item 1):

- completeness: the runtime launches (``cudaLaunchKernel``, ``cudaMemcpyAsync``, … listed in
  ``rules/completeness.toml``) with no GPU activity in the file, and the GPU activities with no
  launch in it. A profiler that drops activity records leaves launches behind; such a trace
  under-reports every per-step time. Counted over the whole file (a lost activity has no time
  to place it in a step).
- CUDA graphs: the kernels whose launch is a ``cudaGraphLaunch`` (linked by correlation in
  ``link``) are graph replays. They have no CPU op of their own, hence no shapes and no FLOPs.
- workload: per step the FLOPs and bytes of the region's ops (``work.op_work``) and the set of
  (op, Input Dims) they ran, and the rows M of each matrix product.
"""

from __future__ import annotations

import functools
import json
import math
import re
from pathlib import Path

import msgspec
import numpy as np
import pandas as pd

from ... import schema
from ...errors import TraceviewError
from ...report import Finding
from ..select.region import Region
from ..wording.words import Cite
from .work import has_shapes, memo, trace_work

RULES_PATH = Path(__file__).resolve().parents[2] / "rules" / "completeness.toml"
GRAPH_REPLAY = "(graph replay: {})"  # what stands where a graph kernel's CPU op would
_BATCHED = ("aten::bmm", "aten::baddbmm")  # M is per matrix of the batch


class CompletenessRules(msgspec.Struct, forbid_unknown_fields=True):
    version: int
    warn_pct: float
    kernel_launch: list[str]
    copy_launch: list[str]
    graph_launch: str
    gemm_m: dict[str, int]


@functools.lru_cache(maxsize=1)
def rules() -> CompletenessRules:
    try:
        r = schema.convert(schema.read(RULES_PATH, "completeness rules"), CompletenessRules)
        for p in [*r.kernel_launch, *r.copy_launch, r.graph_launch]:
            re.compile(p)
    except (schema.Invalid, re.error) as e:  # a broken installation, not a user's input
        raise TraceviewError(f"{RULES_PATH}: {e}") from None
    return r


def _matches(names: pd.Series, patterns: list[str]) -> np.ndarray:
    """Whether each name matches one of ``patterns`` in full, worked out once per distinct name."""
    rx = re.compile("|".join(f"(?:{p})" for p in patterns))
    cats = names.astype("category")
    hit = np.array([bool(rx.fullmatch(str(c))) for c in cats.cat.categories] + [False])
    codes = cats.cat.codes.to_numpy()
    return hit[np.where(codes < 0, len(hit) - 1, codes)]


def graph_replays(k: pd.DataFrame) -> np.ndarray:
    """Which GPU activities were launched by a graph launch (``cudaGraphLaunch``)."""
    if not len(k) or "launch_name" not in k.columns:
        return np.zeros(len(k), dtype=bool)
    return _matches(k["launch_name"], [rules().graph_launch]) & (k["launch"].to_numpy() >= 0)


def _launches(trace) -> pd.DataFrame:
    """The runtime launch calls of the file: ``api``, ``kind`` (kernel/copy), ``lost`` (no GPU
    activity links to it). A driver call under a runtime call of the same correlation is the same
    launch (``link`` links activities to the runtime call), so it is left out."""
    ev = trace.events
    rt = ev[(ev["role"] == "runtime").to_numpy()]
    r = rules()
    is_kernel, is_copy = _matches(rt["name"], r.kernel_launch), _matches(rt["name"], r.copy_launch)
    rt = rt[is_kernel | is_copy].assign(kind=np.where(is_kernel, "kernel", "copy")[is_kernel | is_copy])
    driver = (rt["cat"].astype(str).str.lower() == "cuda_driver").to_numpy()
    corr = rt["correlation"]
    covered = corr.isin(set(corr[~driver].dropna())).to_numpy()
    rt = rt[~(driver & covered)]
    linked = trace.kernels["launch"].to_numpy()
    return pd.DataFrame(
        {
            "api": rt["name"].astype(str).to_numpy(),
            "kind": rt["kind"].to_numpy(),
            "lost": ~np.isin(rt.index.to_numpy(), linked[linked >= 0]),
        }
    )


def by_api(trace) -> pd.DataFrame:
    """Per launch API: launches, how many have no GPU activity in the file, and their share."""
    lw = _launches(trace)
    g = lw.groupby(["api", "kind"], sort=True)["lost"]
    out = pd.DataFrame({"launches": g.size(), "without_gpu": g.sum().astype(np.int64)}).reset_index()
    out["without_gpu_pct"] = 100.0 * out["without_gpu"] / out["launches"]
    return out.sort_values(["without_gpu", "launches"], ascending=False, kind="stable").reset_index(drop=True)


def completeness(trace) -> dict:
    """The completeness figures of one trace file (see docs/metrics.md), and ``warning``: one line
    when the kernel launches without GPU activity or the activities without launch reach
    ``warn_pct``, else None. Worked out once per loaded trace (summary, diff and compare each ask
    for the table and the warning)."""
    return dict(memo(trace, "completeness", _completeness))


def _completeness(trace) -> dict:
    apis, k = by_api(trace), trace.kernels
    kern = apis[apis["kind"] == "kernel"]
    n_launch, n_lost = int(kern["launches"].sum()), int(kern["without_gpu"].sum())
    no_launch = int((k["launch"].to_numpy() < 0).sum()) if len(k) else 0
    graph = graph_replays(k)
    dur = np.clip(k["dur_ns"].to_numpy(), 0, None) if len(k) else np.zeros(0, np.int64)
    out = {
        "kernel_launches": n_launch,
        "launches_without_gpu": n_lost,
        "launches_without_gpu_pct": _pct(n_lost, n_launch),
        "copy_launches_without_gpu": int(apis.loc[apis["kind"] == "copy", "without_gpu"].sum()),
        "gpu_activities": len(k),
        "activities_without_launch": no_launch,
        "activities_without_launch_pct": _pct(no_launch, len(k)),
        "graph_replays": int(graph.sum()),
        "graph_replay_pct_of_gpu_time": _pct(int(dur[graph].sum()), int(dur.sum())),
        # by launch API, kernel and copy calls alike (table launches has the counts by API)
        "without_gpu_by_api": ", ".join(
            f"{a} {n:,}" for a, n in zip(apis["api"], apis["without_gpu"], strict=True) if n
        ),
    }
    out["warning"] = _warning(trace.label, out, kern)
    return out


def _pct(part: int, whole: int) -> float:
    return 100.0 * part / whole if whole else 0.0


def _warning(label: str, c: dict, kern: pd.DataFrame) -> str | None:
    limit = rules().warn_pct
    parts = []
    if c["launches_without_gpu"] and c["launches_without_gpu_pct"] >= limit:
        lost = kern[kern["without_gpu"] > 0]
        which = ", ".join(f"{a} {n:,}" for a, n in zip(lost["api"], lost["without_gpu"], strict=True))
        parts.append(
            f"{c['launches_without_gpu']:,} of {c['kernel_launches']:,} kernel launches "
            f"({c['launches_without_gpu_pct']:.0f}%) have no GPU activity in the file ({which})"
        )
    if c["activities_without_launch"] and c["activities_without_launch_pct"] >= limit:
        parts.append(
            f"{c['activities_without_launch']:,} of {c['gpu_activities']:,} GPU activities "
            f"({c['activities_without_launch_pct']:.0f}%) have no launch in the file"
        )
    if not parts:
        return None
    return f"{label} is incomplete: " + "; ".join(parts) + _consequence(c)


def _consequence(c: dict) -> str:
    """What the missing part does to the figures: lost GPU work makes times and counts too low;
    GPU work whose launch was not recorded is all there but tied to no CPU op."""
    lost = c["launches_without_gpu"] and c["launches_without_gpu_pct"] >= rules().warn_pct
    unlaunched = c["activities_without_launch"] and c["activities_without_launch_pct"] >= rules().warn_pct
    out = []
    if lost:
        out.append("its GPU times and counts are too low, every figure below is measured on partial data")
    if unlaunched:
        out.append("the activities without a launch are tied to no CPU op, so per-op figures miss them")
    return ": " + "; ".join(out)


def completeness_table(sides) -> pd.DataFrame:
    """``sides``: (label, trace) pairs. One row each: the completeness figures (no warning text)."""
    rows = []
    for label, t in sides:
        rows.append({"trace": label, **{k: v for k, v in completeness(t).items() if k != "warning"}})
    return pd.DataFrame(rows)


# ------------------------------------------------------------------ the work a region ran


def workload(r: Region) -> dict:
    """Per step: ``flops`` and ``bytes`` of the region's counted ops (None without shapes),
    ``shapes`` (the set of (op, Input Dims) of those that carry FLOPs), ``gemm_m`` (M -> op count) and
    ``gemm_m_by_op`` ((op, M) -> op count)."""
    t = r.trace
    if not len(r.ops) or not has_shapes(t.ops):
        return {"flops": None, "bytes": None, "shapes": None, "gemm_m": {}, "gemm_m_by_op": {}}
    w = trace_work(t).loc[r.ops.index]
    ops = r.ops[w["counted"].to_numpy()]
    w = w[w["counted"].to_numpy()]
    # the shapes of the ops that carry FLOPs (matrix products, convolutions, attention): an
    # elementwise op made in-place or fused is a change of code, not of the work asked for
    fl = (w["flops"].fillna(0) > 0).to_numpy()
    shapes = set(zip(ops["name"].astype(str)[fl], ops["input_dims"][fl].map(_text), strict=True))
    return {
        "flops": int(w["flops"].fillna(0).sum()) / r.regions,
        "bytes": int(w["bytes_moved"].fillna(0).sum()) / r.regions,
        "shapes": shapes,
        "gemm_m_by_op": (by_op := _gemm_m(ops)),
        "gemm_m": _m_of(by_op, {n for n, _ in by_op}),
    }


def _text(dims) -> str:
    return json.dumps(dims) if isinstance(dims, list) else str(dims)


def _gemm_m(ops: pd.DataFrame) -> dict:
    """(op name, M) -> how many matrix-product ops had it (M: rows of the left operand)."""
    at = rules().gemm_m
    pick = ops[ops["name"].astype(str).isin(at)]
    out: dict = {}
    for name, dims in zip(pick["name"].astype(str), pick["input_dims"], strict=True):  # a few ops
        i = at[name]
        shape = dims[i] if isinstance(dims, list) and len(dims) > i else None
        if isinstance(shape, list) and len(shape) >= 2:
            m = int(np.prod(shape[-2:-1] if name in _BATCHED else shape[:-1]))
            out[(name, m)] = out.get((name, m), 0) + 1
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

        parts = []
        if got["launches_without_gpu"] and got["launches_without_gpu_pct"] >= rules().warn_pct:
            parts.append(
                f"{cell('launches_without_gpu', 'count')} of {cell('kernel_launches', 'count')} kernel "
                f"launches ({cell('launches_without_gpu_pct', 'pct')}) have no GPU activity in the file"
            )
        if got["activities_without_launch"] and got["activities_without_launch_pct"] >= rules().warn_pct:
            parts.append(
                f"{cell('activities_without_launch', 'count')} of {cell('gpu_activities', 'count')} GPU "
                f"activities ({cell('activities_without_launch_pct', 'pct')}) have no launch in the file"
            )
        name = c("completeness", row, "trace", label, "text")
        out.append(c.finding(f"{name} is incomplete: " + "; ".join(parts) + _consequence(got)))
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
