"""The workload verdict (issue 32 items 1-2): diff's first finding after any incomplete-trace
warning says same work / different work / cannot tell, and on what evidence.

Pairs are real corpus traces, or a real trace and a copy of it edited in one way (shapes removed,
a GEMM's grid widened, launches turned into graph replays, another GPU, rank, world size, dtype),
so each way two traces can differ is tried on its own against real kernels and ops."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import pytest
from corpus import CORPUS, SKIP_REASON

import traceview as tv

SAMPLES = Path(__file__).resolve().parent.parent / "sample_traces"
_TUTORIAL = "log_transformer__dc3b0e7228dd_851.1752215573993169006.pt.trace.json.gz"
TUTORIAL = CORPUS / "torch_profiling_tutorial" / _TUTORIAL
_TUTORIAL_2 = "log_transformer__dcb0aa1a78e7_4399.1752181589621105859.pt.trace.json.gz"
TUTORIAL_2 = CORPUS / "torch_profiling_tutorial" / _TUTORIAL_2
PARAM = sorted((CORPUS / "param").glob("dlrm_kineto__worker*_step_12.*.json.gz"))
BERT = CORPUS / "tracelens/h100__gaunernst_bert-small-uncased__1016001.json.gz"
FALCON = CORPUS / "tracelens/h100__Falconsai_nsfw_image_detection__1016002.json.gz"
TOKENOMICS = [CORPUS / "tokenomics/trace0.json.gz", CORPUS / "tokenomics/trace1.json.gz"]
# the tutorial's GEMM with the most time: 6 launches of grid 128x1x1
WIDE_GEMM = "sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x64x32"
GEMV = (
    "void gemv2T_kernel_val<int, int, float, float, float, float, 128, 16, 4, 4, false, false, false, true, "
    "false, cublasGemvParamsEx<int, cublasGemvTensorStridedBatched<float const>, "
    "cublasGemvTensorStridedBatched<float const>, cublasGemvTensorStridedBatched<float>, float> >"
)
needs = pytest.mark.skipif(not CORPUS.is_dir(), reason=SKIP_REASON)


def _doc(path: Path) -> dict:
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return json.load(fh)


def _write(doc: dict, path: Path) -> Path:
    with gzip.open(path, "wt", encoding="utf-8") as fh:
        json.dump(doc, fh)
    return path


def _no_shapes(doc: dict) -> dict:
    for e in doc["traceEvents"]:
        (e.get("args") or {}).pop("Input Dims", None)
    return doc


def _kernels(doc: dict, start: str):
    return [e for e in doc["traceEvents"] if e.get("cat") == "kernel" and e["name"].startswith(start)]


def verdict(a, b) -> str:
    """The first finding after the incomplete-trace warnings, which every later one must follow."""
    r = tv.diff(tv.load(a), tv.load(b))
    first = next(f for f in r.findings if " is incomplete: " not in f)
    assert r["verdict"]["verdict"].iloc[0] == first.split(" (judged on ")[0].removesuffix(
        " whether A and B run the same work"
    )
    return first


def _edited(tmp_path: Path, name: str, edit, src: Path = TUTORIAL) -> Path:
    return _write(edit(_doc(src)), tmp_path / f"{name}.json.gz")


# ------------------------------------------------------------------ same work


@pytest.mark.parametrize("variant", ["naive_inplace", "sdpa_math", "sdpa_flash", "sdpa_auto"])
def test_naive_and_every_sdpa_sample_are_the_same_work(variant):
    """The work is the model's (torch's FLOP count): flash's causal skipping does not change it."""
    first = verdict(SAMPLES / "naive.json.gz", SAMPLES / f"{variant}.json.gz")
    assert first.startswith("same work (judged on shapes): both ask 1,048,576 FLOPs per step"), first


@needs
def test_two_ranks_of_one_step_are_the_same_work_and_the_ranks_are_said():
    first = verdict(PARAM[0], PARAM[1])
    assert first.startswith("same work (judged on shapes): both ask 60,487,168 FLOPs per step"), first
    assert "A is rank 0, B rank 1: time waiting on peers depends on ranks neither file holds" in first


@needs
def test_two_recordings_of_the_tutorial_model_are_the_same_work():
    assert verdict(TUTORIAL, TUTORIAL_2).startswith("same work (judged on shapes)")


