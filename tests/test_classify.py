"""Kernel taxonomy: every rule decides its own examples, the must-know names are right,
user rule files override defaults, malformed ones fail with a one-line RuleError."""

from __future__ import annotations

import dataclasses
import time

import numpy as np
import pandas as pd
import pytest

from traceview.classify import (
    COLUMNS,
    _load_words,
    annotate,
    classify,
    classify_names,
    default_rules,
    explain,
    load_rules,
    unclassified,
)
from traceview.errors import RuleError

RULES = default_rules()
_ATTR = {"pass": "pass_"}


def _examples():
    for rule in RULES.rules:
        for i, name in enumerate(rule.examples):
            yield pytest.param(rule, name, id=f"{rule.id}-{i}")


def _expected(value):
    return None if not isinstance(value, (str, bool)) or value == "none" else value


# --------------------------------------------------------------------------- the rule table


def test_every_rule_has_an_example():
    missing = [r.id for r in RULES.rules if not r.examples]
    assert not missing, f"rules without examples: {missing}"


def test_rule_table_has_version_and_sources():
    assert isinstance(RULES.version, int) and RULES.version >= 1
    assert all(r.source for r in RULES.rules), [r.id for r in RULES.rules if not r.source]
    assert RULES.categories[-1] == "other"


@pytest.mark.parametrize("rule,name", list(_examples()))
def test_each_example_is_decided_by_its_rule(rule, name):
    got = explain(name)
    for field, value in rule.fields.items():
        assert field in got, f"{rule.id}: {field} unset for {name[:80]}"
        assert got[field][1] == rule.id, f"{field} decided by {got[field][1]}, not {rule.id}"
        assert getattr(classify(name), _ATTR.get(field, field)) == _expected(value)
    if not rule.is_trait:
        assert classify(name).rule == rule.id


# --------------------------------------------------------------------------- must-know names

