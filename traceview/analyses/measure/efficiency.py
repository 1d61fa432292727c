"""How well each GPU kernel and op uses the hardware: achieved TFLOP/s and GB/s,
arithmetic intensity, the peak of the path it takes, percent of that peak, and
whether it is compute- or memory-bound (a roofline).

Work comes from ``work.py`` (shapes of the launching op); peaks from the device
table (``traceview.devices``). How an op's work reaches its kernels:

- a kernel belongs to the nearest *counted* op at or above the op that launched
  it (``work.counted``), so a kernel launched by a ``copy_`` inside ``addmm``
  belongs to the ``addmm``;
- helper kernels (``[helpers]`` in rules/work.toml: split-K and gemv reductions,
  GEMM epilogues, transposes, cuDNN transforms, memsets) do none of the op's
  arithmetic, so they get no share of its work and show no rate;
- a FLOP op's FLOPs and bytes are shared among its compute kernels (category
  gemm, conv or attention, helpers left out) in proportion to their time; an op
  with no such kernel shares among its other non-helper kernels, as does a
  bytes-only op (one run by helpers alone, ``zero_`` as a Memset, shares among them).

The path: ``tensor`` where the kernel rules say tensor cores (or the kernel is
fused attention or a 16/8-bit GEMM whose path the rules leave open), ``vector``
(CUDA cores) where they say not (an ``sgemm``), and fp32 inputs on tensor cores
take the TF32 peak. Bytes-only kernels are measured against memory bandwidth; a
helper's path is its rule's (``tensor_core``), never guessed from the op.

One time base per row: an op's or a kernel name's ``peak_tflops`` is the time-weighted
peak of its kernels whose peak is known, and ``pct_of_peak_tflops`` is always
``100 * tflops / peak_tflops`` (``rated``).
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pandas as pd

from ... import cache
from ...devices import trace_device
from ...model import list_codes
from ..select.region import Region
from ..wording.words import Cite
from .completeness import graph_replays
from .derived import is_text, kept_for_region, kept_for_trace, of_region, of_trace
from .work import counted_owner, shapes_recorded, trace_work
from .work import rules as work_rules

#: the columns ``kernel_efficiency`` gives each GPU activity, by their one name
COLUMNS = (
    "flops",
    "bytes_moved",
    "tflops",
    "gbps",
    "intensity",
    "path",
    "peak_precision",
    "peak_tflops",
    "pct_of_peak_tflops",
    "pct_of_peak_gbps",
    "bound",
)
COMPUTE = ("gemm", "conv", "attention")
LOW_PRECISION = ("fp16", "bf16", "fp8", "fp4", "int8")
#: below this percent of both the compute and the bandwidth peak a kernel is ``latency``-bound:
#: neither roof explains its time. Data-sheet peaks are not attainable (good GEMMs reach 60-75 %
#: of dense tensor peak, streaming copies 80-90 % of bandwidth), so under 20 % of both a kernel
#: uses at most about a quarter of what either roof allows; its time goes to launch, waves'
#: tails, synchronisation or too little parallelism. (Nsight Compute flags latency issues under
#: 60 % of its measured speed of light; against data-sheet peaks that would call most GEMMs so.)
LATENCY_PCT = 20.0


#: the codes of the kept table's text columns (``_rates``: categoricals; -1 is None)
PATHS = ("tensor", "vector", "memory")
BOUNDS = ("compute", "memory", "latency")
_PATH = pd.CategoricalDtype(list(PATHS))
_BOUND = pd.CategoricalDtype(list(BOUNDS))
_BOUND_TEXT = np.array([*BOUNDS, None], dtype=object)  # a code -1 picks the trailing None


def kernel_work(trace) -> pd.DataFrame:
    """Per GPU activity of ``trace.kernels`` (same index): ``owner`` (ops row, -1: none),
    the FLOPs and bytes it is given, its op's precision (a categorical) and whether it is a
    ``helper``."""
    return kept_for_trace(trace, "kernel_work", _kernel_work)


def _kernel_work(trace) -> pd.DataFrame:
    k, ops, w = trace.kernels, trace.ops, trace_work(trace)
    op_pos = _op_rows(k["op_event"].to_numpy(), ops["event"].to_numpy())
    owner = np.full(len(op_pos), -1, dtype=np.int64)  # walked up from the launching ops alone
    launched = op_pos >= 0
    owner[launched] = counted_owner(ops["parent"].to_numpy(), w["counted"].to_numpy(), op_pos[launched])
    # the owners' rows only (an op row -1 takes a missing value), converted as the whole column would be
    flops = w["flops"].array.take(owner, allow_fill=True).to_numpy(dtype=float, na_value=np.nan)
    nbytes = w["bytes_moved"].array.take(owner, allow_fill=True).to_numpy(dtype=float, na_value=np.nan)
    helper = helpers(k)
    share = _shares(
        owner,
        k["category"].isin(COMPUTE).to_numpy(dtype=bool),
        helper,
        np.maximum(k["dur_ns"].to_numpy(), 1).astype(float),
        ~np.isnan(flops),
    )
    precision = _coded(w["precision"])
    return pd.DataFrame(
        {
            "owner": owner,
            "flops": flops * share,
            "bytes_moved": nbytes * share,
            "op_precision": pd.Categorical.from_codes(_take(precision.codes, owner), dtype=precision.dtype),
            "helper": helper,
        },
        index=k.index,
    )


def _take(values: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """``values[rows]``, -1 where a row is -1 (none; it reads the last value, which is not kept)."""
    if not len(values):
        return np.full(len(rows), -1, dtype=values.dtype)
    return np.where(rows >= 0, values[rows], -1).astype(values.dtype, copy=False)


def _op_rows(op_event: np.ndarray, ops_event: np.ndarray) -> np.ndarray:
    """Each activity's launching op's row in the ops (-1: launched by no op): a search of the ops'
    event numbers (in event order already, as the link layer makes them; else sorted first)."""
    order = None
    if len(ops_event) > 1 and not (ops_event[1:] >= ops_event[:-1]).all():
        order = np.argsort(ops_event, kind="stable")
        ops_event = ops_event[order]
    if not len(ops_event):
        return np.full(len(op_event), -1, dtype=np.int64)
    at = np.searchsorted(ops_event, op_event, side="right") - 1  # an event twice: its last op row
    found = (op_event >= 0) & (at >= 0) & (ops_event[np.clip(at, 0, None)] == op_event)
    rows = at if order is None else order[np.clip(at, 0, None)]
    return np.where(found, rows, -1)


def _coded(col: pd.Series) -> pd.Categorical:
    """``col`` as a categorical (its own when it is one): codes to take and compare, a few texts."""
    if isinstance(col.dtype, pd.CategoricalDtype):
        return col.array
    return pd.Categorical(col.to_numpy(dtype=object))


def helpers(k: pd.DataFrame) -> np.ndarray:
    """Which activities are helper kernels (rules/work.toml ``[helpers]``: by rule id or category)."""
    h = work_rules()["helpers"]
    out = k["category"].isin(h["categories"]).to_numpy(dtype=bool)
    if "rule" in k.columns:
        out = out | k["rule"].isin(h["rules"]).to_numpy(dtype=bool)
    return out


def _shares(
    owner: np.ndarray, compute: np.ndarray, helper: np.ndarray, dur: np.ndarray, flop: np.ndarray
) -> np.ndarray:
    """Each kernel's share of its owner op's work (nan for kernels left out and without owner):
    by time among the op's compute kernels, else its other non-helper kernels; helpers get
    a share only of a bytes-only op that has nothing else (they are its work then). ``flop``:
    whether the kernel's owner has FLOPs."""
    has = owner >= 0
    at = np.clip(owner, 0, None)
    bins = int(at.max(initial=0)) + 1

    def per_op(weight: np.ndarray) -> np.ndarray:  # each kernel's op's sum of ``weight``
        return np.bincount(owner[has], weights=weight[has], minlength=bins)[at]

    main = dur * ~helper
    weight = np.where(flop & (per_op(main * compute) > 0), main * compute, main)
    weight = np.where(~flop & (per_op(main) == 0), dur, weight)
    total = per_op(weight)
    return np.where(has & (weight > 0), weight / np.where(total > 0, total, 1.0), np.nan)


