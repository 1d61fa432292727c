"""How well each GPU kernel and op uses the hardware: achieved TFLOP/s and GB/s,
arithmetic intensity, the peak of the path it takes, percent of that peak, and
whether it is compute- or memory-bound (a roofline).

Work comes from ``work.py`` (shapes of the launching op); peaks from the device
table (``traceview.devices``). How an op's work reaches its kernels:

- a kernel belongs to the nearest *counted* op at or above the op that launched
  it (``work.counted``), so a kernel launched by a ``copy_`` inside ``addmm``
  belongs to the ``addmm``;
- a FLOP op's FLOPs and bytes are shared among its compute kernels (category
  gemm, conv or attention) in proportion to their time: a split-K GEMM and its
  reduction kernel (both category gemm) each show the op's achieved rate, and a
  layout transform or memset next to a convolution gets none; an op with no
  compute kernel shares among all its kernels, as does a bytes-only op.

The path: ``tensor`` where the kernel rules say tensor cores (or the kernel is
fused attention or a 16/8-bit GEMM whose path the rules leave open), ``vector``
(CUDA cores) where they say not (an ``sgemm``), and fp32 inputs on tensor cores
take the TF32 peak. Bytes-only kernels are measured against memory bandwidth.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..devices import trace_device
from .region import Region
from .work import counted_owner, has_shapes, memo, trace_work

#: the columns ``kernel_efficiency`` gives each GPU activity, by their one name
COLUMNS = ("flops", "bytes_moved", "tflops", "gbps", "intensity", "path", "peak_precision", "peak_tflops",
           "pct_of_peak_tflops", "pct_of_peak_gbps", "bound")
COMPUTE = ("gemm", "conv", "attention")
LOW_PRECISION = ("fp16", "bf16", "fp8", "fp4", "int8")


def kernel_work(trace) -> pd.DataFrame:
    """Per GPU activity of ``trace.kernels`` (same index): ``owner`` (ops row, -1: none),
    the FLOPs and bytes it is given, and its op's precision."""
    return memo(trace, "kernel_work", _kernel_work)


def _kernel_work(trace) -> pd.DataFrame:
    k, ops, w = trace.kernels, trace.ops, trace_work(trace)
    pos = np.full(len(trace.events), -1, dtype=np.int64)
    pos[ops["event"].to_numpy()] = np.arange(len(ops))
    op_event = k["op_event"].to_numpy()
    op_pos = np.where(op_event >= 0, pos[np.clip(op_event, 0, None)], -1)
    owners = np.append(counted_owner(ops["parent"].to_numpy(), w["counted"].to_numpy()), -1)
    owner = owners[op_pos]  # op_pos -1 (no op) picks the trailing -1
    flops = np.append(w["flops"].to_numpy(dtype=float, na_value=np.nan), np.nan)  # [-1]: no owner
    nbytes = np.append(w["bytes_moved"].to_numpy(dtype=float, na_value=np.nan), np.nan)
    share = _shares(owner, k["category"].astype(str).isin(COMPUTE).to_numpy(),
                    k["dur_ns"].clip(lower=1).to_numpy().astype(float), ~np.isnan(flops[:-1]))
    return pd.DataFrame({"owner": owner, "flops": flops[owner] * share, "bytes_moved": nbytes[owner] * share,
                         "op_precision": np.append(w["precision"].to_numpy(dtype=object), None)[owner]},
                        index=k.index)


def _shares(owner: np.ndarray, compute: np.ndarray, dur: np.ndarray, flop_op: np.ndarray) -> np.ndarray:
    """Each kernel's share of its owner op's work (0 for kernels left out, nan without owner)."""
    n_ops = len(flop_op)
    has = owner >= 0
    at = np.clip(owner, 0, None)
    compute_ns = np.bincount(owner[has], weights=(dur * compute)[has], minlength=n_ops + 1)
    use_compute = has & np.append(flop_op, False)[at] & (compute_ns[at] > 0)
    weight = np.where(use_compute, dur * compute, dur)
    total = np.bincount(owner[has], weights=weight[has], minlength=n_ops + 1)
    return np.where(has, weight / np.where(total[at] > 0, total[at], 1.0), np.nan)