MUST = [
    # name, category, tensor_core, attention_backend, library, precision, pass
    ("ampere_sgemm_32x128_nt", "gemm", False, None, "cublas", "fp32", None),
    ("volta_sgemm_64x64_nn", "gemm", False, None, "cublas", "fp32", None),
    (
        "void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_128x64_64x6_tn_align8>"
        "(cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_128x64_64x6_tn_align8::Params)",
        "gemm",
        True,
        None,
        "cutlass",
        "bf16",
        None,
    ),
    # hand-written: xmma on CUDA cores (ffma) -> False even though it is xmma
    (
        "sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize128x128x8_stage3_warpsize2x2x1_ffma_aligna4_"
        "alignc4_execute_kernel__5x_cublas",
        "gemm",
        False,
        None,
        "cublas",
        "fp32",
        None,
    ),
    (
        "sm80_xmma_fprop_implicit_gemm_tf32f32_tf32f32_f32_nhwckrsc_nhwc_tilesize64x128x32_stage5_"
        "warpsize2x2x1_g1_tensor16x8x8_execute_kernel_cudnn_infer",
        "conv",
        True,
        None,
        "cudnn",
        "tf32",
        "fwd",
    ),
    (
        "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_"
        "segment_k_off_kernel__5x_cublas",
        "gemm",
        True,
        None,
        "cublas",
        "bf16",
        None,
    ),
    ("nvjet_tst_64x64_64x16_2x1_2cta_v_bz_bias_TNT", "gemm", True, None, "cublasLt", None, None),
    ("cudnn_infer_volta_scudnn_128x64_relu_medium_nn_v1", "conv", False, None, "cudnn", "fp32", None),
    ("Memcpy DtoD (Device -> Device)", "memcpy", None, None, None, None, None),
    ("Memset (Device)", "memset", None, None, None, None, None),
    (
        "fmha_cutlassF_bf16_aligned_64x64_rf_sm80(PyTorchMemEffAttention::AttentionKernel"
        "<cutlass::bfloat16_t, cutlass::arch::Sm80, true, 64, 64, 64, true, true>::Params)",
        "attention",
        None,
        "mem_efficient",
        "xformers",
        "bf16",
        "fwd",
    ),
    (
        "void pytorch_flash::flash_fwd_kernel<pytorch_flash::Flash_fwd_kernel_traits<64, 128, 128, 4, "
        "false, false, cutlass::bfloat16_t, pytorch_flash::Flash_kernel_traits<64, 128, 128, 4, "
        "cutlass::bfloat16_t> >, false, false, false, false, true, true, false, false>"
        "(pytorch_flash::Flash_fwd_params)",
        "attention",
        None,
        "flash",
        "flash_attn",
        "bf16",
        "fwd",
    ),
    (
        "void (anonymous namespace)::softmax_warp_forward<float, float, float, 10, true, false>"
        "(float*, float const*, int, int, int, bool const*, int, bool)",
        "softmax",
        None,
        None,
        "aten",
        "fp32",
        "fwd",
    ),
    (
        "void at::native::(anonymous namespace)::cunn_SoftMaxForward<8, c10::BFloat16, float, "
        "c10::BFloat16, at::native::(anonymous namespace)::SoftMaxForwardEpilogue>"
        "(c10::BFloat16*, c10::BFloat16 const*, int)",
        "softmax",
        None,
        None,
        "aten",
        "bf16",
        "fwd",
    ),
    (
        "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
        "at::detail::Array<char*, 1> >(int, at::native::FillFunctor<float>, at::detail::Array<char*, 1>)",
        "elementwise",
        None,
        None,
        "aten",
        "fp32",
        None,
    ),
    (
        "void at::native::(anonymous namespace)::CatArrayBatchedCopy<float, unsigned int, 2, 128, 1>"
        "(float*, at::native::(anonymous namespace)::CatArrInputTensorMetadata<float, unsigned int, 128, 1>,"
        " at::native::(anonymous namespace)::TensorSizeStride<unsigned int, 4u>, int, unsigned int)",
        "copy",
        None,
        None,
        "aten",
        "fp32",
        None,
    ),
    (
        "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::MeanOps<float, "
        "float, float, float>, unsigned int, float, 4> >(at::native::ReduceOp<float, at::native::MeanOps"
        "<float, float, float, float>, unsigned int, float, 4>)",
        "reduction",
        None,
        None,
        "aten",
        "fp32",
        None,
    ),
    (
        "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::BFloat16, float>(int, "
        "float, c10::BFloat16 const*, c10::BFloat16 const*, c10::BFloat16 const*, float*, float*, "
        "c10::BFloat16*)",
        "norm",
        None,
        None,
        "aten",
        "bf16",
        None,
    ),
    (
        "void cudnn::bn_fw_tr_1C11_singleread<float, 512, true, 1, 2, 0>(cudnn::bn_fw_tr_1C11_args<float>)",
        "norm",
        None,
        None,
        "cudnn",
        "fp32",
        "fwd",
    ),
    (
        "void vllm::rms_norm_kernel<c10::BFloat16, 8, 2>(c10::BFloat16*, c10::BFloat16 const*, long, long, "
        "long, long, long, c10::BFloat16 const*, float, int, int)",
        "norm",
        None,
        None,
        "vllm",
        "bf16",
        None,
    ),
    (
        "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)",
        "communication",
        None,
        None,
        "nccl",
        "fp32",
        None,
    ),
    (
        "ncclDevKernel_ReduceScatter_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)",
        "communication",
        None,
        None,
        "nccl",
        "fp32",
        None,
    ),
    ("triton_poi_fused_add_cos_sin_0", "elementwise", None, None, "triton", None, None),
    # hand-written Inductor names
    ("triton_red_fused__to_copy_add_mean_mul_pow_rsqrt_0", "reduction", None, None, "triton", None, None),
    ("triton_per_fused_sum_1", "reduction", None, None, "triton", None, None),
    ("triton_tem_fused_mm_0", "gemm", None, None, "triton", None, None),
    (
        "Cijk_Alik_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT256x32x64_MI16x16x1_SN_LDSB1_AFC1",
        "gemm",
        True,
        None,
        "hipblaslt",
        "bf16",
        None,
    ),
]


