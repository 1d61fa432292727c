"""``traceview diff``: kernel-name matching, per-step numbers, findings, formats, CLI.

GPU-side behaviour is tested on synthetic traces (tests/synth.py) that carry the
real kernel names of the attention story; CPU-side behaviour on the CPU sample
traces; real-world behaviour on the HTA trace_diff pair of the shared corpus
(an A100 vs a V100 run of the same model), skipped when the corpus is absent.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
import synth
from click.testing import CliRunner
from corpus import CORPUS

import traceview as tv
from traceview.analyses.select.region import Selection
from traceview.analyses.wording.names import normalise_kernel_name, short_kernel_name
from traceview.cli import main
from traceview.domain import gemm_family
from traceview.errors import TraceviewError
from traceview.link import ARROW

SAMPLES = Path(__file__).resolve().parents[1] / "sample_traces"
HTA_A = CORPUS / "hta" / "trace_diff__control__control.json.gz"
HTA_B = CORPUS / "hta" / "trace_diff__test__test.json.gz"
needs_corpus = pytest.mark.skipif(not (HTA_A.exists() and HTA_B.exists()), reason="corpus absent")


# ------------------------------------------------------------------ fixtures


@pytest.fixture(scope="module")
def synth_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("synth")
    for variant in synth.EXPECTED_PER_STEP:
        synth.make(d, variant)
    synth.make(d, "naive", steps=5, name="naive_5steps", first_step=10)
    synth.make(d, "sdpa_math", steps=5, name="sdpa_math_5steps")
    return d


@pytest.fixture(scope="module")
def st(synth_dir):
    """Loaded synthetic traces by file stem."""
    return {p.name[: -len(".json.gz")]: tv.load(p, cache=False) for p in sorted(synth_dir.glob("*.json.gz"))}


def per_step_kernels(trace) -> float:
    """Independently: GPU activities inside steps / number of steps."""
    k = trace.kernels
    return float(k["step"].notna().sum()) / len(trace.steps)


def per_step_gpu_ns(trace) -> float:
    k = trace.kernels
    return float(k.loc[k["step"].notna().to_numpy(), "dur_ns"].sum()) / len(trace.steps)


def overview(report) -> dict:
    o = report["overview"]
    return {m: (a, b) for m, a, b in zip(o["metric"], o["a"], o["b"], strict=True)}


# ------------------------------------------------------------------ kernel-name matching


@pytest.mark.parametrize(
    "a, b",
    [
        ("ampere_sgemm_128x64_tn", "ampere_sgemm_64x32_tn"),  # tile size
        ("ampere_sgemm_128x64_tn", "volta_sgemm_128x32_tn"),  # architecture
        (
            "ampere_bf16_s16816gemm_bf16_128x64_ldg8_f2f_stages_64x4_tn",
            "ampere_fp16_s16816gemm_fp16_256x128_ldg8_f2f_stages_32x3_tn",
        ),  # dtype + tiles
        (synth.MUL, synth.MUL_F32),  # template type args
        (synth.SOFTMAX, synth.SOFTMAX_F32),
        (
            synth.FMHA,
            "fmha_cutlassF_f16_aligned_32x128_rf_sm80(PyTorchMemEffAttention::AttentionKernel<"
            "cutlass::half_t, cutlass::arch::Sm80, true, 32, 128, 128, true, true>::Params)",
        ),
        (
            synth.FLASH,
            synth.FLASH.replace("64, 128, 128, 4", "128, 64, 64, 4").replace("true, false>", "false, false>"),
        ),
        (
            "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_64x64_16x6_nn_align4>(cutlass_80_tensorop_s1688gemm_"
            "64x64_16x6_nn_align4::Params)",
            "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_128x256_32x3_nn_align1>(cutlass_80_tensorop_s1688gemm_"
            "128x256_32x3_nn_align1::Params)",
        ),
        (
            synth.MASKED_FILL,
            synth.MASKED_FILL.replace("c10::BFloat16, bool", "float, bool").replace("#10", "#7"),
        ),
        ("triton_poi_fused_add_mul_0", "triton_poi_fused_add_mul_12"),
    ],
)
def test_same_kernel_matches_across_numbers_templates_and_dtypes(a, b):
    assert normalise_kernel_name(a) == normalise_kernel_name(b)


@pytest.mark.parametrize(
    "a, b",
    [
        (
            "ampere_sgemm_128x64_tn",
            "ampere_bf16_s16816gemm_bf16_128x64_ldg8_f2f_stages_64x4_tn",
        ),  # CUDA vs tensor cores
        (synth.MUL, synth.ADD),  # different functor, same template
        (synth.MUL, synth.FILL),
        ("Memcpy DtoD (Device -> Device)", "Memcpy HtoD (Pageable -> Device)"),
        (synth.FMHA, synth.FLASH),
        (synth.WHERE, synth.MASKED_FILL),  # lambdas of different kernels
        ("ampere_sgemm_128x64_tn", "ampere_sgemm_128x64_nn"),  # layout is not a number
    ],
)
def test_different_kernels_stay_apart(a, b):
    assert normalise_kernel_name(a) != normalise_kernel_name(b)


def test_normalised_names_read_well():
    assert (
        normalise_kernel_name(synth.MUL)
        == "at::native::vectorized_elementwise_kernel<AUnaryFunctor<MulFunctor>, Array>"
    )
    assert normalise_kernel_name(synth.SOFTMAX) == "softmax_warp_forward"
    assert normalise_kernel_name("ampere_sgemm_128x64_tn") == "ARCH_sgemm_NxN_tn"
    assert (
        normalise_kernel_name(synth.MASKED_FILL)
        == "at::native::elementwise_kernel<gpu_kernel_impl_nocast<masked_fill_kernel>>"
    )
    assert normalise_kernel_name("Memcpy DtoD (Device -> Device)") == "Memcpy DtoD (Device -> Device)"
    # unbalanced brackets (operator<) must not raise
    assert normalise_kernel_name("void foo<int(bar") != ""


def test_readable_names_keep_what_the_name_says():
    from traceview.analyses.wording.names import kernel_label
    from traceview.analyses.wording.names import readable_kernel_name as readable

    # issue 21: the dtype and the number arguments stay, so bf16 and fp32 kernels no longer read the same
    assert readable(synth.MUL) == "vectorized_elementwise_kernel<4, AUnaryFunctor<MulFunctor>> [BFloat16]"
    assert readable(synth.MUL_F32) == "vectorized_elementwise_kernel<4, AUnaryFunctor<MulFunctor>> [float]"
    assert (
        readable(synth.MASKED_FILL)
        == "elementwise_kernel<128, 2, gpu_kernel_impl_nocast<masked_fill_kernel>> [BFloat16]"
    )
    assert readable(synth.WHERE) != readable(synth.MASKED_FILL)  # the wrapped functor tells them apart
    assert readable("ampere_sgemm_128x64_tn") == "ampere_sgemm_128x64_tn"
    # a return type before the name (cuBLAS gemv) is not the kernel's name
    gemv = (
        "std::enable_if<!(false), void>::type internal::gemvx::kernel<int, int, float, float, float, float, "
        "false, true, true, false, 7, false, cublasGemvParamsEx<int, cublasGemvTensorStrided<float const>, "
        "cublasGemvTensorStrided<float>, float> >(cublasGemvParamsEx<int, cublasGemvTensorStrided<float const>>)"
    )
    assert readable(gemv) == "internal::gemvx::kernel<7> [float]"  # float, not the int index type
    assert kernel_label("Memcpy DtoD (Device -> Device)") == "Memcpy DtoD (Device -> Device)"


def test_summary_top_kernels_show_readable_names_and_keep_full_ones(st):
    top = tv.summary(st["sdpa_math"], top=20)["top_kernels"]
    assert top.columns.tolist() == ["kernel", "count", "total_ns", "pct_time", "name"]
    row = top.set_index("name").loc[synth.GEMM_SIMT]
    assert row["kernel"] == "ampere_sgemm_128x64_tn"
    assert (
        top.set_index("name").loc[synth.MUL_F32, "kernel"]
        == "vectorized_elementwise_kernel<4, AUnaryFunctor<MulFunctor>> [float]"
    )  # dtype kept (issue 21)
    assert len(top) == top["name"].nunique()  # still one row per full name


def test_gemm_families_and_short_names():
    assert gemm_family(synth.GEMM_TC) == "s16816"
    assert gemm_family(synth.GEMM_SIMT) == "sgemm"
    assert gemm_family("volta_sgemm_128x32_nt") == "sgemm"
    assert (
        gemm_family("void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_64x64_16x6_nn_align4>(x)") == "s1688"
    )
    assert short_kernel_name(synth.FMHA) == "fmha_cutlassF"
    assert short_kernel_name(synth.FLASH) == "flash_fwd_kernel"
    assert short_kernel_name("Memcpy DtoD (Device -> Device)") == "Memcpy DtoD"


# ------------------------------------------------------------ the attention story (synthetic GPU traces)


def test_naive_vs_inplace_the_memcpy_is_gone_with_its_op_chain(st):
    a, b = st["naive"], st["naive_inplace"]
    r = tv.diff(a, b)
    assert r.kind == "diff"
    ov = overview(r)
    assert ov["gpu_activities_per_step"] == (per_step_kernels(a), per_step_kernels(b)) == (6.0, 5.0)
    assert ov["gpu_time_per_step_ns"] == pytest.approx((per_step_gpu_ns(a), per_step_gpu_ns(b)))
    only_a = r["only_in_a"]
    assert only_a["kernel"].tolist() == ["Memcpy DtoD (Device -> Device)"]
    row = only_a.iloc[0]
    assert row["count"] == 1.0 and row["time_ns"] == 15_000 and row["category"] == "memcpy"
    chain = row["launched_by"].split(ARROW)
    assert chain[0] == "aten::masked_fill" and chain[-1] == "aten::copy_"
    assert row["launched_by"] == "aten::masked_fill → aten::clone → aten::copy_"
    assert len(r["only_in_b"]) == 0
    text = " ".join(r.findings)
    assert "Memcpy DtoD (Device -> Device) (1 per step" in text and "is gone in B" in text
    assert "launched by aten::masked_fill → aten::clone → aten::copy_" in text
    assert "B runs the same number of kernels per step as A (5)" in text  # the memcpy is not a kernel
    assert ov["kernels_per_step"] == (5.0, 5.0) and ov["memcpys_per_step"] == (1.0, 0.0)
    cat = r["by_category"].set_index("category")
    assert cat.loc["memcpy", "a_count"] == 1 and cat.loc["memcpy", "b_count"] == 0
    assert cat.loc["gemm", "ratio_time"] == pytest.approx(1.0)


def test_naive_vs_sdpa_math_gemms_on_cuda_cores_said_as_a_difference(st):
    a, b = st["naive"], st["sdpa_math"]
    r = tv.diff(a, b)
    ov = overview(r)
    assert ov["gpu_activities_per_step"] == (6.0, 17.0)
    assert r.info["ratio_kernels"] == pytest.approx(17 / 5)
    assert r.info["ratio_gpu_time"] == pytest.approx(per_step_gpu_ns(b) / per_step_gpu_ns(a))
    g = r["gemm_path"].set_index("side")
    assert g.loc["A", "tensor_core_pct"] == 100.0 and g.loc["B", "tensor_core_pct"] == 0.0
    assert g.loc["A", "dominant_family"] == "s16816" and g.loc["B", "dominant_family"] == "sgemm"
    # no shapes, and no kernel both sides run holds most of the time: whether the work is the same
    # cannot be told (issue 32), so the change of GEMM path is said as a difference, never a move
    assert r.findings[0].startswith("cannot tell whether A and B run the same work"), r.findings[0]
    assert "GEMMs moved" not in " ".join(r.findings)
    assert "GEMMs: 0% of B's GEMM time runs on tensor cores (sgemm), 100% of A's (s16816)" in " ".join(
        r.findings
    )
    assert "most GPU time runs in fp32 in B" in " ".join(r.findings)
    only_b = r["only_in_b"].set_index("match_key")
    assert only_b.loc["ARCH_sgemm_NxN_tn", "launched_by"].endswith("aten::matmul → aten::bmm")
    assert only_b.loc["ARCH_sgemm_NxN_tn", "kernel"] == "ampere_sgemm_128x64_tn"  # readable, digits kept
    assert only_b.loc[normalise_kernel_name(synth.CAST), "count"] == 4.0
    # the softmax kernel matches across bf16 -> fp32 and shows up as changed, not new
    both = r["by_kernel"].set_index("match_key")
    assert both.loc["softmax_warp_forward", "ratio_time"] == pytest.approx(25 / 12)
    att = r["attention"].set_index("side")
    assert att.loc["A", "backend"] == "none" and att.loc["B", "backend"] == "unfused: math"


@pytest.mark.parametrize(
    "variant, backend, words",
    [
        (
            "sdpa_efficient",
            "mem_efficient",
            "attention runs as 1 fmha_cutlassF kernel per step (memory-efficient backend)",
        ),
        ("sdpa_flash", "flash", "attention runs as 1 flash_fwd_kernel kernel per step (flash backend)"),
    ],
)
def test_fused_attention_backend(st, variant, backend, words):
    r = tv.diff(st["naive"], st[variant])
    att = r["attention"].set_index("side")
    assert att.loc["B", "backend"] == backend and att.loc["B", "kernels"] == 1.0
    assert f"B: {words}" in r.findings
    assert overview(r)["gpu_activities_per_step"] == (6.0, 1.0)


def test_five_steps_compare_with_three_per_step(st):
    r = tv.diff(st["naive_5steps"], st["naive"])
    ov = overview(r)
    assert ov["regions"] == (5.0, 3.0)
    o = r["overview"].set_index("metric")
    for metric in (
        "gpu_activities_per_step",
        "gpu_time_per_step_ns",
        "kernel_launches_per_step",
        "cpu_ops_per_step",
    ):
        assert o.loc[metric, "delta"] == 0 and o.loc[metric, "ratio"] == pytest.approx(1.0), metric
    assert len(r["only_in_a"]) == 0 and len(r["only_in_b"]) == 0
    assert (r["by_category"]["ratio_count"] == 1.0).all()
    # and against a different variant: 6 vs 17 per step, not 30 vs 51 in all
    r2 = tv.diff(st["naive_5steps"], st["sdpa_math"])
    assert overview(r2)["gpu_activities_per_step"] == (6.0, 17.0)
    r3 = tv.diff(st["naive"], st["sdpa_math_5steps"])
    assert overview(r3)["gpu_activities_per_step"] == (6.0, 17.0)
    assert len(st["naive_5steps"].kernels) == 30


def test_one_step_and_annotation_selection(st, synth_dir):
    r = tv.diff(st["naive"], st["sdpa_math"], step=4)
    assert overview(r)["regions"] == (1.0, 1.0)
    assert overview(r)["gpu_activities_per_step"] == (6.0, 17.0)
    with pytest.raises(TraceviewError, match="has no step 99"):
        tv.diff(st["naive"], st["sdpa_math"], step=99)
    r = tv.diff(
        synth_dir / "naive.json.gz",
        synth_dir / "sdpa_math.json.gz",
        annotation="naive",
        annotation_b="sdpa_math",
        cache=False,
    )
    assert r.info["normalised_by"] == "annotation: 3 in A, 3 in B"
    assert overview(r)["gpu_activities_per_step"] == (6.0, 17.0)
    with pytest.raises(TraceviewError, match="no annotation named 'nope'"):
        tv.diff(st["naive"], st["sdpa_math"], annotation="nope")


def test_stream_selection_that_matches_nothing_is_an_error_listing_the_streams(st):
    with pytest.raises(
        TraceviewError, match=r"naive.json.gz: has no GPU activity with stream 99 \(streams: 7\)"
    ):
        tv.diff(st["naive"], st["naive_inplace"], sel=Selection(stream=99))
    r = tv.diff(st["naive"], st["naive_inplace"], sel=Selection(stream=7))
    assert overview(r)["cpu_ops_per_step"] == (22.0, 17.0)  # CPU side unaffected by a GPU stream filter


# ------------------------------------------------------------------ CPU-only sample traces


def test_cpu_traces_compare_ops_per_step():
    a, b = tv.load(SAMPLES / "naive.json.gz"), tv.load(SAMPLES / "naive_inplace.json.gz")
    r = tv.diff(a, b)
    assert "by_category" not in r.tables and "only_in_a" not in r.tables
    assert r.findings[0].startswith("same work (judged on shapes)")  # the verdict first (issue 32)
    assert r.findings[1].startswith("neither trace holds GPU activity")
    manifest = json.loads((SAMPLES / "manifest.json").read_text())["collected"]
    expect = {
        v: sum(manifest[v]["trace_op_counts"].values()) / manifest[v]["steps"]
        for v in ("naive", "naive_inplace")
    }
    assert overview(r)["cpu_ops_per_step"] == (expect["naive"], expect["naive_inplace"]) == (45.0, 36.0)
    ops = r["cpu_ops"].set_index("op")
    assert ops.loc["aten::copy_", "a_count"] == 2 and ops.loc["aten::copy_", "b_count"] == 1
    a_steps = a.ops[a.ops["step"].notna()]
    assert ops.loc["aten::bmm", "a_time_ns"] == pytest.approx(
        a_steps.loc[a_steps["name"] == "aten::bmm", "dur_ns"].sum() / 3
    )
    assert "aten::masked_fill → aten::clone → aten::copy_" in r["cpu_only_in_a"]["chain"].tolist()
    text = "\n".join(r.findings)
    assert (
        "A runs aten::masked_fill, aten::clone, aten::empty_like and aten::empty per step that B does not"
        in text
    )
    assert (
        "aten::masked_fill copies (aten::copy_ under it: aten::masked_fill → aten::clone → aten::copy_, "
        "1 per step) in A, not in B" in text
    )
    assert "B runs 36 CPU ops per step vs 45 in A" in text


def test_cpu_traces_math_backend_ops():
    r = tv.diff(SAMPLES / "naive.json.gz", SAMPLES / "sdpa_math.json.gz")
    new_ops = next(f for f in r.findings if f.startswith("B runs aten::"))
    for name in ("aten::ones", "aten::tril", "aten::_safe_softmax"):
        assert name in new_ops
    assert any("SDPA math backend" in f for f in r.findings)
    r = tv.diff(SAMPLES / "sdpa_math.json.gz", SAMPLES / "sdpa_flash.json.gz")
    assert (
        "B: attention runs as aten::_scaled_dot_product_flash_attention_for_cpu (CPU flash backend)"
        in r.findings
    )


# ------------------------------------------------------------------ JSON


DIFF_TABLES = {
    # what is new or worse in B (issue 34): sdpa_math's math backend and fp32 GEMMs
    "advice": [
        "rule",
        "what",
        "where",
        "source",
        "line_from",
        "count_per_step",
        "bytes_per_step",
        "stake_ns_per_step",
        "bound",
        "pct_of_wall",
        "peak_bytes",
        "pct_of_peak",
        "do",
        "doc",
        "a_stake_ns_per_step",
        "change",
    ],
    "completeness": [
        "trace",
        "kernel_launches",
        "launches_without_gpu",
        "launches_without_gpu_pct",
        "copy_launches_without_gpu",
        "gpu_activities",
        "activities_without_launch",
        "activities_without_launch_pct",
        "graph_replays",
        "graph_replay_pct_of_gpu_time",
        "without_gpu_by_api",
        "launches_without_gpu_from_ns",
        "launches_without_gpu_to_ns",
        "launches_without_gpu_at_start",
        "launches_without_gpu_at_end",
        "activities_without_launch_from_ns",
        "activities_without_launch_to_ns",
        "activities_without_launch_at_start",
        "activities_without_launch_at_end",
    ],
    "verdict": ["verdict", "evidence", "why"],
    "workload_checks": ["check", "a", "b", "differs"],
    "workload": ["trace", "device", "flops_per_step", "bytes_per_step", "op_shapes", "gemm_m"],
    "overview": ["metric", "a", "b", "delta", "ratio"],
    "by_category": [
        "category",
        "a_count",
        "b_count",
        "delta_count",
        "ratio_count",
        "a_time_ns",
        "b_time_ns",
        "delta_time_ns",
        "ratio_time",
    ],
    "only_in_a": [
        "kernel",
        "kernels",
        "category",
        "kind",
        "count",
        "time_ns",
        "launched_by",
        "example",
        "match_key",
    ],
    "only_in_b": [
        "kernel",
        "kernels",
        "category",
        "kind",
        "count",
        "time_ns",
        "launched_by",
        "example",
        "match_key",
    ],
    "by_kernel": [
        "kernel",
        "a_kernels",
        "b_kernels",
        "category",
        "a_count",
        "b_count",
        "a_time_ns",
        "b_time_ns",
        "delta_time_ns",
        "ratio_time",
        "a_example",
        "b_example",
        "match_key",
    ],
    "host_launches": ["side", "trace", "launch_calls", "without_gpu", "with_kernels_recorded", "by_api"],
    "gemm_path": [
        "side",
        "trace",
        "gemm_kernels",
        "gemm_time_ns",
        "gemm_pct_time",
        "tensor_core_pct",
        "dominant_family",
        "families",
    ],
    "attention": ["side", "trace", "backend", "kernels", "time_ns", "kernel", "sdpa_op"],
    "efficiency": [
        "trace",
        "device",
        "gemm_tflops",
        "gemm_pct_of_peak",
        "gemm_runs_on",
        "attention_tflops",
        "attention_pct_of_peak",
        "attention_runs_on",
        "rated_device",
        "gemm_precision",
        "gemm_peak_tflops",
        "gemm_path_peak_tflops",
        "attention_precision",
        "attention_peak_tflops",
        "attention_path_peak_tflops",
        "gemm_tensor_peak_tflops",
        "gemm_pct_of_tensor_peak",
    ],
    "cpu_ops": [
        "op",
        "a_count",
        "b_count",
        "delta_count",
        "a_time_ns",
        "b_time_ns",
        "delta_time_ns",
        "ratio_time",
    ],
    "cpu_only_in_a": ["chain", "op", "count", "time_ns"],
    "cpu_only_in_b": ["chain", "op", "count", "time_ns"],
    "exposed": [
        "cause",
        "a_ns",
        "b_ns",
        "delta_ns",
        "a_per_step_ns",
        "b_per_step_ns",
        "delta_per_step_ns",
    ],
}


def test_json_holds_the_documented_fields(synth_dir):
    res = CliRunner().invoke(
        main,
        [
            "diff",
            str(synth_dir / "naive.json.gz"),
            str(synth_dir / "sdpa_math.json.gz"),
            "--format",
            "json",
            "--no-cache",
        ],
    )
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["schema"] == "traceview.report" and doc["schema_version"] == 1 and doc["kind"] == "diff"
    assert set(doc) == {"schema", "schema_version", "kind", "title", "info", "findings", "tables", "notes"}
    assert set(doc["tables"]) == set(DIFF_TABLES)
    for name, cols in DIFF_TABLES.items():
        assert doc["tables"][name], name
        assert list(doc["tables"][name][0]) == cols, name
    for key in (
        "a",
        "b",
        "a_label",
        "b_label",
        "normalised_by",
        "a_gpu_time_per_step_ns",
        "b_gpu_time_per_step_ns",
        "ratio_gpu_time",
        "a_kernels_per_step",
        "b_kernels_per_step",
        "ratio_kernels",
        "a_cpu_time_per_step_ns",
        "b_cpu_time_per_step_ns",
        "a_cpu_ops_per_step",
        "b_cpu_ops_per_step",
    ):
        assert key in doc["info"], key
    assert doc["info"]["a_kernels_per_step"] == 5.0 and doc["info"]["b_kernels_per_step"] == 17.0
    # each finding an object: its sentence and the cells of its figures (issue 18 item 3)
    assert all(set(f) == {"text", "evidence"} for f in doc["findings"])
    assert any(f["text"].startswith("GEMMs: 0% of B's GEMM time") for f in doc["findings"])
    # the schema doc names every table and column
    docs = (Path(__file__).resolve().parents[1] / "docs" / "json-schema.md").read_text()
    for name, cols in DIFF_TABLES.items():
        assert f"`{name}`" in docs, name
        for c in cols:
            assert f"`{c}`" in docs, (name, c)


def test_json_on_cpu_traces_has_cpu_tables_only():
    res = CliRunner().invoke(
        main,
        [
            "diff",
            str(SAMPLES / "naive.json.gz"),
            str(SAMPLES / "naive_inplace.json.gz"),
            "--format",
            "json",
            "--no-cache",
        ],
    )
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    # the samples are recorded with profile_memory and with_stack (issue 19): memory and copy_sources too
    assert set(doc["tables"]) - {"advice"} == {  # advice (issue 34) when B has some
        *("verdict", "workload_checks", "workload", "overview", "cpu_ops", "cpu_only_in_a", "cpu_only_in_b"),
        *("memory", "copy_sources"),
    }


# ------------------------------------------------------------------ CLI


def test_cli_diff_table_markdown_csv(synth_dir):
    a, b = str(synth_dir / "naive.json.gz"), str(synth_dir / "naive_inplace.json.gz")
    runner = CliRunner()
    res = runner.invoke(main, ["diff", a, b, "--no-cache"])
    assert res.exit_code == 0, res.output
    assert "Diff: A = naive vs B = naive_inplace (per step)" in res.stdout
    assert "Memcpy DtoD" in res.stdout and "[only_in_a (per step)]" in res.stdout
    res = runner.invoke(main, ["diff", a, b, "--format", "markdown", "--no-cache"])
    assert res.exit_code == 0 and "### only_in_a" in res.stdout
    res = runner.invoke(main, ["diff", a, b, "--format", "csv", "--no-cache", "--step", "4"])
    assert res.exit_code == 0 and res.stdout.startswith("table,")


def test_cli_diff_bad_path_is_one_line(tmp_path, synth_dir):
    res = CliRunner().invoke(
        main, ["diff", str(tmp_path / "missing.json.gz"), str(synth_dir / "naive.json.gz")]
    )
    assert res.exit_code == 1
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "missing.json.gz" in lines[0] and "no such file" in lines[0]
    assert "Traceback" not in res.output
    res = CliRunner().invoke(
        main, ["diff", str(synth_dir / "naive.json.gz"), str(synth_dir / "naive.json.gz"), "--step", "42"]
    )
    assert res.exit_code == 1 and len(res.stderr.strip().splitlines()) == 1 and "no step 42" in res.stderr


# ------------------------------------------------------------------ real traces (corpus)


@pytest.fixture(scope="module")
def hta_pair():
    if not (HTA_A.exists() and HTA_B.exists()):
        pytest.skip("corpus absent")
    return tv.load(HTA_A, cache=False), tv.load(HTA_B, cache=False)


@needs_corpus
def test_corpus_a100_vs_v100(hta_pair):
    a, b = hta_pair
    r = tv.diff(a, b)
    ov = overview(r)
    assert ov["regions"] == (len(a.steps), len(b.steps)) == (6.0, 6.0)
    assert ov["gpu_activities_per_step"] == (per_step_kernels(a), per_step_kernels(b)) == (1575.0, 2503.0)
    assert ov["gpu_time_per_step_ns"] == pytest.approx((per_step_gpu_ns(a), per_step_gpu_ns(b)))
    cat = r["by_category"].set_index("category")
    ka = a.kernels[a.kernels["step"].notna().to_numpy()]
    assert cat.loc["gemm", "a_count"] == pytest.approx((ka["category"] == "gemm").sum() / 6)
    g = r["gemm_path"].set_index("side")
    assert g.loc["A", "tensor_core_pct"] > 50 and g.loc["B", "tensor_core_pct"] == 0
    assert g.loc["A", "dominant_family"] == "s1688" and g.loc["B", "dominant_family"] == "sgemm"
    text = "\n".join(r.findings)
    # not the same workload (issue 18: 345 vs 26 GFLOP per step): said first with its evidence (issue
    # 32), and the change of GEMM path is worded as a difference, not as a move ("GEMMs moved from ...")
    assert r.findings[0].startswith("different work (judged on shapes, distributedInfo)"), r.findings[0]
    assert "B's GEMMs have M = 1,024 (282 ops)" in r.findings[0]
    assert "A ran on NVIDIA A100-PG509-200, B on Tesla V100-SXM2-16GB" in r.findings[0]
    assert "GEMMs moved" not in text
    assert "GEMMs: 0% of B's GEMM time runs on tensor cores (sgemm), 86% of A's (s1688)" in text
    # the tile-size variants of cutlass s1688 kernels collapse into a handful of keys, and sgemm
    # variants of A and B match despite the ampere_/volta_ prefixes
    assert r.info["only_in_a_total"] < 20 and r.info["only_in_b_total"] < 10
    both = r["by_kernel"].set_index("match_key")
    # matched on the key; a row for several kernels says how many and reads as their family, its
    # numbers that vary as * (issue 32 item 3: it read as one of them), the kernels in merged_kernels
    sg = {s: {n for n in t.kernels["name"].astype(str) if re.fullmatch(rf"{s}_sgemm_\d+x\d+_nn", n)}
          for s, t in (("ampere", a), ("volta", b))}  # fmt: skip
    assert both.loc["ARCH_sgemm_NxN_nn", "kernel"] == (
        f"{len(sg['ampere'])} kernels: ampere_sgemm_*x*_nn → {len(sg['volta'])} kernels: volta_sgemm_*x*_nn"
    )
    merged = r["merged_kernels"]
    assert (
        set(merged.loc[(merged["match_key"] == "ARCH_sgemm_NxN_nn").to_numpy(), "name"])
        == sg["ampere"] | sg["volta"]
    )
    assert not r["by_kernel"]["kernel"].str.contains("ARCH|NxN").any()
    assert not r["only_in_a"]["kernel"].str.contains("cutlass_N_|NxN").any()
    assert "cutlass_80_tensorop_s1688gemm_64x64_16x6_nt_align4" in set(merged["kernel"])
    assert any("614 GPU activities launched outside every ProfilerStep" in n for n in r.notes)
    # the memcpy DtoD explosion: 3 -> 768 per step
    k = r["by_kernel"].set_index("kernel")  # a memcpy's name is its readable name and its key
    assert k.loc["Memcpy DtoD (Device -> Device)", "a_count"] == 3
    assert k.loc["Memcpy DtoD (Device -> Device)", "b_count"] == 768
    assert np.isfinite(r.info["ratio_gpu_time"])


def test_annotation_outside_the_selected_step_is_empty_not_a_crash():
    from pathlib import Path

    import traceview as tv
    from traceview.analyses.select.region import Selection
    from traceview.analyses.variants.diff import diff as diff_fn

    t = tv.load(Path(__file__).resolve().parents[1] / "sample_traces" / "naive.json.gz", cache=False)
    rep = diff_fn(t, t, Selection(step=5, annotation="ProfilerStep#3"))
    assert rep["overview"] is not None