@needs
def test_without_shapes_the_same_grids_are_the_same_work(tmp_path):
    a = _edited(tmp_path, "a", _no_shapes)
    b = _edited(tmp_path, "b", _no_shapes, TUTORIAL_2)
    doc = _doc(TUTORIAL)
    sms = doc["deviceProperties"][0]["numSms"]  # 132: a persistent kernel's grid, whatever the size
    blocks = [
        (e["name"], e["args"]["grid"][0] * e["args"]["grid"][1] * e["args"]["grid"][2])
        for e in _kernels(doc, "")
    ]
    persistent = {n for n, b in blocks if b % sms == 0 and b // sms <= 4}
    names = {n for n, _ in blocks} - persistent  # a plain-json count of the kernels whose grid tells
    assert len(persistent) == 1  # the tutorial's 128x128 GEMM: 132 blocks, as 132x1 and as 66x2
    first = verdict(a, b)
    assert first.startswith(
        "same work (judged on launch configurations): neither trace recorded shapes; "
        f"{len(names)} kernels run on both sides with the same grids and blocks "
    ), first


@needs
def test_ranks_without_shapes_judged_on_grids():
    first = verdict(*TOKENOMICS)
    assert first.startswith("same work (judged on launch configurations): neither trace recorded shapes")
    assert "A is rank 0, B rank 1" in first


# ------------------------------------------------------------------ different work


@needs
def test_other_shapes_are_different_work_with_the_gemm_rows():
    first = verdict(BERT, FALCON)
    assert first.startswith("different work (judged on shapes): B's ops ask 17.15x the FLOPs of A's"), first
    assert "B's GEMMs have M = 788 (72 ops)" in first
    assert first.endswith("the differences below describe the two workloads, not changes of code")


@needs
def test_no_shapes_and_a_wider_grid_is_different_work_in_numbers(tmp_path):
    def wider(doc):
        for e in _kernels(_no_shapes(doc), WIDE_GEMM):
            assert e["args"]["grid"] == [128, 1, 1]  # the real trace's: checked, not assumed
            e["args"]["grid"] = [128, 4, 1]
        return doc

    first = verdict(_edited(tmp_path, "a", _no_shapes), _edited(tmp_path, "b", wider))
    assert first.startswith(
        "different work (judged on launch configurations): B's GEMMs have 4.00x the output per launch: "
        f"grid 128 → 128x4 on the same kernel ({WIDE_GEMM}"
    ), first


@needs
def test_a_decode_step_replayed_from_a_graph_against_an_eager_prefill(tmp_path):
    """B: every launch a cudaGraphLaunch, no shapes, and its GEMMs cuBLAS's gemv (one row)."""

    def decode(doc):
        for e in _no_shapes(doc)["traceEvents"]:
            if e.get("cat") == "cuda_runtime" and e["name"].startswith("cudaLaunchKernel"):
                e["name"] = "cudaGraphLaunch"
            if e.get("cat") == "kernel" and re.search(r"xmma_gemm|s1688gemm", e["name"]):
                e["name"] = GEMV
        return doc

    first = verdict(TUTORIAL, _edited(tmp_path, "b", decode))
    assert first.startswith("different work (judged on kernel names): A: many-row GEMMs"), first
    assert "B: one-row GEMMs (100% of GEMM time in matrix-vector kernels (gemv: M = 1, decode))" in first
    assert "B's kernels are CUDA graph replays (no CPU op, no shapes), A's launched one by one" in first
    r = tv.diff(tv.load(TUTORIAL), tv.load(tmp_path / "b.json.gz"))
    text = " ".join(r.findings)
    assert "moved" not in text and "regression" not in text and " is gone in B" not in text


@needs
def test_graph_replay_of_the_same_kernels_is_the_same_work(tmp_path):
    def replay(doc):
        for e in _no_shapes(doc)["traceEvents"]:
            if e.get("cat") == "cuda_runtime" and e["name"].startswith("cudaLaunchKernel"):
                e["name"] = "cudaGraphLaunch"
        return doc

    first = verdict(TUTORIAL, _edited(tmp_path, "b", replay))
    assert first.startswith("same work (judged on launch configurations): B recorded no shapes"), first
    assert "B's kernels are CUDA graph replays" in first


@needs
def test_another_world_size_is_different_work(tmp_path):
    def world(n):
        def edit(doc):
            doc["distributedInfo"] = {"backend": "nccl", "rank": 0, "world_size": n}
            return doc

        return edit

    first = verdict(_edited(tmp_path, "a", world(8)), _edited(tmp_path, "b", world(2)))
    assert first.startswith("different work (judged on distributedInfo): A is one of 8 ranks, B one of 2"), (
        first
    )


@needs
def test_another_dtype_is_different_work(tmp_path):
    def bf16(doc):
        for e in doc["traceEvents"]:
            types = (e.get("args") or {}).get("Input type")
            if e.get("cat") == "cpu_op" and isinstance(types, list):
                e["args"]["Input type"] = ["c10::BFloat16" if t == "float" else t for t in types]
        return doc

    first = verdict(TUTORIAL, _edited(tmp_path, "b", bf16))
    assert first.startswith("different work (judged on shapes): A's ops compute in fp32, B's in bf16"), first


# ------------------------------------------------------------------ other GPUs, cannot tell


@needs
def test_another_gpu_with_shapes_is_judged_on_shapes_and_said(tmp_path):
    def a100(doc):
        for d in doc["deviceProperties"]:
            d["name"] = "NVIDIA A100-SXM4-80GB"
        return doc

    first = verdict(TUTORIAL, _edited(tmp_path, "b", a100))
    assert first.startswith("same work (judged on shapes)"), first
    assert "A ran on NVIDIA H100 80GB HBM3, B on NVIDIA A100-SXM4-80GB: times include the hardware" in first


@needs
def test_another_gpu_without_shapes_or_shared_kernels_cannot_tell(tmp_path):
    def a100(doc):
        for d in _no_shapes(doc)["deviceProperties"]:
            d["name"] = "NVIDIA A100-SXM4-80GB"
        for e in doc["traceEvents"]:
            if e.get("cat") == "kernel":
                e["name"] = "sm80_" + e["name"]  # another GPU's library: other kernels
        return doc

    first = verdict(_edited(tmp_path, "a", _no_shapes), _edited(tmp_path, "b", a100))
    assert first.startswith(
        "cannot tell whether A and B run the same work (judged on launch configurations): neither trace "
        "recorded shapes and no kernel runs on both sides; they ran on different GPUs"
    ), first
    r = tv.diff(tv.load(tmp_path / "a.json.gz"), tv.load(tmp_path / "b.json.gz"))
    text = " ".join(r.findings)
    assert "moved" not in text and " is gone in B" not in text and " is new in B" not in text


def test_verdict_is_in_the_json():
    from click.testing import CliRunner

    from traceview.cli import main

    pair = [str(SAMPLES / "naive.json.gz"), str(SAMPLES / "sdpa_flash.json.gz")]
    res = CliRunner().invoke(main, ["diff", *pair, "--format", "json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["info"]["workload_verdict"] == "same work" and doc["info"]["workload_evidence"] == "shapes"
    assert doc["tables"]["verdict"] == [
        {
            "verdict": "same work",
            "evidence": "shapes",
            "why": "both ask 1,048,576 FLOPs per step by torch's count of their recorded shapes",
        }
    ]
    assert doc["findings"][0]["text"].startswith("same work")
    assert {e["table"] for e in doc["findings"][0]["evidence"]} == {"verdict"}


@needs
def test_compare_says_each_traces_verdict_against_the_baseline():
    r = tv.compare([tv.load(BERT), tv.load(FALCON), tv.load(BERT)])
    v = r["verdict"].set_index("trace")
    assert len(v) == 2 and set(v["verdict"]) == {"different work", "same work"}, v
    said = [f for f in r.findings if "against the baseline" in f]
    other = v.index[v["verdict"] == "different work"][0]  # Falcon's label, as compare made it
    assert len(said) == 1 and said[0].startswith(f"{other} (B) against the baseline"), said
    assert "different work (judged on shapes): B's ops ask 17.15x the FLOPs of A's" in said[0]


@needs
def test_a_file_past_the_read_cap_is_not_read_again_and_the_verdict_says_so(tmp_path, monkeypatch):
    """Launch configurations are read by decoding the file a second time: past max_config_read_mib
    (here 0, rules/workload.toml says 256) they are not, and 'cannot tell' says why."""
    import msgspec

    from traceview.analyses.variants import workload

    capped = msgspec.structs.replace(workload.rules(), max_config_read_mib=0)
    monkeypatch.setattr(workload, "rules", lambda: capped)
    first = verdict(_edited(tmp_path, "a", _no_shapes), _edited(tmp_path, "b", _no_shapes, TUTORIAL_2))
    assert first.startswith("cannot tell whether A and B run the same work"), first
    assert "A: launch configurations not read from a file of 0 MiB (rules/workload.toml)" in first


def _gemm_grids(x: int, rename: bool):
    """No shapes, every GEMM on a grid of x by 4 tiles; every kernel renamed (``rename``: no kernel
    then runs on both sides)."""

    def edit(doc):
        for e in _no_shapes(doc)["traceEvents"]:
            if e.get("cat") == "kernel":
                if re.search(r"xmma_gemm|s1688gemm", e["name"]):
                    e["args"]["grid"] = [x, 4, 1]
                e["name"] += "_b" if rename else ""
        return doc

    return edit


@needs
def test_no_shared_kernel_but_gemm_tiles_times_grids_apart_is_different_work(tmp_path):
    """A's GEMMs on 8x4 tiles write at most 32 tiles each; B's on 32x4 more than 31 x 3 = 93."""
    first = verdict(
        _edited(tmp_path, "a", _gemm_grids(8, False)), _edited(tmp_path, "b", _gemm_grids(32, True))
    )
    assert first.startswith(
        "different work (judged on launch configurations): neither trace recorded shapes and no kernel runs "
        "on both sides, but by tile × grid B's GEMM kernels wrote more than "
    ), first


@needs
def test_no_shared_kernel_and_overlapping_gemm_bounds_cannot_tell(tmp_path):
    first = verdict(
        _edited(tmp_path, "a", _gemm_grids(8, False)), _edited(tmp_path, "b", _gemm_grids(10, True))
    )
    assert first.startswith(
        "cannot tell whether A and B run the same work (judged on launch configurations): neither trace "
        "recorded shapes and no kernel runs on both sides"
    ), first


@needs
def test_junk_launch_configurations_read_as_missing(tmp_path):
    """Trace text is untrusted: grids and blocks that are no list of 1-3 positive ints, args that
    are no object, a kernel named by a number: missing grids, never an error."""
    junk = ["abc", [0, 1, 1], [-1], [1e30, 1, 1], [True, 1, 1], None, [1, 2, 3, 4], {"x": 1}]

    def spoil(doc):
        kernels = [e for e in doc["traceEvents"] if e.get("cat") == "kernel"]
        assert len(kernels) == len(junk)  # the real trace's 8 kernels
        for e, j in zip(kernels, junk, strict=True):
            e["args"]["grid"] = e["args"]["block"] = j
        doc["traceEvents"].append({"ph": "X", "cat": "kernel", "name": 7, "ts": 1, "dur": 1, "args": [1]})
        return doc

    first = verdict(_edited(tmp_path, "a", spoil, TOKENOMICS[0]), TOKENOMICS[1])
    assert first.startswith(
        "cannot tell whether A and B run the same work (judged on launch configurations): neither trace "
        "recorded shapes and no kernel on both sides has a recorded grid"
    ), first


NEIGHBOURS = [  # corpus pairs of other work, or work not known the same
    ("hta/trace_diff__control__control.json.gz", "hta/trace_diff__test__test.json.gz"),
    ("tracelens/h100__gaunernst_bert-small-uncased__1016001.json.gz", "switchtransformers/trace.json.gz"),
    (
        "tracelens/b300__moe_01_many_experts_few_tokens.json.gz",
        "tracelens/b300__moe_05_large_capacity.json.gz",
    ),
    (
        "kineto/tb_plugin_samples__resnet50_autograd_api_num_workers_0__worker0.pt.trace.json.gz",
        "param/et_replay__resnet_kineto.json.gz",
    ),
    (
        "tracelens/b300__sglang_deepseek_r1__1782843274.7730265-TP-0-DECODE.trace.json.gz",
        "tracelens/b200__eager_trace.json.gz",
    ),
]
CAUSE = re.compile(r"\bmoved\b|regress|is gone in B|is new in B|changed from")


@needs
@pytest.mark.parametrize(
    "pair", NEIGHBOURS, ids=lambda p: p[0].split("/")[-1][:20] + "-" + p[1].split("/")[-1][:20]
)
def test_on_other_work_no_sentence_names_a_cause(pair):
    r = tv.diff(*(tv.load(CORPUS / p) for p in pair))
    kind = r["verdict"]["verdict"].iloc[0]
    assert kind != "same work", r.findings
    after = r.findings[r.findings.index(next(f for f in r.findings if f.startswith(kind))) + 1 :]
    assert not [f for f in after if CAUSE.search(f)], after
    rates = [f for f in after if " reach " in f or f.startswith(("new in B", "worse in B"))]
    assert all(f.endswith("(or work not known to be the same)") for f in rates), rates