@pytest.mark.parametrize("name,category,tc,backend,library,precision,pass_", MUST, ids=lambda v: str(v)[:40])
def test_must_know_names(name, category, tc, backend, library, precision, pass_):
    k = classify(name)
    assert (k.category, k.tensor_core, k.attention_backend, k.library, k.precision, k.pass_) == (
        category,
        tc,
        backend,
        library,
        precision,
        pass_,
    )
    assert k.rule is not None and k.confidence == "rule"


ATTENTION = [
    # the attention story: which SDPA / package backend ran (hand-written where the corpus has none)
    (
        "fmha_cutlassF_f32_aligned_64x64_rf_sm80(PyTorchMemEffAttention::AttentionKernel<float, "
        "cutlass::arch::Sm80, true, 64, 64, 64, true, true>::Params)",
        "mem_efficient",
        "fwd",
    ),
    (
        "fmha_cutlassB_bf16_aligned_128x64_k128_sm80(PyTorchMemEffAttention::AttentionBackwardKernel<"
        "cutlass::arch::Sm80, cutlass::bfloat16_t, true, false, true, 128, 64, 128, false>::Params)",
        "mem_efficient",
        "bwd",
    ),
    (
        "void pytorch_flash::flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel<pytorch_flash::Flash_bwd_kernel_"
        "traits<64, 128, 128, 8, 2, 4, 2, false, false, cutlass::bfloat16_t> >(pytorch_flash::Flash_bwd_params)",
        "flash",
        "bwd",
    ),
    (
        "void flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, cutlass::bfloat16_t, "
        "Flash_kernel_traits<128, 128, 64, 4, cutlass::bfloat16_t> >, false, true>(Flash_fwd_params)",
        "flash_attn",
        "fwd",
    ),
    (
        "void flash_fwd_splitkv_kernel<Flash_fwd_kernel_traits<128, 64, 128, 4, false, false, cutlass::half_t"
        "> >(Flash_fwd_params)",
        "flash_attn",
        "fwd",
    ),
    (
        "void flash_bwd_dot_do_o_kernel<true, Flash_bwd_kernel_traits<64, 128, 128, 8, 4, 4, 4, false, "
        "false, cutlass::half_t> >(Flash_bwd_params)",
        "flash_attn",
        "bwd",
    ),
    (
        "void cutlass::device_kernel<flash::enable_sm90_or_later<flash::FlashAttnFwdSm90<flash::"
        "CollectiveMainloopFwdSm90<2> > > >(flash::FlashAttnFwdSm90<...>::Params)",
        "flash_attn",
        "fwd",
    ),
    (
        "cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_3_128x128x128_4x1x1_kernel0_0",
        "cudnn",
        "fwd",
    ),
    (
        "fmhaSm100fKernel_QkvBfloat16OBfloat16H128PagedKvCausalP64VarSeqQ8Kv128PersistentSwapsAbForGen",
        "trtllm",
        "fwd",
    ),
    ("attn_fwd", "triton", "fwd"),
    ("triton_tem_fused_flex_attention_0", "flex", None),
]


@pytest.mark.parametrize("name,backend,pass_", ATTENTION, ids=lambda v: str(v)[:40])
def test_attention_backends(name, backend, pass_):
    k = classify(name)
    assert (k.category, k.attention_backend, k.tensor_core) == ("attention", backend, None)
    if pass_:
        assert k.pass_ == pass_


def test_unknown_name_is_other():
    k = classify("my_custom_kernel_v3(float*)")
    assert (k.category, k.rule, k.tensor_core, k.library, k.confidence) == ("other", None, None, None, None)
    assert k.precision == "fp32"  # traits still read what the name does say


def test_kernel_class_is_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        classify("volta_sgemm_64x64_nn").category = "conv"


# --------------------------------------------------------------------------- tables