def kernel_efficiency(trace, activities: pd.DataFrame | None = None, devices: str | None = None) -> pd.DataFrame:
    """``COLUMNS`` for each GPU activity (``activities``: a subset of ``trace.kernels``, e.g. a
    Region's; default all), indexed like it. Empty where the trace has no shapes."""
    k = trace.kernels if activities is None else activities
    kw = kernel_work(trace).loc[k.index]
    dur = k["dur_ns"].clip(lower=0).to_numpy().astype(float)
    dur = np.where(dur > 0, dur, np.nan)
    flops, nbytes = kw["flops"].to_numpy(), kw["bytes_moved"].to_numpy()
    out = pd.DataFrame({"flops": flops, "bytes_moved": nbytes,
                        "tflops": flops / dur / 1e3, "gbps": nbytes / dur,
                        "intensity": flops / np.where(nbytes > 0, nbytes, np.nan)}, index=k.index)
    out["path"], out["peak_precision"] = _paths(k, kw)
    device = trace_device(trace, devices)
    out["peak_tflops"] = _peaks(out["path"].to_numpy(), out["peak_precision"].to_numpy(), device)
    bw = device.memory_gbps if device else np.nan
    out["pct_of_peak_tflops"] = 100.0 * out["tflops"] / out["peak_tflops"]
    out["pct_of_peak_gbps"] = 100.0 * out["gbps"] / bw
    ridge = out["peak_tflops"] * 1e3 / bw  # FLOP/byte where the roofline bends
    bound = np.where(out["intensity"] >= ridge, "compute", "memory")
    known = ~np.isnan(out["bytes_moved"].to_numpy()) & (np.isnan(out["flops"].to_numpy()) | ~np.isnan(ridge.to_numpy()))
    known &= device is not None
    out["bound"] = np.where(known, np.where(np.isnan(out["flops"]), "memory", bound), None)
    return out[list(COLUMNS)]


