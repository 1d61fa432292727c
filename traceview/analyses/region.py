"""One trace narrowed to the regions diff and compare look at, and per-step tables of it.

A region is every ProfilerStep, one step, or every span of an annotation; every
count and time is divided by the number of regions, so a 5-step trace compares
with a 3-step one. Each kernel keeps the chain of CPU ops that launched it
(outermost op first, ``aten::masked_fill → aten::clone → aten::copy_``).
"""
from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
import pandas as pd

from ..errors import TraceviewError
from ..model import step_numbers
from .names import gemm_family, normalise_kernel_name
from .select import Selection, annotation_spans, inside, select_kernels

ARROW = " → "
NO_OP = "(no CPU op)"

# ------------------------------------------------------------------ attention

#: CPU op names of PyTorch's scaled_dot_product_attention backends -> backend
SDPA_OPS = {
    "aten::_scaled_dot_product_attention_math": "math",
    "aten::_scaled_dot_product_attention_math_for_mps": "math",
    "aten::_scaled_dot_product_flash_attention": "flash",
    "aten::_flash_attention_forward": "flash",
    "aten::_scaled_dot_product_flash_attention_for_cpu": "flash (cpu)",
    "aten::_scaled_dot_product_efficient_attention": "mem_efficient",
    "aten::_efficient_attention_forward": "mem_efficient",
    "aten::_scaled_dot_product_cudnn_attention": "cudnn",
    "aten::_scaled_dot_product_fused_attention_overrideable": "overrideable",
}
BACKEND_WORDS = {
    "flash": "flash backend", "mem_efficient": "memory-efficient backend", "cudnn": "cuDNN backend",
    "math": "math backend", "flash (cpu)": "CPU flash backend", "flash_attn": "FlashAttention",
}


# ------------------------------------------------------------------ one side's region


@dataclass
class Side:
    """One trace narrowed to the selected regions, with everything diff/compare need."""

    trace: object
    kernels: pd.DataFrame   # GPU activities in the regions (classified)
    ops: pd.DataFrame       # CPU ops in the regions (ProfilerStep ops left out), with ``chain``
    regions: int            # the per-step divisor
    region_kind: str        # "step", "steps", "annotation", "trace"
    cpu_wall_ns: int        # total wall time of the regions on the CPU
    left_out: int = 0       # GPU activities outside every step (left out)
    notes: list = field(default_factory=list)

    @property
    def label(self) -> str:
        return self.trace.label

    @property
    def has_gpu(self) -> bool:
        return len(self.kernels) > 0

    def per(self, value) -> float:
        return float(value) / self.regions

    # per-step numbers -------------------------------------------------------
    @property
    def kernels_per_step(self) -> float:
        return self.per(len(self.kernels))

    @property
    def gpu_ns_per_step(self) -> float:
        return self.per(self.kernels["dur_ns"].clip(lower=0).sum())

    @property
    def launches_per_step(self) -> float:
        launch = self.kernels["launch"].to_numpy()
        return self.per(len(np.unique(launch[launch >= 0])))

    @property
    def cpu_ops_per_step(self) -> float:
        return self.per(len(self.ops))

    @property
    def cpu_time_per_step_ns(self) -> float:
        return self.per(self.cpu_wall_ns)

    @property
    def cpu_op_time_per_step_ns(self) -> float:
        top = self.ops[self.ops["outer"]]
        return self.per(top["dur_ns"].clip(lower=0).sum())


def region(trace, sel: Selection | None = None) -> Side:
    """Narrow ``trace`` to the selection and work out the per-step divisor."""
    sel = sel or Selection()
    steps = trace.steps
    _check_step(trace, steps, sel.step)
    k = _selected_kernels(trace, sel)
    ops = ops_with_chains(trace)
    ops = ops[~ops["is_step"]]
    if sel.step is not None:
        cut = _one_step(trace, steps, sel, k, ops)
    elif sel.annotation is not None:
        cut = _annotated(trace, sel.annotation, k, ops)
    elif len(steps):
        cut = _every_step(trace, steps, k, ops)
    else:
        cut = _whole_trace(trace, k, ops)
    kept = set(cut.ops.index)
    parent = cut.ops["parent"].to_numpy()
    ops = cut.ops.assign(outer=~pd.Series(parent, index=cut.ops.index).isin(kept).to_numpy())
    return Side(trace=trace, kernels=cut.kernels, ops=ops, regions=max(int(cut.regions), 1),
                region_kind=cut.kind, cpu_wall_ns=cut.wall, left_out=cut.left_out, notes=list(cut.notes))


