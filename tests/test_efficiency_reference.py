"""Kernel efficiency against a plain recount (issue 35: the table is worked out on codes).

``kernel_work`` and ``kernel_efficiency`` are worked out on int codes and arrays; here each row is
recounted in plain Python from the trace's own columns (the launching op by its event number,
the counted owner by walking up the parents, the shares op by op, the path, precision, peak and
roofline side by the rules the module states), and must come out the same, float for float. The
category rates (what ``diff`` and ``compare`` state) are recounted over the region's kernels, and
a cached trace must read back the same table.
"""

from __future__ import annotations

import math

import pandas as pd
import pytest
from corpus import CORPUS, SKIP_REASON

import traceview as tv
from traceview import cache
from traceview.analyses.measure.efficiency import (
    COMPUTE,
    LATENCY_PCT,
    LOW_PRECISION,
    category_efficiency,
    efficiency,
    helpers,
    kernel_efficiency,
    kernel_work,
)
from traceview.analyses.measure.work import trace_work
from traceview.analyses.select.region import region
from traceview.devices import trace_device

TRACES = [
    "hta/trace_diff__control__control.json.gz",  # the diff tiles' source: GEMMs on tensor and CUDA cores
    "tracelens/h100__gaunernst_bert-small-uncased__1016001.json.gz",  # bf16 GEMMs, flash attention
    "tracelens/b200__eager_trace.json.gz",
    "torch_profiling_tutorial/log_transformer__dc3b0e7228dd_851.1752215573993169006.pt.trace.json.gz",
    "rocm/tracelens__mi300__gaunernst_bert-small-uncased__1016001.json.gz",  # an AMD device
    "hta/trace_filter__sampled_rank-0.json.gz",  # zero_ run by a memset: helpers share a bytes-only op
    "hta/negative_queue_length_values_check__rank0.json.gz",  # TF32 kernels
    "tracelens/h100__facebook_timesformer-base-finetuned-k400__1016002.json.gz",
]


def _load(name: str, **kw):
    path = CORPUS / name
    if not path.is_file():
        pytest.skip(SKIP_REASON if not CORPUS.is_dir() else f"{name} not in the corpus")
    return tv.load(path, **kw)


def _value(x):
    """A cell as plain Python: None for any missing value."""
    return None if x is None or x is pd.NA or (isinstance(x, float) and math.isnan(x)) else x


def _owners(trace) -> list[int]:
    """Per activity, the nearest counted op at or above its launching op (-1: none)."""
    ops, w = trace.ops, trace_work(trace)
    row_of = {}
    for row, event in enumerate(ops["event"].tolist()):
        row_of[event] = row  # an event twice: its last row
    parent, is_counted = ops["parent"].tolist(), w["counted"].tolist()
    out = []
    for event in trace.kernels["op_event"].tolist():
        op = row_of.get(event, -1) if event >= 0 else -1
        while op >= 0 and not is_counted[op]:
            op = parent[op]
        out.append(op)
    return out


def _work(trace) -> tuple[list[int], list[float], list[float]]:
    """Per activity: owner, FLOPs and bytes, shared by the rules ``_shares`` states."""
    k, w = trace.kernels, trace_work(trace)
    owner = _owners(trace)
    dur = [float(max(d, 1)) for d in k["dur_ns"].tolist()]
    helper = helpers(k).tolist()
    compute = [c in COMPUTE for c in k["category"].astype(object).tolist()]
    op_flops = [_value(x) for x in w["flops"].astype(object).tolist()]
    op_bytes = [_value(x) for x in w["bytes_moved"].astype(object).tolist()]
    members: dict[int, list[int]] = {}
    for i, o in enumerate(owner):
        if o >= 0:
            members.setdefault(o, []).append(i)
    share = [math.nan] * len(owner)
    for o, rows in members.items():
        main = {i: 0.0 if helper[i] else dur[i] for i in rows}
        flop_op = op_flops[o] is not None
        if flop_op and _sum(main[i] * compute[i] for i in rows) > 0:
            weight = {i: main[i] * compute[i] for i in rows}
        elif not flop_op and _sum(main.values()) == 0:
            weight = {i: dur[i] for i in rows}
        else:
            weight = main
        total = _sum(weight[i] for i in rows)
        for i in rows:
            if weight[i] > 0:
                share[i] = weight[i] / total
    flops = [_times(op_flops[o] if o >= 0 else None, s) for o, s in zip(owner, share, strict=True)]
    nbytes = [_times(op_bytes[o] if o >= 0 else None, s) for o, s in zip(owner, share, strict=True)]
    return owner, flops, nbytes


def _sum(values) -> float:
    total = 0.0
    for v in values:  # in row order, one addition at a time
        total += v
    return total


def _times(work, share: float) -> float:
    return math.nan if work is None else float(work) * share