def kernel_efficiency(trace, activities: pd.DataFrame | None = None) -> pd.DataFrame:
    """``COLUMNS`` for each GPU activity (``activities``: a subset of ``trace.kernels``, e.g. a
    Region's; default all), indexed like it. Empty where the trace has no shapes. Every column is
    a function of its own row, so the whole trace's table is worked out once and cut. ``path``,
    ``peak_precision`` and ``bound`` are texts (None: none); the analyses here read the kept
    table's codes instead (``_rates``)."""
    every = of_trace(trace, "kernel_efficiency", lambda t: _as_texts(_rates(t)))
    return every if activities is None else every.loc[activities.index]


def _as_texts(rates: pd.DataFrame) -> pd.DataFrame:
    """``rates`` with its categoricals as object columns of texts and None, typed as pandas types
    such a column (a text column when it holds a text)."""
    cols = {}
    for c in COLUMNS:
        col = rates[c]
        if isinstance(col.dtype, pd.CategoricalDtype):
            words = np.array([*col.cat.categories.tolist(), None], dtype=object)
            cols[c] = words[col.array.codes]  # a code -1 picks the trailing None
        else:
            cols[c] = col.to_numpy()
    return pd.DataFrame(cols, index=rates.index)


def _rates(trace) -> pd.DataFrame:
    """``COLUMNS`` of every GPU activity, ``path``, ``peak_precision`` and ``bound`` as categoricals;
    kept in a cached trace's entry where its peaks are the built-in device table's (a user's
    table, ``devices=``, is a file the entry's key does not cover)."""
    if getattr(trace, "devices", None) is not None:
        return of_trace(trace, "kernel_rates", _kernel_rates)
    return of_trace(
        trace, "kernel_rates", lambda t: cache.derived_frame(t, "kernel_efficiency", _kernel_rates)
    )


def _rows(trace, frame: pd.DataFrame) -> np.ndarray:
    """The rows of ``trace.kernels`` that ``frame`` (a cut of it: a Region's activities) holds."""
    k = trace.kernels
    if frame is k:
        return np.arange(len(k))
    rows = k.index.get_indexer(frame.index)
    if (rows < 0).any():
        raise KeyError(f"{int((rows < 0).sum())} activities are not rows of the trace's kernels")
    return rows


