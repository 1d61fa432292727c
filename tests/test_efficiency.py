"""FLOPs, bytes and efficiency (traceview/analyses/work.py, efficiency.py, devices.py).

The independent reference is torch's own ``torch.utils.flop_counter.FlopCounterMode``:
live on CPU tensors (each op profiled with shapes and counted by torch in the same
run), and as recorded by the collectors in sample_traces/manifest.json.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import math
from decimal import Decimal
from pathlib import Path

import numpy as np
import pytest
from corpus import CORPUS, SKIP_REASON, corpus_params

import traceview as tv
from traceview.analyses.measure.efficiency import (
    COLUMNS,
    efficiency,
    efficiency_notes,
    kernel_efficiency,
    kernel_work,
)
from traceview.analyses.measure.work import op_work, trace_work
from traceview.analyses.select.region import region
from traceview.devices import find_device, load_devices, trace_device

torch = pytest.importorskip("torch")
from torch.utils.flop_counter import FlopCounterMode, sdpa_flop_count  # noqa: E402

SAMPLES = Path(__file__).resolve().parents[1] / "sample_traces"
MANIFEST = json.loads((SAMPLES / "manifest.json").read_text())


def counted_flops(trace) -> int:
    w = trace_work(trace)
    return int(w.loc[w["counted"], "flops"].sum())


# ------------------------------------------------------------------ sample traces vs the manifest


@pytest.mark.parametrize("variant", sorted(MANIFEST["collected"]))
def test_sample_trace_flops_equal_torch_flop_counter(variant):
    """Per step, torch's count as traceview reads it from the trace's shapes (``torch_flops``) equals
    FlopCounterMode's count of one forward, exactly. On CPU torch has no formula for the CPU flash
    op (its count is 0): there traceview's count equals torch's SDPA formula for the collector's
    shapes. (The collectors' attention is causal: its executed ``flops`` are half, tested below.)"""
    entry = MANIFEST["collected"][variant]
    trace = tv.load(SAMPLES / entry["file"])
    w = trace_work(trace)
    per_step = w[w["counted"]].groupby(trace.ops.loc[w["counted"], "step"].to_numpy())["torch_flops"].sum()
    assert len(per_step) == entry["steps"]
    torch_count = entry["flop_counter"]["total"]
    if torch_count == 0:  # sdpa_flash / sdpa_auto on CPU
        c = MANIFEST["config"]
        shape = (c["batch"], c["heads"], c["seq_len"], c["head_dim"])
        torch_count = sdpa_flop_count(shape, shape, shape)
    assert set(per_step.tolist()) == {torch_count}


@pytest.mark.parametrize("variant", ["sdpa_flash", "sdpa_math", "sdpa_auto"])
def test_sample_attention_is_marked_causal_and_rated_on_half(variant):
    """The collectors run SDPA with is_causal=True (Concrete Inputs 'True'): the op is marked
    causal, keeps torch's count (sdpa_flop_count of the manifest's shapes) in torch_flops and is
    rated on half of it, as the FlashAttention benchmarks count a causal forward. Non-attention
    ops keep flops == torch_flops."""
    trace = tv.load(SAMPLES / f"{variant}.json.gz")
    w = trace.ops.join(trace_work(trace))
    sdpa = w[w["formula"] == "sdpa"]
    c = MANIFEST["config"]
    shape = (c["batch"], c["heads"], c["seq_len"], c["head_dim"])
    assert len(sdpa) and sdpa["causal"].all()
    assert set(sdpa["torch_flops"].tolist()) == {sdpa_flop_count(shape, shape, shape)}
    assert (sdpa["flops"] * 2 == sdpa["torch_flops"]).all()
    rest = w[w["flops"].notna() & (w["formula"] != "sdpa")]
    assert (rest["flops"] == rest["torch_flops"]).all()


# ------------------------------------------------------------------ live formulas vs FlopCounterMode


def _profile(tmp_path, fn, *args) -> tuple:
    """(traceview's counted FLOPs, torch's FlopCounterMode total) for one call of ``fn``."""
    with torch.no_grad():
        counter = FlopCounterMode(display=False)
        with counter:
            fn(*args)
        with torch.profiler.profile(
            activities=[torch.profiler.ProfilerActivity.CPU], record_shapes=True
        ) as prof:
            fn(*args)
    path = tmp_path / "t.json"
    prof.export_chrome_trace(str(path))
    return counted_flops(tv.load(path, cache=False)), counter.get_total_flops()


def _r(*shape):
    return torch.randn(*shape)


F = torch.nn.functional
LIVE = {
    "mm": (torch.mm, _r(7, 5), _r(5, 3)),
    "addmm": (torch.addmm, _r(3), _r(7, 5), _r(5, 3)),
    "bmm": (torch.bmm, _r(4, 7, 5), _r(4, 5, 3)),
    "baddbmm": (torch.baddbmm, _r(4, 7, 3), _r(4, 7, 5), _r(4, 5, 3)),
    "matmul 4d": (torch.matmul, _r(2, 3, 7, 5), _r(2, 3, 5, 4)),
    "linear": (F.linear, _r(2, 9, 16), _r(8, 16), _r(8)),
    "linear no bias": (F.linear, _r(9, 16), _r(8, 16)),
    "conv2d": (lambda x, w: F.conv2d(x, w), _r(2, 3, 17, 19), _r(8, 3, 3, 3)),
    "conv2d stride padding": (
        lambda x, w: F.conv2d(x, w, stride=2, padding=1),
        _r(2, 3, 17, 19),
        _r(8, 3, 3, 3),
    ),
    "conv2d dilation": (
        lambda x, w: F.conv2d(x, w, dilation=2, padding=(1, 2)),
        _r(1, 4, 16, 16),
        _r(6, 4, 3, 3),
    ),
    "conv2d groups": (
        lambda x, w: F.conv2d(x, w, groups=4, stride=(2, 1)),
        _r(2, 8, 15, 15),
        _r(12, 2, 3, 3),
    ),
    "conv1d": (lambda x, w: F.conv1d(x, w, stride=3), _r(2, 4, 50), _r(6, 4, 5)),
    "conv_transpose2d": (lambda x, w: F.conv_transpose2d(x, w, stride=2), _r(1, 4, 9, 9), _r(4, 6, 3, 3)),
}


@pytest.mark.parametrize("case", sorted(LIVE))
def test_formula_equals_flop_counter(case, tmp_path):
    fn, *args = LIVE[case]
    ours, theirs = _profile(tmp_path, fn, *args)
    assert theirs > 0
    assert ours == theirs


def test_sdpa_formula_equals_torch(tmp_path):
    """The SDPA op's own FLOPs equal torch's sdpa_flop_count (GQA included); pinned to the math
    backend, the counted ops (its bmms) equal FlopCounterMode's total."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    q, k, v = _r(2, 4, 33, 16), _r(2, 2, 21, 16), _r(2, 2, 21, 8)

    def attend(q, k, v):
        with sdpa_kernel(SDPBackend.MATH):
            return F.scaled_dot_product_attention(q, k, v, enable_gqa=True)

    ours, theirs = _profile(tmp_path, attend, q, k, v)
    assert ours == theirs == sdpa_flop_count(q.shape, k.shape, v.shape)
    trace = tv.load(tmp_path / "t.json", cache=False)
    w = trace.ops.join(trace_work(trace))
    top = w[w["name"].astype(str) == "aten::scaled_dot_product_attention"]
    assert top["flops"].tolist() == [sdpa_flop_count(q.shape, k.shape, v.shape)]
    assert top["causal"].tolist() == [False]


# ------------------------------------------------------------------ hand-checked corpus cases

FALCON = CORPUS / "tracelens" / "h100__Falconsai_nsfw_image_detection__1016002.json.gz"
BERT = CORPUS / "tracelens" / "h100__gaunernst_bert-small-uncased__1016001.json.gz"


def _ops_with_work(path):
    if not path.exists():
        pytest.skip(SKIP_REASON)
    trace = tv.load(path)
    return trace, trace.ops.join(trace_work(trace))


def test_hand_checked_convolution():
    """ViT patch embedding: x [4,3,224,224] bf16, w [768,3,16,16], stride 16, no padding.
    Output 14x14 (=(224-16)/16+1); FLOPs 2*N*Cout*Cin*kh*kw*oh*ow = 2*4*768*3*16*16*14*14;
    bytes (input + output) * 2 + weight * 2 = (4*3*224*224 + 4*768*14*14) * 2 + 768*3*16*16 * 2."""
    _, w = _ops_with_work(FALCON)
    conv = w[w["name"].astype(str) == "aten::cudnn_convolution"].iloc[0]
    assert conv["flops"] == 2 * 4 * 768 * 3 * 16 * 16 * 14 * 14 == 924_844_032
    assert conv["bytes_moved"] == (4 * 3 * 224 * 224 + 4 * 768 * 14 * 14) * 2 + 768 * 3 * 16 * 16 * 2
    assert conv["counted"] and conv["precision"] == "bf16"


def test_hand_checked_gemm():
    """BERT-small addmm: bias [512], x [141,512], W^T [512,512], bf16: 2*141*512*512 FLOPs;
    bytes (512 + 141*512 + 512*512 + 141*512) * 2."""
    _, w = _ops_with_work(BERT)
    mm = w[(w["name"].astype(str) == "aten::addmm") & (w["flops"] == 2 * 141 * 512 * 512)]
    assert len(mm) > 0
    assert mm["bytes_moved"].iloc[0] == (512 + 141 * 512 + 512 * 512 + 141 * 512) * 2
    assert mm["counted"].all()


def test_hand_checked_sdpa():
    """BERT-small flash attention: q, k, v [1,8,141,64] bf16 (b h s d; _flash_attention_forward's
    [1,141,8,64] is b s h d): 2*1*8*141*141*64 for q@k^T plus the same for p@v; not causal."""
    trace, w = _ops_with_work(BERT)
    inner = w[w["name"].astype(str) == "aten::_flash_attention_forward"].iloc[0]
    assert inner["flops"] == 2 * (2 * 1 * 8 * 141 * 141 * 64) == 40_716_288
    assert inner["causal"] == False  # noqa: E712  (a recorded False, not missing)
    outer = w[w["name"].astype(str) == "aten::scaled_dot_product_attention"].iloc[0]
    assert outer["flops"] == inner["flops"] and not outer["counted"] and inner["counted"]
    # the flash kernel gets all of it: it is the op's only compute kernel
    k = trace.kernels
    flash = (k["category"].astype(str) == "attention").to_numpy()
    kw = kernel_work(trace)
    assert np.allclose(kw.loc[flash, "flops"].dropna().unique(), [40_716_288])


# ------------------------------------------------------------------ corpus-wide


@pytest.mark.parametrize("path", corpus_params())
def test_corpus_gemm_percent_of_peak_in_range(path):
    """On traces with shapes and a known device, GEMM kernels get FLOPs and a percent of peak
    in (0, 100]; a trace without shapes says so once and leaves every column empty."""
    trace = tv.load(path)
    eff = kernel_efficiency(trace)
    assert list(eff.columns) == list(COLUMNS)
    notes = efficiency_notes(trace)
    if "input_dims" not in trace.ops or trace.ops["input_dims"].isna().all():
        assert len(notes) == 1 and "without shapes" in notes[0]
        assert eff[["flops", "bytes_moved", "tflops", "pct_of_peak_tflops"]].isna().all().all()
        return
    gemm = eff[(trace.kernels["category"].astype(str) == "gemm").to_numpy()]
    pct = gemm["pct_of_peak_tflops"].dropna()
    assert ((pct > 0) & (pct <= 100)).all(), pct.describe()
    if trace_device(trace) is not None and gemm["flops"].notna().any() and (gemm["path"] == "tensor").any():
        assert len(pct) > 0


@pytest.mark.parametrize("path", corpus_params())
def test_corpus_work_is_conserved(path):
    """An op's FLOPs reach its kernels in full (the shares of its kernels add up to 1)."""
    trace = tv.load(path)
    kw = kernel_work(trace)
    w = trace_work(trace)
    owned = kw[kw["owner"] >= 0]
    if not len(owned):
        return
    got = owned.groupby("owner")["flops"].sum(min_count=1).dropna()
    want = w["flops"].iloc[got.index].astype(float)
    assert np.allclose(got.to_numpy(), want.to_numpy(), rtol=1e-9)


@pytest.mark.parametrize("path", corpus_params())
def test_corpus_every_row_is_rated_on_one_time_base(path):
    """Every kernels --ops row carries its peak_tflops, and wherever a percent of peak is shown it
    is 100 * tflops / peak_tflops (the op's rate and its peak over the same kernels' time); the
    same in the kernels table. Helper kernels (split-K and gemv reductions, epilogues, memsets)
    show no FLOPs, no rate and no peak."""
    rep = tv.kernels(tv.load(path), ops=True)
    for name in ("ops", "kernels"):
        t = rep[name]
        assert "peak_tflops" in t.columns and "pct_of_peak_tflops" in t.columns
        pct, tflops, peak = (
            t[c].to_numpy(dtype=float) for c in ("pct_of_peak_tflops", "tflops", "peak_tflops")
        )
        shown = ~np.isnan(pct)
        assert np.allclose(pct[shown], 100.0 * tflops[shown] / peak[shown], rtol=1e-12), name
    k = rep["kernels"]
    helper = k["name"].str.contains(
        r"splitKreduce_kernel|reduce_1Block_kernel<[^(]*cublas|^Memset", regex=True
    )
    assert k.loc[helper, ["flops", "tflops", "peak_tflops", "pct_of_peak_tflops"]].isna().all().all()
    assert not (k.loc[helper, "path"] == "tensor").any()


def test_every_corpus_gpu_is_in_the_device_table():
    if not CORPUS.is_dir():
        pytest.skip(SKIP_REASON)
    missing = set()
    for path in sorted(CORPUS.glob("*/*.json.gz")):
        with gzip.open(path) as fh:
            props = json.load(fh).get("deviceProperties") or []
        for p in props[:1]:
            if find_device(p.get("name"), p.get("numSms")) is None:
                missing.add(p.get("name"))
    assert not missing


def test_every_device_has_a_source_and_dense_figures():
    devices = load_devices()
    assert len({d.name for d in devices}) == len(devices)
    for d in devices:
        assert d.source.strip() and d.memory_gbps > 0
        assert d.tensor or d.vector
        assert all(v > 0 for v in (*d.tensor.values(), *d.vector.values()))
        if "bf16" in d.tensor and "fp32" in d.vector:  # tensor cores beat CUDA cores
            assert d.tensor["bf16"] > d.vector["fp32"]


def test_user_device_file_overrides(tmp_path):
    own = tmp_path / "devices.toml"
    own.write_text(
        '[[device]]\nname = "H100 SXM5 80GB"\nmatch = "NVIDIA H100 80GB HBM3"\n'
        'tensor = { bf16 = 500.0 }\nmemory_gbps = 1000\nsource = "my measurement"\n'
    )
    d = find_device("NVIDIA H100 80GB HBM3", 132, str(own))
    assert d.source == "my measurement" and d.peak_tflops("tensor", "bf16") == 500.0
    assert find_device("NVIDIA A100-SXM4-80GB", 108, str(own)).name == "A100 SXM4 80GB"


def test_without_shapes_everything_is_empty_and_said_once():
    trace = tv.load(SAMPLES / "naive.json.gz")
    trace = dataclasses.replace(trace, ops=trace.ops.assign(input_dims=None))
    w = op_work(trace.ops)
    assert w["flops"].isna().all() and not w["counted"].any()
    r = region(trace)
    assert all(math.isnan(v) for v in efficiency(r).values())


# ------------------------------------------------------------------ outputs


def test_diff_reports_gemm_and_attention_efficiency_per_side():
    if not (FALCON.exists() and BERT.exists()):
        pytest.skip(SKIP_REASON)
    r = tv.diff(tv.load(BERT), tv.load(FALCON))
    eff = r["efficiency"]
    assert (eff["gemm_tflops"] > 0).all() and (eff["attention_tflops"] > 0).all()
    assert ((eff["gemm_pct_of_peak"] > 0) & (eff["gemm_pct_of_peak"] <= 100)).all()
    assert eff["gemm_runs_on"].tolist() == ["tensor cores bf16"] * 2
    text = " ".join(r.findings)
    assert "A's GEMMs reach" in text and "B's fused attention kernels reach" in text and "TFLOP/s" in text
    c = tv.compare([tv.load(BERT), tv.load(FALCON)])
    assert (c["compare"]["gemm_tflops"].to_numpy() == eff["gemm_tflops"].to_numpy()).all()


def test_kernels_table_and_roofline_plot(tmp_path):
    from click.testing import CliRunner

    from traceview.analyses.measure.efficiency import roofline
    from traceview.analyses.trace.kernels import kernel_stats
    from traceview.cli import main

    pytest.importorskip("matplotlib")
    if not BERT.exists():
        pytest.skip(SKIP_REASON)
    trace = tv.load(BERT)
    table = kernel_stats(trace)["kernels"]
    gemm = table[table["category"].astype(str) == "gemm"]
    assert (gemm["tflops"] > 0).all() and (gemm["pct_of_peak_tflops"] <= 100).all()
    rep = roofline(trace)
    assert rep.info["device_table_entry"] == "H100 SXM5 80GB" and rep.info["source"]
    assert (rep["roofline"]["flops"] > 0).any()
    out = tmp_path / "roof.svg"
    res = CliRunner().invoke(main, ["kernels", str(BERT), "--plot", str(out)])
    assert res.exit_code == 0, res.output
    assert "<svg" in out.read_text()


def _causal_copy(src: Path, dst: Path) -> Path:
    """``src`` with every SDPA op's is_causal argument set to True (Concrete Inputs, positions from
    torch's schemas: scaled_dot_product_attention 5, _scaled_dot_product_flash_attention 4,
    _flash_attention_forward 8); everything else, kernels and durations included, as recorded.
    No corpus GPU trace runs causal attention, so the H100 BERT-small flash forward stands in."""
    at = {
        "aten::scaled_dot_product_attention": 5,
        "aten::_scaled_dot_product_flash_attention": 4,
        "aten::_flash_attention_forward": 8,
    }
    with gzip.open(src, "rt") as fh:
        doc = json.load(fh)
    for e in doc["traceEvents"]:
        if e.get("cat") == "cpu_op" and e.get("name") in at:
            concrete = e["args"]["Concrete Inputs"]
            assert concrete[at[e["name"]]] == "False"
            concrete[at[e["name"]]] = "True"
    dst.write_text(json.dumps(doc))
    return dst


def _flash_recount(path: Path) -> tuple[Decimal, Decimal, int]:
    """(executed FLOPs, flash kernel seconds, ops) of the flash forward, from the plain json: the
    shapes of each _flash_attention_forward op (q, k, v as b s h d), causal from its Concrete
    Inputs; FLOPs 4*b*h*s_q*s_k*d, halved when causal (FlashAttention's benchmark count); the
    durations (us) of the flash_fwd kernels."""
    with (open if path.suffix == ".json" else gzip.open)(path, "rt") as fh:
        doc = json.load(fh)
    flops, seconds, n = Decimal(0), Decimal(0), 0
    for e in doc["traceEvents"]:
        if e.get("cat") == "cpu_op" and e.get("name") == "aten::_flash_attention_forward":
            (b, sq, h, d), (_, sk, _, _) = e["args"]["Input Dims"][:2]
            causal = e["args"]["Concrete Inputs"][8] == "True"
            flops += Decimal(4 * b * h * sq * sk * d) / (2 if causal else 1)
            n += 1
        elif e.get("cat") == "kernel" and "flash_fwd_kernel" in e.get("name", ""):
            seconds += Decimal(str(e["dur"])) / Decimal(1_000_000)
    return flops, seconds, n


@pytest.mark.parametrize("causal", [False, True], ids=["recorded", "causal"])
def test_h100_flash_forward_rated_on_executed_flops(causal, tmp_path):
    """kernels --ops rates the H100 flash forward on the FLOPs its kernel executes: within 5 %
    (here: to 1e-9) of a plain-json Decimal recount; causal: half of torch's count, which stays
    in torch_flops, and the row is marked causal; percent of peak = 100 * tflops / peak_tflops."""
    from click.testing import CliRunner

    from traceview.cli import main

    if not BERT.exists():
        pytest.skip(SKIP_REASON)
    path = _causal_copy(BERT, tmp_path / "causal.json") if causal else BERT
    want_flops, seconds, n = _flash_recount(path)
    want_tflops = want_flops / seconds / Decimal(10**12)
    res = CliRunner().invoke(main, ["kernels", str(path), "--ops", "--format", "json", "--no-cache"])
    assert res.exit_code == 0, res.output
    rows = [r for r in json.loads(res.stdout)["tables"]["ops"] if r["op"] == "aten::_flash_attention_forward"]
    assert len(rows) == 1 and rows[0]["count"] == n == 4
    row = rows[0]
    assert row["causal"] is causal
    assert row["flops"] == int(want_flops) and row["torch_flops"] == 4 * 4 * 8 * 141 * 141 * 64
    assert abs(Decimal(row["tflops"]) / want_tflops - 1) < Decimal("0.05")
    assert row["tflops"] == pytest.approx(float(want_tflops), rel=1e-9)
    assert row["peak_tflops"] == pytest.approx(
        989.4
    )  # H100 SXM dense bf16, the tensor path of the flash kernel
    assert row["pct_of_peak_tflops"] == pytest.approx(100 * row["tflops"] / row["peak_tflops"], rel=1e-12)
    kernel = next(k for k in json.loads(res.stdout)["tables"]["kernels"] if "flash_fwd" in k["name"])
    assert kernel["tflops"] == pytest.approx(row["tflops"], rel=1e-9)  # one kernel per op: same rate


@pytest.fixture(scope="module")
def causal_bert(tmp_path_factory):
    if not BERT.exists():
        pytest.skip(SKIP_REASON)
    return tv.load(_causal_copy(BERT, tmp_path_factory.mktemp("causal") / "t.json"), cache=False)


def test_causal_attention_is_said_to_be_rated_on_half(causal_bert):
    """The diff/compare sentence says causal attention is rated on the FLOPs executed; the
    recorded (not causal) trace's says nothing of it."""
    from traceview.analyses.measure.efficiency import efficiency_findings

    assert "causal" not in " ".join(efficiency_findings([("A", region(tv.load(BERT)))]))
    text = " ".join(efficiency_findings([("A", region(causal_bert))]))
    assert "causal attention rated on the FLOPs its kernels execute, half of torch's count" in text


def test_bound_is_latency_when_both_shares_are_low():
    """On the H100 BERT-small trace, a kernel name is ``latency``-bound exactly when it reaches
    under 20 % of both the compute peak (none: 0) and the bandwidth; the 256x128 GEMM at 29 % of
    bandwidth stays on a roof, and so do some, but not all, rows."""
    if not BERT.exists():
        pytest.skip(SKIP_REASON)
    k = tv.kernels(tv.load(BERT))["kernels"]
    k = k[k["bound"].notna()]
    low = (k["pct_of_peak_tflops"].fillna(0.0) < 20) & (k["pct_of_peak_gbps"] < 20)
    assert ((k["bound"] == "latency") == low).all()
    assert low.any() and not low.all()
    big = k[k["name"].str.contains("s16816gemm_bf16_256x128")]
    assert len(big) == 1 and big["bound"].iloc[0] in ("memory", "compute")