def _paths(k: pd.DataFrame, kw: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """The path each kernel's work takes ("tensor", "vector", "memory", or None) and its precision."""
    precision = kw["op_precision"].to_numpy(dtype=object)
    if "precision" in k.columns:
        own = k["precision"].astype(object).to_numpy()
        precision = np.where(pd.isna(precision), own, precision)
        precision = np.where(own == "tf32", "fp32", precision)  # TF32 is the tensor path of fp32 inputs
    precision = np.where(pd.isna(precision), None, precision)
    category = k["category"].astype(str).to_numpy()
    tc = k["tensor_core"] if "tensor_core" in k.columns else pd.Series(pd.NA, index=k.index, dtype="boolean")
    on_tc, known = tc.fillna(False).to_numpy(dtype=bool), tc.notna().to_numpy()
    compute = np.isin(category, COMPUTE) & ~np.isnan(kw["flops"].to_numpy())
    open_path = ~known & ((category == "attention") | np.isin(precision.astype(str), LOW_PRECISION))
    path = np.where(on_tc | open_path, "tensor", np.where(known, "vector", None))
    path = np.where(compute, path, np.where(~np.isnan(kw["bytes_moved"].to_numpy()), "memory", None))
    return path, precision


def _peaks(path: np.ndarray, precision: np.ndarray, device) -> np.ndarray:
    out = np.full(len(path), np.nan)
    if device is None:
        return out
    for p, prec in set(zip(path.tolist(), precision.tolist())):  # a handful of distinct pairs
        if p in ("tensor", "vector") and prec is not None:
            peak = device.peak_tflops(p, prec)
            out[(path == p) & (precision == prec)] = peak if peak is not None else np.nan
    return out


# ------------------------------------------------------------------ per op


def op_efficiency(trace, activities: pd.DataFrame | None = None, devices: str | None = None) -> pd.DataFrame:
    """Per counted op that owns kernels: name, its work, the time of its kernels, and the
    achieved rates over that time (the peak: its compute kernels' time-weighted peak)."""
    k = trace.kernels if activities is None else activities
    kw = kernel_work(trace).loc[k.index]
    eff = kernel_efficiency(trace, k, devices)
    w = trace_work(trace)
    owned = kw["owner"].to_numpy() >= 0
    frame = pd.DataFrame({"owner": kw["owner"].to_numpy()[owned], "dur_ns": k["dur_ns"].clip(lower=0).to_numpy()[owned],
                          "peak_ns": (k["dur_ns"].clip(lower=0) * eff["peak_tflops"]).to_numpy()[owned]})
    g = frame.groupby("owner")
    per = pd.DataFrame({"gpu_ns": g["dur_ns"].sum(), "peak_ns": g["peak_ns"].sum(min_count=1)})
    ops = trace.ops.iloc[per.index]
    flops = w["flops"].iloc[per.index].to_numpy(dtype=float, na_value=np.nan)
    nbytes = w["bytes_moved"].iloc[per.index].to_numpy(dtype=float, na_value=np.nan)
    gpu_ns = per["gpu_ns"].to_numpy().astype(float)
    return pd.DataFrame({"op": ops["name"].astype(str).to_numpy(), "input_dims": ops["input_dims"].astype(object).to_numpy(),
                         "flops": flops, "bytes_moved": nbytes, "gpu_ns": gpu_ns.astype(np.int64),
                         "tflops": flops / gpu_ns / 1e3, "gbps": nbytes / gpu_ns,
                         "pct_of_peak_tflops": 100.0 * flops / per["peak_ns"].to_numpy() / 1e3,
                         "causal": w["causal"].iloc[per.index].to_numpy()}, index=per.index)


# ------------------------------------------------------------------ region metrics


def _category_rate(r: Region, category: str, devices: str | None = None) -> tuple[float, float]:
    """(achieved TFLOP/s, percent of the time-weighted peak) of one category's kernels with FLOPs."""
    a = r.activities
    if not len(a) or not has_shapes(r.trace.ops):
        return float("nan"), float("nan")
    a = a[(a["category"].astype(str) == category).to_numpy()]
    eff = kernel_efficiency(r.trace, a, devices)
    has = eff["flops"].notna().to_numpy()
    dur = a["dur_ns"].clip(lower=0).to_numpy()[has].astype(float)
    if not has.any() or dur.sum() <= 0:
        return float("nan"), float("nan")
    flops = eff["flops"].to_numpy()[has]
    peak = eff["peak_tflops"].to_numpy()[has]
    known = ~np.isnan(peak)
    pct = 100.0 * flops[known].sum() / (dur[known] * peak[known]).sum() / 1e3 if known.any() else float("nan")
    return float(flops.sum() / dur.sum() / 1e3), float(pct)


def gemm_tflops(r: Region, devices: str | None = None) -> float:
    """Achieved TFLOP/s of the region's GEMM kernels that have FLOPs (their FLOPs over their time)."""
    return _category_rate(r, "gemm", devices)[0]


def gemm_pct_of_peak(r: Region, devices: str | None = None) -> float:
    """GEMM FLOPs as a percent of what the GEMM kernels' paths could do in their time."""
    return _category_rate(r, "gemm", devices)[1]


def attention_tflops(r: Region, devices: str | None = None) -> float:
    """Achieved TFLOP/s of the region's fused attention kernels that have FLOPs."""
    return _category_rate(r, "attention", devices)[0]


def attention_pct_of_peak(r: Region, devices: str | None = None) -> float:
    """Fused attention FLOPs as a percent of what their paths could do in their time."""
    return _category_rate(r, "attention", devices)[1]


def efficiency(r: Region, devices: str | None = None) -> dict:
    """The region's efficiency metrics by their one name."""
    return {"gemm_tflops": gemm_tflops(r, devices), "gemm_pct_of_peak": gemm_pct_of_peak(r, devices),
            "attention_tflops": attention_tflops(r, devices),
            "attention_pct_of_peak": attention_pct_of_peak(r, devices)}


def efficiency_notes(trace, devices: str | None = None) -> list[str]:
    """What limits the efficiency columns, said once per trace."""
    notes = []
    if not has_shapes(trace.ops):
        notes.append(f"{trace.label}: recorded without shapes (record_shapes=False): FLOPs, bytes and "
                     "efficiency columns are left empty")
    elif len(trace.kernels) and trace_device(trace, devices) is None:
        which = f"device {trace.device_name!r} is not in the device table" if trace.device_name \
            else "names no device (no deviceProperties)"
        notes.append(f"{trace.label}: {which}: percent of peak is left empty (add the device with --devices)")
    return notes