def _kernel_rates(trace) -> pd.DataFrame:
    k, kw = trace.kernels, kernel_work(trace)
    if not kw.index.equals(k.index):
        kw = kw.loc[k.index]
    dur = k["dur_ns"].to_numpy()
    dur = np.where(dur > 0, dur.astype(float), np.nan)
    flops, nbytes = kw["flops"].to_numpy(), kw["bytes_moved"].to_numpy()
    tflops = flops / dur / 1e3
    gbps = nbytes / dur
    intensity = flops / np.where(nbytes > 0, nbytes, np.nan)
    path, precision, texts_ = _paths(k, kw)
    device = trace_device(trace)
    peak_tflops = np.where(np.isnan(flops), np.nan, _peaks(path, precision, texts_, device))
    pct_tflops = rated(tflops, peak_tflops)  # (a helper's path has no FLOPs to rate)
    pct_gbps = 100.0 * gbps / _bandwidth(device)
    bound = _sides(flops, nbytes, intensity, peak_tflops, pct_tflops, pct_gbps, device)
    return pd.DataFrame(
        {
            "flops": flops,
            "bytes_moved": nbytes,
            "tflops": tflops,
            "gbps": gbps,
            "intensity": intensity,
            "path": pd.Categorical.from_codes(path, dtype=_PATH),
            "peak_precision": pd.Categorical.from_codes(precision, dtype=pd.CategoricalDtype(texts_)),
            "peak_tflops": peak_tflops,
            "pct_of_peak_tflops": pct_tflops,
            "pct_of_peak_gbps": pct_gbps,
            "bound": pd.Categorical.from_codes(bound, dtype=_BOUND),
        },
        index=k.index,
    )


def rated(tflops, peak_tflops):
    """Percent of peak: ``100 * tflops / peak_tflops``, the one definition every row uses (a row's
    rate and its peak over the same time); empty where the peak is unknown or 0."""
    peak = np.asarray(peak_tflops, dtype=float)
    return 100.0 * np.asarray(tflops, dtype=float) / np.where(peak > 0, peak, np.nan)


def _bound(f: pd.DataFrame, device) -> np.ndarray:
    """Roofline side per row of ``f`` (flops, bytes_moved, intensity, peak_tflops and the two
    percents) as text (``_sides``)."""
    cols = ("flops", "bytes_moved", "intensity", "peak_tflops", "pct_of_peak_tflops", "pct_of_peak_gbps")
    flops, nbytes, intensity, peak, pct_tflops, pct_gbps = (f[c].to_numpy(dtype=float) for c in cols)
    return _BOUND_TEXT[_sides(flops, nbytes, intensity, peak, pct_tflops, pct_gbps, device)]


def _sides(flops, nbytes, intensity, peak_tflops, pct_tflops, pct_gbps, device) -> np.ndarray:
    """Roofline side per row (codes of ``BOUNDS``): ``latency`` under ``LATENCY_PCT`` of both peaks
    (a share with no FLOPs counts as low), else ``compute`` at or above the ridge, ``memory`` below
    it or without FLOPs; -1 (None) without bytes, without a device, or with FLOPs but no peak."""
    ridge = peak_tflops * 1e3 / _bandwidth(device)  # FLOP/byte of the bend
    side = np.where(np.isnan(flops) | ~(intensity >= ridge), 1, 0)
    low = (np.nan_to_num(pct_tflops, nan=0.0) < LATENCY_PCT) & (pct_gbps < LATENCY_PCT)
    side = np.where(low, 2, side)
    known = ~np.isnan(nbytes) & (np.isnan(flops) | ~np.isnan(ridge)) & (device is not None)
    return np.where(known, side, -1).astype(np.int8)


def _paths(k: pd.DataFrame, kw: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, list]:
    """The path each kernel's work takes (codes of ``PATHS``, -1: None) and its precision (codes
    of the texts returned third, -1: None): the op's, else the kernel's own; TF32 is fp32's."""
    op = _coded(kw["op_precision"])
    own = _coded(k["precision"]) if "precision" in k.columns else None
    own_texts = own.categories.tolist() if own is not None else []
    texts_ = list(dict.fromkeys([*op.categories.tolist(), *own_texts, "fp32"]))
    index = {v: i for i, v in enumerate(texts_)}
    precision = np.array([index[v] for v in op.categories.tolist()] + [-1], dtype=np.int64)[op.codes]
    if own is not None:
        own_codes = np.array([index[v] for v in own_texts] + [-1], dtype=np.int64)[own.codes]
        precision = np.where(precision >= 0, precision, own_codes)
        tf32 = np.array([v == "tf32" for v in own_texts] + [False], dtype=bool)[own.codes]
        precision = np.where(tf32, index["fp32"], precision)  # TF32 is the tensor path of fp32 inputs
    low = np.array([str(v) in LOW_PRECISION for v in texts_] + [False], dtype=bool)[precision]
    tc = k["tensor_core"] if "tensor_core" in k.columns else pd.Series(pd.NA, index=k.index, dtype="boolean")
    on_tc, known = tc.fillna(False).to_numpy(dtype=bool), tc.notna().to_numpy()
    helper = kw["helper"].to_numpy()
    compute = k["category"].isin(COMPUTE).to_numpy(dtype=bool) & ~np.isnan(kw["flops"].to_numpy())
    # the op's precision may leave the path open; a helper's path is its rule's alone (no MMA: None)
    open_path = ~known & ~helper & (is_text(k["category"], "attention") | low)
    path = np.where(on_tc | open_path, 0, np.where(known, 1, -1))
    has_bytes = ~np.isnan(kw["bytes_moved"].to_numpy())
    helper_path = np.where(helper, path, -1)
    path = np.where(compute, path, np.where(has_bytes, 2, helper_path))
    return path.astype(np.int8), precision, texts_