class _Cut(NamedTuple):
    """What one kind of region keeps of a trace, before the outermost ops are marked."""

    kernels: pd.DataFrame
    ops: pd.DataFrame
    regions: int
    kind: str
    wall: int
    left_out: int = 0
    notes: tuple = ()


def _check_step(trace, steps: pd.DataFrame, step: int | None) -> None:
    if step is None:
        return
    if not len(steps):
        raise TraceviewError(f"{trace.path}: has no ProfilerStep#N spans; --step cannot apply")
    if step not in set(steps["step"].tolist()):
        listing = ", ".join(map(str, sorted(steps["step"].tolist())[:10]))
        raise TraceviewError(f"{trace.path}: has no step {step} (steps: {listing})")


def _selected_kernels(trace, sel: Selection) -> pd.DataFrame:
    """The GPU activities matching every part of ``sel`` but the step."""
    if sel.annotation is not None:
        annotation_spans(trace, sel.annotation)  # raises when the annotation is absent
    if not len(trace.kernels):
        return trace.kernels
    return select_kernels(trace, Selection(None, sel.annotation, sel.device, sel.stream))


def _one_step(trace, steps, sel: Selection, k, ops) -> _Cut:
    span = steps[steps["step"] == sel.step].iloc[0]
    k = k[(k["step"] == sel.step).fillna(False).to_numpy()]
    ops = ops[(ops["step"] == sel.step).fillna(False).to_numpy()]
    wall = int(span["dur_ns"])
    if sel.annotation is not None:
        spans = annotation_spans(trace, sel.annotation)
        in_step = (spans["ts_ns"] >= span["ts_ns"]) & (spans["ts_ns"] < span["ts_ns"] + span["dur_ns"])
        wall = int(spans.loc[in_step, "dur_ns"].clip(lower=0).sum())
        ops = ops[inside(ops["ts_ns"].to_numpy(), spans)]
    return _Cut(k, ops, 1, "step", wall)


def _annotated(trace, name: str, k, ops) -> _Cut:
    spans = annotation_spans(trace, name)
    ops = ops[inside(ops["ts_ns"].to_numpy(), spans)]
    return _Cut(k, ops, len(spans), "annotation", int(spans["dur_ns"].clip(lower=0).sum()))


def _every_step(trace, steps, k, ops) -> _Cut:
    stepped = k["step"].notna().to_numpy()
    left_out = int((~stepped).sum())
    notes = ()
    if left_out:
        notes = (f"{trace.label}: {left_out} GPU activities launched outside every ProfilerStep "
                 "are left out of the per-step numbers",)
    return _Cut(k[stepped], ops[ops["step"].notna().to_numpy()], len(steps), "steps",
                int(steps["dur_ns"].clip(lower=0).sum()), left_out, notes)


def _whole_trace(trace, k, ops) -> _Cut:
    starts = ops["ts_ns"].to_numpy()
    ends = starts + ops["dur_ns"].clip(lower=0).to_numpy()
    wall = int(ends.max() - starts.min()) if len(ops) else 0
    note = f"{trace.label}: no ProfilerStep#N spans; the whole trace counts as one step"
    return _Cut(k, ops, 1, "trace", wall, 0, (note,))


def ops_with_chains(trace) -> pd.DataFrame:
    """trace.ops plus ``is_step`` and ``chain`` (op names from the outermost op down, steps left out)."""
    cached = trace.__dict__.get("_tv_op_chains")
    if cached is not None and len(cached) == len(trace.ops):
        return cached
    ops = trace.ops
    names = ops["name"].astype(str).to_numpy().astype(object)
    is_step = step_numbers(ops["name"]) >= 0
    parent = ops["parent"].to_numpy()
    chain = np.full(len(ops), "", dtype=object)
    for d in np.unique(ops["depth"].to_numpy()):  # one tree level at a time: parents come first
        rows = np.flatnonzero(ops["depth"].to_numpy() == d)
        above = np.where(parent[rows] >= 0, chain[np.clip(parent[rows], 0, None)], "")
        joined = np.where(above != "", above + ARROW + names[rows], names[rows])
        chain[rows] = np.where(is_step[rows], "", joined)
    dur = np.clip(ops["dur_ns"].to_numpy(), 0, None)
    child = np.bincount(parent[parent >= 0], weights=dur[parent >= 0], minlength=len(ops)) if len(ops) else dur
    out = ops.assign(is_step=is_step, chain=chain, self_ns=np.clip(dur - child, 0, None))
    try:
        trace.__dict__["_tv_op_chains"] = out
    except (AttributeError, TypeError):
        pass
    return out