NAMES = ["volta_sgemm_64x64_nn", "Memset (Device)", "attn_fwd", "my_custom_kernel"]


def test_classify_names_dedups_and_types():
    df = classify_names(NAMES + NAMES[::-1])
    assert list(df.index) == NAMES and list(df.columns) == list(COLUMNS)
    assert df["tensor_core"].dtype == "boolean"
    for col in ("category", "attention_backend", "library", "precision", "pass", "rule", "confidence"):
        assert isinstance(df[col].dtype, pd.CategoricalDtype), col
    assert (
        df.loc["volta_sgemm_64x64_nn", "tensor_core"] is np.False_
        or not df.loc["volta_sgemm_64x64_nn", "tensor_core"]
    )
    assert pd.isna(df.loc["Memset (Device)", "tensor_core"])
    assert df.loc["my_custom_kernel", "category"] == "other"
    assert "other" in df["category"].cat.categories and "gemm" in df["category"].cat.categories


@pytest.mark.parametrize("as_category", [True, False])
def test_annotate_maps_through_codes(as_category):
    names = pd.Series(NAMES * 3 + [None], dtype="category" if as_category else object)
    kernels = pd.DataFrame(
        {"name": names.array, "dur_ns": np.arange(len(names), dtype="int64")},
        index=np.arange(100, 100 + len(names)),
    )
    out = annotate(kernels)
    assert list(out.columns) == ["name", "dur_ns", *COLUMNS]
    assert list(out.index) == list(kernels.index) and "category" not in kernels.columns
    assert list(out["category"][:4]) == ["gemm", "memset", "attention", "other"]
    assert out["tensor_core"].iloc[0] is np.False_ or out["tensor_core"].iloc[0] == False  # noqa: E712
    assert out["attention_backend"].iloc[2] == "triton"
    assert out["category"].isna().iloc[-1]  # a missing name stays missing


def test_annotate_is_fast_for_a_million_rows():
    distinct = [
        f"void at::native::vectorized_elementwise_kernel<4, Functor{i}<float> >(int)" for i in range(990)
    ]
    distinct += [f"volta_sgemm_{i}x64_nn" for i in range(10)]
    codes = np.random.default_rng(0).integers(0, len(distinct), 1_000_000)
    names = pd.Categorical.from_codes(codes, categories=distinct)
    kernels = pd.DataFrame({"name": names, "dur_ns": np.ones(len(codes), dtype="int64")})
    t0 = time.perf_counter()
    out = annotate(kernels)
    assert time.perf_counter() - t0 < 10
    assert (out["category"] == "gemm").sum() == (codes >= 990).sum()


def test_unclassified_reports_both_tiers_by_time():
    kernels = pd.DataFrame(
        {
            "name": ["mystery_a", "volta_sgemm_64x64_nn", "mystery_b", "mystery_a", "matmul_kernel"],
            "dur_ns": np.array([10, 50, 30, 10, 40], dtype="int64"),
        }
    )
    out = unclassified(kernels)
    assert list(out.columns) == ["name", "count", "total_ns", "pct_time", "tier", "rule"]
    assert list(out["name"]) == ["mystery_b", "mystery_a", "matmul_kernel"]  # tier "none" first
    assert list(out["tier"]) == ["none", "none", "name"]
    assert list(out["rule"]) == [None, None, "name-word:matmul"]
    assert list(out["count"]) == [1, 2, 1] and list(out["total_ns"]) == [30, 20, 40]
    assert out["pct_time"].tolist() == pytest.approx([100 * 30 / 140, 100 * 20 / 140, 100 * 40 / 140])


# --------------------------------------------------------------------------- user rule files