def _peaks(path: np.ndarray, precision: np.ndarray, texts_: list, device) -> np.ndarray:
    """The device's peak TFLOP/s of each kernel's path and precision (nan: none, or 0 in a user's
    table), asked once per distinct pair."""
    if device is None:
        return np.full(len(path), np.nan)
    n = len(texts_)
    rated_rows = (path >= 0) & (path <= 1) & (precision >= 0)  # tensor or vector, with a precision
    key = np.where(rated_rows, path.astype(np.int64) * n + precision, 2 * n)
    table = np.full(2 * n + 1, np.nan)  # the last: not rated
    for pair in np.flatnonzero(np.bincount(key[rated_rows], minlength=2 * n)).tolist():
        peak = device.peak_tflops(PATHS[pair // n], texts_[pair % n])
        table[pair] = peak if peak else np.nan
    return table[key]


# ------------------------------------------------------------------ per op


def _bandwidth(device) -> float:
    """The device's memory bandwidth (GB/s); nan without a device or with a non-positive one."""
    return device.memory_gbps if device is not None and device.memory_gbps > 0 else np.nan


def _positive(values: np.ndarray) -> np.ndarray:
    """``values`` with zeros (and negatives) as nan: what a rate divides by, so a rate over zero
    time is left empty instead of inf."""
    return np.where(values > 0, values, np.nan)


def _owned(trace, k: pd.DataFrame) -> pd.DataFrame:
    """Per counted op owning kernels of ``k`` (index: its row in ``trace.ops``): ``gpu_ns``, those
    kernels' time; ``peak_ns``, the sum of time x peak TFLOP/s over those whose peak is known, and
    ``known_ns``, their time (``peak_ns / known_ns``: the op's time-weighted peak)."""
    rows = _rows(trace, k)
    owner = kernel_work(trace)["owner"].to_numpy()[rows]
    owned = owner >= 0
    dur = np.maximum(k["dur_ns"].to_numpy()[owned], 0)
    peak_ns = dur * _rates(trace)["peak_tflops"].to_numpy()[rows[owned]]
    frame = pd.DataFrame(
        {
            "owner": owner[owned],
            "dur_ns": dur,
            "peak_ns": peak_ns,
            "known_ns": np.where(np.isnan(peak_ns), np.nan, dur),
        }
    )
    g = frame.groupby("owner")
    return pd.DataFrame(
        {
            "gpu_ns": g["dur_ns"].sum(),
            "peak_ns": g["peak_ns"].sum(min_count=1),
            "known_ns": g["known_ns"].sum(min_count=1),
        }
    )


#: the columns of ``op_table``, by their one name
OP_COLUMNS = (
    "op",
    "input_dims",
    "count",
    "causal",
    "flops",
    "torch_flops",
    "bytes_moved",
    "gpu_time_ns",
    "tflops",
    "gbps",
    "peak_tflops",
    "pct_of_peak_tflops",
    "pct_of_peak_gbps",
)


def op_table(r: Region) -> pd.DataFrame:
    """One row per op name and input shapes owning kernels in the region (``traceview kernels --ops``):
    calls, FLOPs (executed; ``torch_flops``: torch's count, which differs for ``causal`` attention),
    bytes and its kernels' GPU time per step; TFLOP/s and GB/s over that time, ``peak_tflops`` (the
    time-weighted peak of its kernels whose peak is known) and percent of peak, ``rated``.
    Largest GPU time first."""
    a = r.activities
    if not len(a) or not len(r.trace.ops):
        return pd.DataFrame(
            {
                c: pd.Series(
                    dtype=object
                    if c in ("op", "input_dims", "causal")
                    else "int64"
                    if c == "count"
                    else float
                )
                for c in OP_COLUMNS
            }
        )
    per = _owned(r.trace, a)
    w, ops = trace_work(r.trace), r.trace.ops.iloc[per.index]

    def col(name):
        return w[name].iloc[per.index].to_numpy(dtype=float, na_value=np.nan)

    f = pd.DataFrame(
        {
            "op": ops["name"].astype(str).to_numpy(),
            "input_dims": _compact_dims(ops["input_dims"]),
            "causal": w["causal"].iloc[per.index].to_numpy(dtype=object, na_value=None),
            "flops": col("flops"),
            "torch_flops": col("torch_flops"),
            "bytes_moved": col("bytes_moved"),
            **{c: per[c].to_numpy().astype(float) for c in ("gpu_ns", "peak_ns", "known_ns")},
        }
    )
    g = f.groupby(["op", "input_dims", "causal"], sort=False, dropna=False)  # causal or not: two rows
    summed = ["flops", "torch_flops", "bytes_moved", "gpu_ns", "peak_ns", "known_ns"]
    s = g[summed].sum(min_count=1).assign(count=g.size())
    gpu_ns = s["gpu_ns"].where(s["gpu_ns"] > 0)
    tflops = s["flops"] / gpu_ns / 1e3
    peak = s["peak_ns"] / s["known_ns"].where(s["known_ns"] > 0)
    out = pd.DataFrame(
        {
            "count": r.per_region_count(s["count"]),
            "flops": s["flops"] / r.regions,
            "torch_flops": s["torch_flops"] / r.regions,
            "bytes_moved": s["bytes_moved"] / r.regions,
            "gpu_time_ns": s["gpu_ns"] / r.regions,
            "tflops": tflops,
            "gbps": s["bytes_moved"] / gpu_ns,
            "peak_tflops": peak,
            "pct_of_peak_tflops": rated(tflops, peak),
            "pct_of_peak_gbps": 100.0 * s["bytes_moved"] / gpu_ns / _bandwidth(trace_device(r.trace)),
        },
        index=s.index,
    )
    out = out.reset_index().sort_values("gpu_time_ns", ascending=False, kind="stable")
    out["causal"] = out["causal"].astype(object).where(out["causal"].notna(), None)  # None: not attention
    return out[list(OP_COLUMNS)].reset_index(drop=True)


def _compact_dims(dims: pd.Series) -> np.ndarray:
    """Each op's shapes as one compact text (``[[8,16],[16,4]]``, ``-`` without shapes), written
    once per distinct list: the table groups by it and shows it."""
    codes, uniques = list_codes(dims.to_numpy())
    texts = np.array(
        [
            ("".join(v.split()) or "-") if isinstance(v, str) else json.dumps(v, separators=(",", ":"))
            for v in uniques
        ]
        + ["-"],
        dtype=object,
    )
    return texts[np.where(codes < 0, len(uniques), codes)]


# ------------------------------------------------------------------ region metrics


def _category_rate(r: Region, category: str) -> tuple[float, float]:
    """(achieved TFLOP/s, percent of peak) of one category's kernels with FLOPs: the peak is
    time-weighted over those whose peak is known, and the percent ``rated`` (one time base); kept
    in the trace's cache entry for the whole trace."""
    name = f"category_rate-{category}"
    return kept_for_region(r, name, lambda r: _rate(r, category), value=True, reads_devices=True)


def _rate(r: Region, category: str) -> tuple[float, float]:
    a = r.activities
    if not len(a) or not shapes_recorded(r.trace):
        return float("nan"), float("nan")
    mask, rows = _category_rows(r, category)
    rates = _rates(r.trace)
    flops = rates["flops"].to_numpy()[rows]
    has = ~np.isnan(flops)
    dur = np.maximum(a["dur_ns"].to_numpy()[mask], 0)[has].astype(float)
    if not has.any() or dur.sum() <= 0:
        return float("nan"), float("nan")
    flops = flops[has]
    peak = rates["peak_tflops"].to_numpy()[rows[has]]
    known = ~np.isnan(peak)
    tflops = float(flops.sum() / dur.sum() / 1e3)
    known_ns = dur[known].sum()
    peak_tflops = (dur[known] * peak[known]).sum() / known_ns if known_ns > 0 else float("nan")
    return tflops, float(rated(tflops, peak_tflops))


def _category_rows(r: Region, category: str) -> tuple[np.ndarray, np.ndarray]:
    """Which of the region's activities are of ``category``, and their rows in ``trace.kernels``."""
    a = r.activities
    mask = is_text(a["category"], category)
    return mask, _rows(r.trace, a)[mask]


def gemm_tflops(r: Region) -> float:
    """Achieved TFLOP/s of the region's GEMM kernels that have FLOPs (their FLOPs over their time)."""
    return _category_rate(r, "gemm")[0]


def gemm_pct_of_peak(r: Region) -> float:
    """GEMM FLOPs as a percent of what the GEMM kernels' paths could do in their time."""
    return _category_rate(r, "gemm")[1]


def attention_tflops(r: Region) -> float:
    """Achieved TFLOP/s of the region's fused attention kernels that have FLOPs."""
    return _category_rate(r, "attention")[0]


def attention_pct_of_peak(r: Region) -> float:
    """Fused attention FLOPs as a percent of what their paths could do in their time."""
    return _category_rate(r, "attention")[1]


def efficiency(r: Region) -> dict:
    """The region's efficiency metrics by their one name."""
    return {
        "gemm_tflops": gemm_tflops(r),
        "gemm_pct_of_peak": gemm_pct_of_peak(r),
        "attention_tflops": attention_tflops(r),
        "attention_pct_of_peak": attention_pct_of_peak(r),
    }


def efficiency_notes(trace) -> list[str]:
    """What limits the efficiency columns, said once per trace."""
    notes = []
    if not shapes_recorded(trace):
        notes.append(
            f"{trace.label}: recorded without shapes (record_shapes=False): FLOPs, bytes and "
            "efficiency columns are left empty"
        )
    elif len(trace.kernels) and trace_device(trace) is None:
        which = (
            f"device {trace.device_name!r} is not in the device table"
            if trace.device_name
            else "names no device (no deviceProperties)"
        )
        notes.append(
            f"{trace.label}: {which}: percent of peak is left empty (add the device in a file like "
            "traceview/rules/devices.toml and give it with --devices FILE, or tv.load(path, devices=FILE))"
        )
    graph = graph_replays(trace.kernels)
    if graph.any():  # their launch is the graph's, not an op: nothing to take shapes from
        n = int(graph.sum())
        what = "activity is a CUDA-graph replay" if n == 1 else "activities are CUDA-graph replays"
        notes.append(
            f"{trace.label}: {n:,} GPU {what} (launched by cudaGraphLaunch, no CPU op of their own): "
            "no shapes, so their FLOPs, bytes and efficiency columns are left empty"
        )
    if shapes_recorded(trace) and len(trace.kernels):
        zero = kept_for_trace(trace, "zero_time_work", _zero_time_work, value=True)
        if zero:
            notes.append(
                f"{trace.label}: {zero} GPU activit{'y' if zero == 1 else 'ies'} with work took 0 ns: "
                "a rate over zero time is undefined, so a kernel or op whose instances all took "
                "0 ns has its TFLOP/s, GB/s and percent of peak left empty"
            )
    return notes


def _zero_time_work(trace) -> int:
    """How many GPU activities with work (FLOPs or bytes) took 0 ns."""
    kw = kernel_work(trace)
    has_work = (kw["flops"].notna() | kw["bytes_moved"].notna()).to_numpy()
    return int((has_work & (trace.kernels["dur_ns"].to_numpy() <= 0)).sum())


# ------------------------------------------------------------------ per kernel name (the kernels table)

#: what ``name_efficiency`` adds to each kernel name's row
NAME_COLUMNS = (
    "flops",
    "tflops",
    "gbps",
    "intensity",
    "path",
    "peak_tflops",
    "pct_of_peak_tflops",
    "pct_of_peak_gbps",
    "bound",
)


def name_efficiency(r: Region) -> pd.DataFrame:
    """Per kernel name (index): FLOPs per step, and the rates over the time of its instances that
    have work (so instances without shapes do not dilute them); the path of its longest-running
    instance, its time-weighted peak, percent of peak ``rated`` and its ``_bound`` from those."""
    a = r.activities
    if not len(a):
        return pd.DataFrame(columns=list(NAME_COLUMNS))
    eff = kernel_efficiency(r.trace, a)
    worked = eff["bytes_moved"].notna() | eff["flops"].notna()
    dur = a["dur_ns"].clip(lower=0).astype(float).where(worked)
    frame = pd.DataFrame(
        {
            "name": a["name"].astype(str).to_numpy(),
            "dur": dur.to_numpy(),
            "flops": eff["flops"].to_numpy(),
            "bytes": eff["bytes_moved"].to_numpy(),
            "peak_ns": (dur * eff["peak_tflops"]).to_numpy(),
            "known_ns": dur.where(eff["peak_tflops"].notna()).to_numpy(),
            "any_dur": a["dur_ns"].clip(lower=0).to_numpy(),
            "worked": worked.to_numpy(),
            "path": eff["path"].to_numpy(),
        }
    )
    g = frame.groupby("name", sort=False)
    s = g[["flops", "bytes", "dur", "peak_ns", "known_ns"]].sum(min_count=1)
    # the path of the longest instance with work, else of the longest (a helper's: its rule's)
    first = frame.sort_values(["worked", "any_dur"], ascending=False, kind="stable").drop_duplicates("name")
    first = first.set_index("name").reindex(s.index)
    device = trace_device(r.trace)
    dur = s["dur"].where(s["dur"] > 0)  # a name whose instances all took 0 ns has no rate (not inf)
    out = pd.DataFrame(
        {
            "flops": s["flops"] / r.regions,
            "bytes_moved": s["bytes"],
            "tflops": s["flops"] / dur / 1e3,
            "gbps": s["bytes"] / dur,
            "intensity": s["flops"] / s["bytes"].where(s["bytes"] > 0),
            "path": first["path"],
            "peak_tflops": s["peak_ns"] / s["known_ns"].where(s["known_ns"] > 0),
        },
        index=s.index,
    )
    out["pct_of_peak_tflops"] = rated(out["tflops"], out["peak_tflops"])
    out["pct_of_peak_gbps"] = 100.0 * out["gbps"] / _bandwidth(device)
    out["bound"] = _bound(out.assign(flops=s["flops"]), device)  # the row's own figures, as a kernel's
    return out[list(NAME_COLUMNS)]


def with_efficiency(table: pd.DataFrame, r: Region, key: str = "name") -> pd.DataFrame:
    """``table`` (one row per kernel name in column ``key``) with the ``NAME_COLUMNS`` added."""
    eff = name_efficiency(r).reindex(table[key].astype(str).to_numpy())
    return table.assign(**{c: eff[c].to_numpy() for c in NAME_COLUMNS})


# ------------------------------------------------------------------ per side (diff, compare)

PATH_WORDS = {"tensor": "tensor cores", "vector": "CUDA cores"}
PEAK_WORDS = {"tensor": "tensor-core", "vector": "CUDA-core"}


def category_efficiency(r: Region, category: str) -> dict:
    """One category's FLOP kernels in a region: achieved TFLOP/s and percent of peak (one definition:
    ``_category_rate``), the path and precision that take most of their time, the peak there, and
    whether the attention counted is causal (rated on half of torch's count). Worked out once per
    trace, selection and category; each call gets its own dict (sides are told apart by identity)."""
    return dict(of_region(r, ("category_efficiency", category), lambda r: _kept_efficiency(r, category)))


def _kept_efficiency(r: Region, category: str) -> dict:
    """``_category_efficiency``, kept in the trace's cache entry for the whole trace (its device
    written as None and found again: a table's entry, not plain data)."""

    def without_device(r: Region) -> dict:
        return {**_category_efficiency(r, category), "device": None}

    name = f"category_efficiency-{category}"
    kept = kept_for_region(r, name, without_device, value=True, reads_devices=True)
    return {**kept, "device": trace_device(r.trace)}


def _category_efficiency(r: Region, category: str) -> dict:
    tflops, pct = _category_rate(r, category)
    out: dict[str, Any] = {
        "tflops": tflops,
        "pct_of_peak": pct,
        "path": None,
        "precision": None,
        "peak_tflops": float("nan"),
        "device": trace_device(r.trace),
    }
    if np.isnan(tflops):
        return out
    mask, rows = _category_rows(r, category)
    rates = _rates(r.trace)
    has = ~np.isnan(rates["flops"].to_numpy()[rows])  # the kernels with FLOPs
    rows, dur = rows[has], r.activities["dur_ns"].to_numpy()[mask][has]
    owners = kernel_work(r.trace)["owner"].to_numpy()[rows]
    # the owners' rows only, converted as the whole column would be
    out["causal"] = _any_true(trace_work(r.trace)["causal"].iloc[owners[owners >= 0]])
    main = _main_path(rates, rows, dur)
    if main is not None:
        path, prec = main
        peak = out["device"].peak_tflops(path, prec) if out["device"] else None
        out.update(path=path, precision=prec, peak_tflops=peak if peak is not None else float("nan"))
    return out


def _any_true(col: pd.Series) -> bool:
    """Whether a value of ``col`` is True (a missing one is not), without a Python object per row
    where the column is boolean."""
    if isinstance(col.dtype, pd.BooleanDtype) or col.dtype == bool:
        return bool(col.to_numpy(dtype=bool, na_value=False).any())
    return any(c is True for c in col.to_numpy(dtype=object, na_value=None))


def _main_path(rates: pd.DataFrame, rows: np.ndarray, dur: np.ndarray) -> tuple[str, str] | None:
    """The (path, precision) taking the most of ``dur`` over ``rows`` of ``rates`` that have both
    (a tie: the first in text order); None where none has both."""
    path = rates["path"].array
    prec = rates["peak_precision"].array
    p, q = path.codes[rows].astype(np.int64), prec.codes[rows].astype(np.int64)
    both = (p >= 0) & (q >= 0)
    if not both.any():
        return None
    n = len(prec.categories)
    key, dur = p[both] * n + q[both], dur[both]
    sums = sorted(  # (path, precision, time) of each pair present, in text order
        (path.categories[k // n], prec.categories[k % n], int(dur[key == k].sum()))
        for k in np.flatnonzero(np.bincount(key)).tolist()
    )
    best = max(sums, key=lambda s: s[2])  # the first of equal sums
    return str(best[0]), str(best[1])


def efficiency_table(sides) -> pd.DataFrame:
    """``sides``: (label, Region) pairs. One row each: GEMM and attention TFLOP/s, percent of
    peak, and the path and precision they mostly ran on."""
    rows = []
    vs_tensor = tensor_peak_columns(sides)
    for (label, r), vs in zip(sides, vs_tensor, strict=True):
        row = {"trace": label, "device": r.trace.device_name or "-"}
        for cat, word in (("gemm", "gemm"), ("attention", "attention")):
            e = category_efficiency(r, cat)
            row.update(
                {
                    f"{word}_tflops": e["tflops"],
                    f"{word}_pct_of_peak": e["pct_of_peak"],
                    f"{word}_runs_on": f"{PATH_WORDS.get(e['path'], '-')} {e['precision'] or ''}".strip(),
                }
            )
        rows.append(row | peak_columns(r) | vs)
    return pd.DataFrame(rows)


def tensor_peak_columns(sides) -> list[dict]:
    """Per side ((label, Region) pairs), when its GEMMs run on CUDA cores and another side's on tensor
    cores: its own device's tensor-core peak at that side's precision and its GEMM rate's share of it
    (what the cross-device sentence cites, ``_cuda_vs_tensor``); nan otherwise."""
    effs = [category_efficiency(r, "gemm") for _, r in sides]
    ref = _tensor_reference(effs)
    out = []
    for e in effs:
        peak = _tensor_peak_of(e, ref)
        out.append(
            {
                "gemm_tensor_peak_tflops": peak if peak else float("nan"),
                "gemm_pct_of_tensor_peak": 100.0 * e["tflops"] / peak if peak else float("nan"),
            }
        )
    return out


def _tensor_reference(effs: list[dict]) -> dict | None:
    """The GEMM efficiency a CUDA-core side is set against: the first rated one on tensor cores."""
    return next(
        (
            e
            for e in effs
            if not np.isnan(e["tflops"]) and e["path"] == "tensor" and not np.isnan(e["pct_of_peak"])
        ),
        None,
    )


def _tensor_peak_of(e: dict, ref: dict | None) -> float | None:
    """A CUDA-core side's device's tensor-core peak at ``ref``'s precision (None: not such a pair)."""
    if ref is None or np.isnan(e["tflops"]) or e["path"] != "vector" or e["device"] is None:
        return None
    return e["device"].peak_tflops("tensor", ref["precision"]) or None


def peak_columns(r: Region) -> dict:
    """What the efficiency sentences cite beside the rates (issue 18 item 3): the device the
    percents are of (``rated_device``, the device table's name) and per category the precision as
    the sentence words it, the peak its percent is of (time-weighted over its kernels' paths:
    ``100 * tflops / pct_of_peak``) and its main path's peak."""
    e = {cat: category_efficiency(r, cat) for cat in ("gemm", "attention")}
    device = next((x["device"] for x in e.values() if x.get("device") is not None), None)
    out = {"rated_device": device.name if device is not None else "-"}
    for cat, x in e.items():
        pct = x["pct_of_peak"]
        out[f"{cat}_precision"] = _precision_words(x["path"], x["precision"]) if x["precision"] else "-"
        out[f"{cat}_peak_tflops"] = 100.0 * x["tflops"] / pct if pct and not np.isnan(pct) else float("nan")
        out[f"{cat}_path_peak_tflops"] = x["peak_tflops"]
    return out


def _precision_words(path: str, precision: str) -> str:
    return "fp32 (TF32)" if path == "tensor" and precision == "fp32" else precision


def _side_words(c: Cite, side: tuple, cat: str, e: dict, what: str) -> str:
    _, table, key = side
    where = PATH_WORDS.get(e["path"], "an unknown path")
    pct = f"{cat}_pct_of_peak"
    parts = (  # the peak named with its device and value: each side is rated against its own
        [f"{c(table, key, pct, e['pct_of_peak'], 'share')} of {_rated_peak(c, side, cat, e)}"]
        if not np.isnan(e["pct_of_peak"])
        else []
    )
    if e.get("causal"):
        parts.append("causal attention rated on the FLOPs its kernels execute, half of torch's count")
    name = _name(c, side)
    rate = c(table, key, f"{cat}_tflops", e["tflops"], "tflops")
    return f"{name}'s {what} reach {rate} TFLOP/s on {where}" + (f" ({'; '.join(parts)})" if parts else "")


def _name(c: Cite, side: tuple) -> str:
    """A side's label, cited from its row's key column when that column holds the label."""
    label, table, key = side
    ((column, value),) = key.items()
    return c(table, key, column, label, "text") if value == label else label


def _rated_peak(c: Cite, side: tuple, cat: str, e: dict) -> str:
    """The peak a category's percent is of: its main path's, or (kernels on several paths or
    precisions) the time-weighted peak that 100 * tflops / pct_of_peak gives back."""
    _, table, key = side
    weighted = 100.0 * e["tflops"] / e["pct_of_peak"]
    prec = c(table, key, f"{cat}_precision", _precision_words(e["path"], e["precision"]), "text")
    device = c(table, key, "rated_device", e["device"].name, "text") if e.get("device") is not None else None
    if np.isclose(weighted, e["peak_tflops"], rtol=5e-3):
        peak = c(table, key, f"{cat}_path_peak_tflops", e["peak_tflops"], "peak")
        return (
            f"the {prec} {PEAK_WORDS[e['path']]} peak{f' of the {device}' if device else ''} ({peak} TFLOP/s)"
        )
    whose = f"the {device}'s" if device else "the"
    return (
        f"{whose} time-weighted peak for their paths, "
        f"{c(table, key, f'{cat}_peak_tflops', weighted, 'peak')} TFLOP/s "
        f"(mostly {prec} {PATH_WORDS.get(e['path'], 'an unknown path')}, "
        f"{c(table, key, f'{cat}_path_peak_tflops', e['peak_tflops'], 'peak')})"
    )


def efficiency_findings(sides, table: str = "efficiency", keys=None, by: str = "trace") -> list[str]:
    """Sentences on GEMM and attention efficiency per side (``sides``: (label, Region) pairs); when
    one side's GEMMs run on CUDA cores and another's on tensor cores, the CUDA-core rate against
    the tensor-core peak of the same precision. Each figure cites ``table``'s row whose ``by`` column
    is the side's key (``keys``, default the labels): diff's efficiency table, compare's rows."""
    keys = keys or [label for label, _ in sides]
    f: list[str] = []
    for cat, what in (("gemm", "GEMMs"), ("attention", "fused attention kernels")):
        stats = [
            ((label, table, {by: k}), category_efficiency(r, cat))
            for (label, r), k in zip(sides, keys, strict=True)
        ]
        stats = [(side, e) for side, e in stats if not np.isnan(e["tflops"])]
        if not stats:
            continue
        c = Cite()
        f.append(c.finding("; ".join(_side_words(c, side, cat, e, what) for side, e in stats)))
        if cat == "gemm":
            f += _cuda_vs_tensor(stats)
    return f


def _cuda_vs_tensor(stats) -> list[str]:
    """``stats``: ((label, table, key), efficiency) per side. Cited: each side's rate, percent,
    device and precision, and the CUDA-core side's device's tensor-core peak and its share of it
    (``tensor_peak_columns``: the same pairing)."""
    ref = _tensor_reference([e for _, e in stats])
    if ref is None:  # no side on tensor cores: nothing to set a CUDA-core rate against
        return []
    tensor = [(sd, e) for sd, e in stats if e is ref]
    out: list[str] = []
    for (lbl, table, key), e in stats:
        for t_side, t in tensor:
            peak = _tensor_peak_of(e, ref)
            if peak:
                c = Cite()  # cited in the order the sentence states them
                name = _name(c, (lbl, table, key))
                rate = c(table, key, "gemm_tflops", e["tflops"], "tflops")
                share_ = c(table, key, "gemm_pct_of_tensor_peak", 100.0 * e["tflops"] / peak, "share")
                _, t_table, t_key = t_side
                prec = c(t_table, t_key, "gemm_precision", _precision_words("tensor", t["precision"]), "text")
                device = c(table, key, "rated_device", e["device"].name, "text")
                own_peak = c(table, key, "gemm_tensor_peak_tflops", peak, "peak")
                t_name = _name(c, t_side)
                reach = c(t_table, t_key, "gemm_pct_of_peak", t["pct_of_peak"], "share")
                out.append(  # two devices, two peaks: each named with its own
                    c.finding(
                        f"{name}'s GEMMs run on CUDA cores at {rate} TFLOP/s: {share_} of the {prec} "
                        f"{PEAK_WORDS['tensor']} peak of the {device} ({own_peak} TFLOP/s); "
                        f"{t_name}'s GEMMs reach {reach} of {_rated_peak(c, t_side, 'gemm', t)}"
                    )
                )
    return out


# ------------------------------------------------------------------ roofline (one step's kernels)


def roofline(trace, sel=None):
    """A Report of one step's kernels with work: category, FLOPs, bytes, intensity, achieved
    TFLOP/s and GB/s, plus the device's peaks (info) for the roof. The step: ``sel.step``,
    else the first step of the region."""
    from dataclasses import replace

    from ...report import Report
    from ..select.region import Selection, region

    sel = sel or Selection()
    if sel.step is None and len(trace.steps):
        sel = replace(sel, step=int(trace.steps["step"].iloc[0]))
    r = region(trace, sel)
    a = r.activities
    eff = kernel_efficiency(trace, a)
    keep = (eff["bytes_moved"] > 0).to_numpy() & (a["dur_ns"] > 0).to_numpy()
    table = pd.DataFrame(
        {
            "name": a["name"].astype(str).to_numpy()[keep],
            "category": a["category"].astype(str).to_numpy()[keep],
            "dur_ns": a["dur_ns"].to_numpy()[keep],
            **{c: eff[c].to_numpy()[keep] for c in COLUMNS},
        }
    )
    device = trace_device(trace)
    info = {
        "trace": trace.path,
        "selection": r.selection.describe(),
        "device": trace.device_name,
        "device_table_entry": device.name if device else None,
        "memory_gbps": device.memory_gbps if device else None,
        "peaks_tflops": (
            {
                f"{p} {k}": v
                for p in ("tensor", "vector")
                for k, v in (device.tensor if p == "tensor" else device.vector).items()
            }
            if device
            else {}
        ),
        "source": device.source if device else None,
    }
    return Report(
        kind="roofline",
        title=f"Roofline of {trace.label} ({r.selection.describe()})",
        tables={"roofline": table},
        info=info,
        notes=r.notes + efficiency_notes(trace),
    )