def _reference(trace) -> list[tuple]:
    """Per activity, the ``COLUMNS`` of ``kernel_efficiency`` recounted row by row."""
    k, w = trace.kernels, trace_work(trace)
    owner, flops, nbytes = _work(trace)
    device = trace_device(trace)
    bw = device.memory_gbps if device is not None and device.memory_gbps > 0 else math.nan
    op_precision = [_value(x) for x in w["precision"].astype(object).tolist()]
    own = [_value(x) for x in k["precision"].astype(object).tolist()]
    tc = [_value(x) for x in k["tensor_core"].astype(object).tolist()]
    category = k["category"].astype(object).tolist()
    helper = helpers(k).tolist()
    rows = []
    for i, d in enumerate(k["dur_ns"].tolist()):
        f, b = flops[i], nbytes[i]
        dur = float(d) if d > 0 else math.nan
        prec = op_precision[owner[i]] if owner[i] >= 0 else None
        prec = "fp32" if own[i] == "tf32" else (prec if prec is not None else own[i])
        open_path = tc[i] is None and not helper[i] and (category[i] == "attention" or prec in LOW_PRECISION)
        path = "tensor" if tc[i] is True or open_path else ("vector" if tc[i] is not None else None)
        if not (category[i] in COMPUTE and not math.isnan(f)):
            path = "memory" if not math.isnan(b) else (path if helper[i] else None)
        peak = math.nan
        if device is not None and path in ("tensor", "vector") and prec is not None:
            peak = device.peak_tflops(path, prec) or math.nan
        peak = math.nan if math.isnan(f) else peak
        tflops, gbps = f / dur / 1e3, b / dur
        intensity = f / b if b > 0 else math.nan
        pct_t = 100.0 * tflops / peak if peak > 0 else math.nan
        pct_g = 100.0 * gbps / bw
        ridge = peak * 1e3 / bw
        side = "compute" if not math.isnan(f) and intensity >= ridge else "memory"
        if (0.0 if math.isnan(pct_t) else pct_t) < LATENCY_PCT and pct_g < LATENCY_PCT:
            side = "latency"
        known = not math.isnan(b) and (math.isnan(f) or not math.isnan(ridge)) and device is not None
        rows.append((f, b, tflops, gbps, intensity, path, prec, peak, pct_t, pct_g, side if known else None))
    return rows


def _same(a, b) -> bool:
    a, b = _value(a), _value(b)
    return a == b and type(a) is type(b) if not isinstance(a, float) else a == b or a is b


@pytest.mark.parametrize("name", TRACES)
def test_kernel_efficiency_equals_a_row_by_row_recount(name):
    trace = _load(name, cache=False)
    kw = kernel_work(trace)
    owner, _, _ = _work(trace)
    assert kw["owner"].tolist() == owner
    eff = kernel_efficiency(trace)
    got = list(eff.astype(object).itertuples(index=False, name=None))
    want = _reference(trace)
    assert len(got) == len(want) == len(trace.kernels)
    wrong = [(i, g, w) for i, (g, w) in enumerate(zip(got, want, strict=True)) if not all(map(_same, g, w))]
    assert not wrong, wrong[:3]
    if name == TRACES[0]:  # the tiles' source rates something on each path
        assert {"tensor", "vector", "memory"} <= set(eff["path"].dropna())
        assert {"compute", "memory", "latency"} <= set(eff["bound"].dropna())


@pytest.mark.parametrize("name", TRACES)
def test_category_rates_equal_a_recount_over_the_regions_kernels(name):
    trace = _load(name, cache=False)
    r = region(trace)
    rows = {i: row for i, row in zip(trace.kernels.index, _reference(trace), strict=True)}
    a = r.activities
    for cat in ("gemm", "attention"):
        picked = [
            (rows[i], d)
            for i, c, d in zip(a.index, a["category"].astype(object), a["dur_ns"], strict=True)
            if c == cat and not math.isnan(rows[i][0])
        ]
        e = category_efficiency(r, cat)
        assert efficiency(r)[f"{cat}_tflops"] == e["tflops"] or (
            math.isnan(e["tflops"]) and math.isnan(efficiency(r)[f"{cat}_tflops"])
        )
        dur = sum(max(d, 0) for _, d in picked)
        if not picked or dur <= 0:
            assert math.isnan(e["tflops"]) and e["path"] is None
            continue
        assert e["tflops"] == pytest.approx(sum(row[0] for row, _ in picked) / dur / 1e3, rel=1e-12)
        known = [(row[7], max(d, 0)) for row, d in picked if not math.isnan(row[7])]
        known_ns = sum(d for _, d in known)
        if known_ns > 0:
            peak = sum(p * d for p, d in known) / known_ns
            assert e["pct_of_peak"] == pytest.approx(100.0 * e["tflops"] / peak, rel=1e-12)
        by: dict[tuple, int] = {}
        for row, d in picked:
            if row[5] is not None and row[6] is not None:
                by[(row[5], row[6])] = by.get((row[5], row[6]), 0) + d
        main = max(sorted(by), key=lambda pair: by[pair]) if by else (None, None)
        assert (e["path"], e["precision"]) == main


@pytest.mark.skipif(not cache.available(), reason="the cache needs pyarrow")
def test_a_cached_trace_reads_back_the_same_efficiency(tmp_path):
    name = TRACES[0]
    cold = _load(name, cache=False)
    _load(name, cache=tmp_path)  # stores the entry
    first = _load(name, cache=tmp_path)
    kernel_efficiency(first)  # works the table out and keeps it in the entry
    assert list(tmp_path.glob("*/derived-*-kernel_efficiency.arrow"))
    again = _load(name, cache=tmp_path)
    assert again.cached
    pd.testing.assert_frame_equal(kernel_efficiency(again), kernel_efficiency(cold))
    pd.testing.assert_frame_equal(kernel_work(again), kernel_work(cold))
    for cat in ("gemm", "attention"):
        got, want = category_efficiency(region(again), cat), category_efficiency(region(cold), cat)
        assert {k: _value(v) for k, v in got.items()} == {k: _value(v) for k, v in want.items()}