def launch_chains(side: Side) -> np.ndarray:
    """For each GPU activity of the side: the CPU op chain that launched it."""
    trace = side.trace
    full = ops_with_chains(trace)
    k = side.kernels
    if not len(k):
        return np.empty(0, dtype=object)
    pos = np.full(len(trace.events), -1, dtype=np.int64)
    pos[full["event"].to_numpy()] = np.arange(len(full))
    op_event = k["op_event"].to_numpy()
    row = np.where(op_event >= 0, pos[np.clip(op_event, 0, None)], -1)
    chains = full["chain"].to_numpy()
    out = np.where(row >= 0, chains[np.clip(row, 0, None)], NO_OP)
    return np.where(out == "", NO_OP, out)


def kernel_keys(k: pd.DataFrame) -> np.ndarray:
    names = k["name"]
    if isinstance(names.dtype, pd.CategoricalDtype):
        cats = np.array([normalise_kernel_name(str(c)) for c in names.cat.categories] + [""], dtype=object)
        codes = names.cat.codes.to_numpy()
        return cats[np.where(codes < 0, len(cats) - 1, codes)]
    return np.array([normalise_kernel_name(str(n)) for n in names], dtype=object)


# ------------------------------------------------------------------ per-side tables


def by_kernel(side: Side) -> pd.DataFrame:
    """Per normalised kernel name: count and time per step, category, an example name, launching chain."""
    cols = ["key", "count", "time_ns", "category", "kind", "example", "launched_by", "chains"]
    k = side.kernels
    if not len(k):
        return pd.DataFrame({c: pd.Series(dtype=object) for c in cols})
    f = pd.DataFrame({
        "key": kernel_keys(k), "name": k["name"].astype(str).to_numpy(),
        "dur": k["dur_ns"].clip(lower=0).to_numpy(), "category": k["category"].astype(str).to_numpy(),
        "kind": k["kind"].astype(str).to_numpy(), "chain": launch_chains(side),
    })
    g = f.groupby("key", sort=False)
    out = pd.DataFrame({"count": g.size() / side.regions, "time_ns": g["dur"].sum() / side.regions})
    out["category"] = g["category"].agg(_mode)
    out["kind"] = g["kind"].first()
    out["example"] = g["name"].agg(_mode)
    pairs = f.groupby(["key", "chain"], sort=False).size().reset_index(name="n")
    pairs = pairs.sort_values(["key", "n"], ascending=[True, False], kind="stable")
    out["launched_by"] = pairs.drop_duplicates("key").set_index("key")["chain"]
    out["chains"] = pairs.groupby("key").size()
    return out.reset_index().rename(columns={"index": "key"})[cols]


def _mode(s: pd.Series):
    return s.value_counts().index[0]


def category_times(side: Side) -> pd.DataFrame:
    """Per kernel category: count and GPU time per step."""
    return _count_and_time(side.kernels, "category", side.regions)


def _count_and_time(frame: pd.DataFrame, column: str, regions: int) -> pd.DataFrame:
    if not len(frame):
        return pd.DataFrame({"count": pd.Series(dtype=float), "time_ns": pd.Series(dtype=float)})
    g = frame.groupby(frame[column].astype(str).to_numpy())["dur_ns"]
    return pd.DataFrame({"count": g.size() / regions, "time_ns": g.sum().clip(lower=0) / regions})


def gemm_stats(side: Side) -> dict:
    """GEMM time per step, tensor-core share, families by time."""
    k = side.kernels
    g = k[(k["category"].astype(str) == "gemm").to_numpy()] if len(k) else k
    total = float(g["dur_ns"].clip(lower=0).sum()) if len(g) else 0.0
    out = {"gemm_time_ns": total / side.regions, "gemm_kernels": len(g) / side.regions,
           "gemm_pct": 100.0 * total / (side.gpu_ns_per_step * side.regions) if side.has_gpu and side.gpu_ns_per_step
           else float("nan"),
           "tensor_core_pct": float("nan"), "families": {}, "dominant_family": None}
    if not len(g):
        return out
    tc = g["tensor_core"]
    known = tc.notna().to_numpy()
    dur = g["dur_ns"].clip(lower=0).to_numpy()
    known_ns = dur[known].sum()
    if known_ns > 0:
        out["tensor_core_pct"] = 100.0 * dur[known & tc.fillna(False).to_numpy(dtype=bool)].sum() / known_ns
    fam = pd.Series(dur, index=[gemm_family(str(n)) for n in g["name"].astype(str)])
    fam = fam.groupby(level=0).sum().sort_values(ascending=False)
    out["families"] = {f: 100.0 * v / total if total else 0.0 for f, v in fam.items()}
    out["dominant_family"] = fam.index[0] if len(fam) else None
    return out