def _write(tmp_path, text, name="my_rules.toml"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_user_rule_overrides_default(tmp_path):
    path = _write(
        tmp_path,
        """
version = 1
categories = ["my_gemm"]

[[rule]]
id = "my_sgemm"
pattern = '^volta_sgemm_'
category = "my_gemm"
library = "mine"
tensor_core = false
""",
    )
    rules = default_rules().with_overrides(load_rules(path))
    k = classify("volta_sgemm_64x64_nn", rules)
    assert (k.category, k.library, k.rule, k.precision) == ("my_gemm", "mine", "my_sgemm", "fp32")
    assert classify("ampere_sgemm_32x128_nt", rules).rule == "cublas_simt_gemm"  # defaults still there
    assert classify_names(["volta_sgemm_64x64_nn"], rules)["category"].iloc[0] == "my_gemm"


def test_user_rule_with_default_id_replaces_it(tmp_path):
    path = _write(
        tmp_path,
        """
[[rule]]
id = "memset"
pattern = '^Memset'
category = "copy"
""",
    )
    rules = default_rules().with_overrides(load_rules(path))
    assert [r.id for r in rules.rules].count("memset") == 1
    assert classify("Memset (Device)", rules).category == "copy"


BAD = {  # each problem is named by its key path (msgspec's, 0-based) and the rule's id
    "bad regex": (
        "[[rule]]\nid = 'x'\npattern = '(unclosed'\ncategory = 'gemm'\n",
        "rule[0].pattern: bad regex",
    ),
    "unknown field": (
        "[[rule]]\nid = 'x'\npattern = 'a'\ncategory = 'gemm'\ncolour = 'red'\n",
        "rule[0]: unknown field 'colour' (rule 'x')",
    ),
    "bad category": (
        "[[rule]]\nid = 'x'\npattern = 'a'\ncategory = 'matmul'\n",
        "rule[0].category: bad category 'matmul'",
    ),
    "bad precision": (
        "[[rule]]\nid = 'x'\npattern = 'a'\nprecision = 'fp12'\n",
        "rule[0].precision: bad precision",
    ),
    "bad tensor_core": (
        "[[rule]]\nid = 'x'\npattern = 'a'\ncategory = 'gemm'\ntensor_core = 'yes'\n",
        "rule[0].tensor_core: bad value 'yes'",
    ),
    "number tensor_core": (
        "[[rule]]\nid = 'x'\npattern = 'a'\ncategory = 'gemm'\ntensor_core = 1\n",
        "rule[0].tensor_core: expected boolean or string, got integer",
    ),
    "bad pass": ("[[rule]]\nid = 'x'\npattern = 'a'\npass = 'up'\n", "rule[0].pass: bad value 'up'"),
    "missing pattern": ("[[rule]]\nid = 'x'\ncategory = 'gemm'\n", "rule[0]: missing 'pattern' (rule 'x')"),
    "missing id": ("[[rule]]\npattern = 'a'\ncategory = 'gemm'\n", "rule[0]: missing 'id'"),
    "empty id": ("[[rule]]\nid = ''\npattern = 'a'\ncategory = 'gemm'\n", "rule[0].id: must not be empty"),
    "second rule": (
        "[[rule]]\nid = 'x'\npattern = 'a'\ncategory = 'gemm'\n"
        "[[rule]]\nid = 'y'\npattern = 'b'\nlibrary = 'l'\nexamples = ['n', 2]\n",
        "rule[1].examples[1]: expected string, got integer (rule 'y')",
    ),
    "sets nothing": ("[[rule]]\nid = 'x'\npattern = 'a'\n", "rule[0]: sets no field"),
    "duplicate id": ("[[rule]]\nid = 'x'\npattern = 'a'\ncategory = 'gemm'\n" * 2, "duplicate rule id"),
    "unknown top key": ("verison = 2\n", "unknown top-level key 'verison'"),
    "version a string": ("version = '1'\n", "version: expected integer, got string"),
    "rule not a table": ("rule = 3\n", "rule: expected array, got integer"),
    "categories not strings": ("categories = [1]\n", "categories[0]: expected string, got integer"),
    "not toml": ("[[rule]\nid = ", "not a valid TOML rule file"),
    "bad applies_to": (
        "[[rule]]\nid = 'x'\npattern = 'a'\nlibrary = 'l'\napplies_to = ['nope']\n",
        "rule[0].applies_to: bad category 'nope'",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_malformed_rule_file_raises(tmp_path, case):
    text, problem = BAD[case]
    path = _write(tmp_path, text, name=f"bad_{case.replace(' ', '_')}.toml")
    with pytest.raises(RuleError) as info:
        load_rules(path)
    msg = str(info.value)
    assert str(path) in msg and problem in msg and "\n" not in msg


WORDS_OK = "tensor_core_words = ['mma']\n[[word]]\nwords = ['matmul']\ncategory = 'gemm'\nsource = 's'\n"
BAD_WORDS = {
    "capital word": (WORDS_OK.replace("'matmul'", "'MatMul'"), "word[0].words[0]: expected string matching"),
    "unknown field": (WORDS_OK + "colour = 'red'\n", "word[0]: unknown field 'colour'"),
    "no words": (WORDS_OK.replace("['matmul']", "[]"), "word[0].words: must not be empty"),
    "bad category": (WORDS_OK.replace("'gemm'", "'matmul'"), "word[0].category: bad category 'matmul'"),
    "no tensor_core_words": (WORDS_OK.split("\n", 1)[1], "missing 'tensor_core_words'"),
    "twice": (WORDS_OK + WORDS_OK.split("\n", 1)[1], "word 'matmul' appears twice"),
}


def test_the_name_tier_table_is_checked(tmp_path):
    """kernel_words.toml goes through the same Structs: a broken edit fails in one line naming the key."""
    cats = default_rules().categories
    assert _load_words(_write(tmp_path, WORDS_OK, "w.toml"), cats).lookup["matmul"][0] == 0
    for case, (text, problem) in BAD_WORDS.items():
        path = _write(tmp_path, text, f"w_{case.replace(' ', '_')}.toml")
        with pytest.raises(RuleError) as info:
            _load_words(path, cats)
        msg = str(info.value)
        assert str(path) in msg and problem in msg and "\n" not in msg, (case, msg)


def test_a_user_file_may_declare_categories_and_precisions(tmp_path):
    path = _write(
        tmp_path,
        "categories = ['mine']\nprecisions = ['fp6']\n[[rule]]\nid = 'x'\npattern = '^x'\n"
        "category = 'mine'\nprecision = 'fp6'\ntensor_core = 'none'\npass = 'bwd'\n",
    )
    k = classify("x_kernel", rules=path)
    assert (k.category, k.precision, k.tensor_core, k.pass_, k.rule) == ("mine", "fp6", None, "bwd", "x")


def test_missing_rule_file_raises(tmp_path):
    with pytest.raises(RuleError, match=r"nope\.toml"):
        load_rules(tmp_path / "nope.toml")


def test_user_rule_beats_a_name_guess(tmp_path):
    assert classify("my_matmul_kernel").confidence == "name"
    path = _write(tmp_path, "[[rule]]\nid = 'mine'\npattern = '^my_matmul'\ncategory = 'elementwise'\n")
    k = classify("my_matmul_kernel", rules=path)
    assert (k.category, k.rule, k.confidence) == ("elementwise", "mine", "rule")


def test_user_rule_may_not_take_a_name_tier_id(tmp_path):
    path = _write(tmp_path, "[[rule]]\nid = 'name-word:x'\npattern = 'a'\ncategory = 'gemm'\n")
    with pytest.raises(RuleError, match="name tier"):
        load_rules(path)


def test_rules_may_be_given_as_a_path(tmp_path):
    # the loader passes load(..., rules=...) straight through; a path means "defaults + this file"
    path = _write(tmp_path, "[[rule]]\nid = 'mine'\npattern = '^mystery_'\ncategory = 'gemm'\n")
    kernels = pd.DataFrame({"name": ["mystery_a", "Memset (Device)"], "dur_ns": [1, 2]})
    out = annotate(kernels, rules=path)
    assert list(out["category"]) == ["gemm", "memset"] and list(out["rule"]) == ["mine", "memset"]
    assert classify("mystery_z", rules=str(path)).rule == "mine"