def attention_stats(side: Side) -> dict:
    """Fused attention kernels by backend (count/time per step, main kernel), and SDPA CPU ops."""
    k = side.kernels
    backends: dict = {}
    if len(k):
        a = k[(k["category"].astype(str) == "attention").to_numpy()]
        if len(a):
            be = a["attention_backend"].astype(object).where(a["attention_backend"].notna(), "fused (unknown)")
            for b, grp in a.groupby(be.astype(str).to_numpy(), sort=False):
                backends[b] = {"count": len(grp) / side.regions,
                               "time_ns": float(grp["dur_ns"].clip(lower=0).sum()) / side.regions,
                               "kernel": _mode(grp["name"].astype(str)), "distinct": grp["name"].nunique()}
    names = side.ops["name"].astype(str)
    sdpa = [n for n in dict.fromkeys(names[names.isin(list(SDPA_OPS))])]
    sdpa_backends = list(dict.fromkeys(SDPA_OPS[n] for n in sdpa))
    return {"kernels": backends, "sdpa_ops": sdpa, "sdpa_backends": sdpa_backends}


def attention_label(stats: dict) -> str:
    """One word per side: the fused kernels' backend(s), else the SDPA op's backend, else "none"."""
    if stats["kernels"]:
        return ", ".join(stats["kernels"])
    if stats["sdpa_backends"]:
        return ", ".join(stats["sdpa_backends"])
    return "none"


def op_table(side: Side) -> pd.DataFrame:
    """Per CPU op name: count and inclusive CPU time per step."""
    return _count_and_time(side.ops, "name", side.regions)


def chain_table(side: Side) -> pd.DataFrame:
    o = side.ops
    if not len(o):
        return pd.DataFrame({"op": pd.Series(dtype=object), "count": pd.Series(dtype=float),
                             "time_ns": pd.Series(dtype=float)})
    g = o.groupby(o["chain"].to_numpy())
    out = pd.DataFrame({"op": g["name"].first().astype(str), "count": g.size() / side.regions,
                        "time_ns": g["dur_ns"].sum().clip(lower=0) / side.regions})
    return out


def breakdown(side: Side, top: int | None = 8) -> tuple[str, pd.Series]:
    """What a stacked bar of this side shows: GPU time per category per step, or (CPU-only)
    CPU self time per step (an op's time minus its child ops') by op name, the ``top`` largest
    and the rest as "other ops". Self times add up to the time spent in ops, without double counting."""
    if side.has_gpu:
        return "gpu", category_times(side)["time_ns"].sort_values(ascending=False)
    o = side.ops
    s = o.groupby(o["name"].astype(str).to_numpy())["self_ns"].sum().clip(lower=0) / side.regions
    s = s.sort_values(ascending=False)
    if top is not None and len(s) > top:
        s = pd.concat([s.iloc[:top], pd.Series({"other ops": s.iloc[top:].sum()})])
    return "cpu", s


# ------------------------------------------------------------------ naming a side


def step_word(side: Side) -> str:
    """What "per step" means for this side, in a sentence: a step, an annotated region, the trace."""
    return {"annotation": "annotated region", "trace": "trace"}.get(side.region_kind, "step")


def trace_labels(traces) -> list[str]:
    """Each trace's label; repeated labels get the file name added, then the full path."""
    labels = [t.label for t in traces]
    counts = Counter(labels)
    labels = [f"{lbl} ({os.path.basename(t.path)})" if counts[lbl] > 1 else lbl for lbl, t in zip(labels, traces)]
    if len(set(labels)) == len(labels):
        return labels
    paths = [t.path for t in traces]
    if len(set(paths)) == len(paths):
        return paths
    return [f"{lbl} #{i + 1}" for i, lbl in enumerate(labels)]  # the same file given twice
