"""Every sentence checkable (issue 18 item 3): each finding of diff and compare is an object with its
``text`` and its ``evidence``; every number the text states is re-derived here from the table cells it
cites, read back with the documented rounding (``analyses.wording.words.reads``), and no digit of the
text is left unexplained. Real corpus pairs through the CLI's JSON."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from corpus import CORPUS, SKIP_REASON

from traceview.analyses.wording.words import reads
from traceview.cli import main

SAMPLES = Path(__file__).resolve().parent.parent / "sample_traces"

DIFF_PAIRS = [
    (  # two H100 models with [memory] events: the memory sentence
        "tracelens/h100__gaunernst_bert-small-uncased__1016001.json.gz",
        "tracelens/h100__Falconsai_nsfw_image_detection__1016002.json.gz",
    ),
    ("tracelens/b300__moe_01_many_experts_few_tokens.json.gz", "tracelens/b300__moe_03_top1_sparse.json.gz"),
    ("tokenomics/trace0.json.gz", "tokenomics/trace1.json.gz"),
    ("kineto/docs_traces__before_fix_trace.json.gz", "kineto/docs_traces__after_fix_trace.json.gz"),
    (
        "tracelens/h100__gaunernst_bert-small-uncased__1016001.json.gz",
        "rocm/tracelens__mi300__gaunernst_bert-small-uncased__1016001.json.gz",
    ),
    (  # fp32 GEMMs on an A100's CUDA cores vs bf16 on an H100's tensor cores: the cross-device sentence
        "switchtransformers/trace.json.gz",
        "tracelens/h100__gaunernst_bert-small-uncased__1016001.json.gz",
    ),
]
COMPARE_SETS = [
    [
        "tracelens/b300__moe_01_many_experts_few_tokens.json.gz",
        "tracelens/b300__moe_03_top1_sparse.json.gz",
        "tracelens/b300__moe_05_large_capacity.json.gz",
    ],
    [
        "tokenomics/trace0.json.gz",
        "tokenomics/trace1.json.gz",
        "tokenomics/llama_trace_4layers0_with_annotations.json.gz",
    ],
    [
        "tracelens/h100__gaunernst_bert-small-uncased__1016001.json.gz",
        "rocm/tracelens__mi300__gaunernst_bert-small-uncased__1016001.json.gz",
    ],
    ["switchtransformers/trace.json.gz", "tracelens/h100__gaunernst_bert-small-uncased__1016001.json.gz"],
]
needs_corpus = pytest.mark.skipif(not CORPUS.is_dir(), reason=SKIP_REASON)


def _json(args, tmp_path) -> dict:
    res = CliRunner().invoke(
        main, [*args, "--format", "json"], env={"TRACEVIEW_CACHE_DIR": str(tmp_path)}, catch_exceptions=False
    )
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def _cell(doc: dict, e: dict):
    if e["table"] == "info":  # the report's facts: one row
        return doc["info"][e["column"]]
    if e.get("sum"):  # the column summed over the rows the key selects ({}: all)
        return sum(
            r[e["column"]]
            for r in doc["tables"][e["table"]]
            if all(r.get(k) == v for k, v in e["row"].items())
        )
    rows = [r for r in doc["tables"][e["table"]] if all(r.get(k) == v for k, v in e["row"].items())]
    assert len(rows) == 1, f"evidence {e} matches {len(rows)} rows of table {e['table']}"
    return rows[0][e["column"]]


def unexplained(doc: dict, finding: dict) -> str:
    """The finding's text with every cited figure taken out where it stands (checked to be there);
    what is left must hold no digit."""
    rest = finding["text"]
    for e in finding["evidence"]:
        shown = reads(_cell(doc, e), e["reads"])
        if e.get("sum"):  # JSON rounds each per-step cell to the ns: the sum is within half a ns a row
            half = len(doc["tables"][e["table"]]) // 2 + 1
            near = [reads(_cell(doc, e) + d, e["reads"]) for d in range(-half, half + 1)]
            shown = next((x for x in near if x in rest), shown)
        pattern = r"(?<![\d.])" + re.escape(shown) + r"(?![\d])"
        assert re.search(pattern, rest), f"{shown!r} ({e}) is not in: {finding['text']}"
        rest = re.sub(pattern, " ", rest, count=1)
    return rest


def check_all(doc: dict) -> None:
    assert doc["findings"], doc["title"]
    for f in doc["findings"]:
        assert set(f) == {"text", "evidence"}, f
        rest = unexplained(doc, f)
        assert not re.search(r"\d", rest), f"a number with no evidence in: {f['text']!r} (left: {rest!r})"


@needs_corpus
@pytest.mark.parametrize("pair", DIFF_PAIRS, ids=lambda p: p[0].split("/")[-1][:30])
def test_every_diff_number_rederived_from_its_cells(pair, tmp_path):
    check_all(_json(["diff", *(str(CORPUS / p) for p in pair)], tmp_path))


@needs_corpus
@pytest.mark.parametrize("paths", COMPARE_SETS, ids=lambda p: p[0].split("/")[-1][:30])
def test_every_compare_number_rederived_from_its_cells(paths, tmp_path):
    check_all(_json(["compare", *(str(CORPUS / p) for p in paths)], tmp_path))


@needs_corpus
def test_top_keeps_every_cited_row(tmp_path):
    """--top 1 cuts the long tables, but not below the rows the findings cite."""
    pair = [str(CORPUS / p) for p in DIFF_PAIRS[0]]
    doc = _json(["diff", *pair, "--top", "1"], tmp_path)
    cited = [e for f in doc["findings"] for e in f["evidence"] if e["table"] in ("only_in_a", "only_in_b")]
    assert cited and any(len(doc["tables"][t]) > 1 for t in ("only_in_a", "only_in_b"))
    for e in cited:
        _cell(doc, e)  # exactly one row


@needs_corpus
@pytest.mark.parametrize("command", ["diff", "compare"])
def test_cuda_core_side_cites_its_own_tensor_peak(command, tmp_path):
    """The CUDA-core side's tensor-core peak and its share of it are cells of a table, not only words."""
    pair = [str(CORPUS / p) for p in DIFF_PAIRS[-1]]
    doc = _json([command, *pair], tmp_path)
    said = [f for f in doc["findings"] if "run on CUDA cores at" in f["text"]]
    assert len(said) == 1, doc["findings"]
    cols = {e["column"] for e in said[0]["evidence"]}
    assert {"gemm_tensor_peak_tflops", "gemm_pct_of_tensor_peak"} <= cols
    table = doc["tables"]["efficiency" if command == "diff" else "compare"]
    cuda = [r for r in table if r["gemm_tensor_peak_tflops"] is not None]
    assert len(cuda) == 1 and cuda[0]["device"].startswith("NVIDIA A100")
    assert cuda[0]["gemm_tensor_peak_tflops"] == 312  # the A100's bf16 dense tensor-core peak (datasheet)
    assert abs(cuda[0]["gemm_pct_of_tensor_peak"] - 100 * cuda[0]["gemm_tflops"] / 312) < 1e-9


def test_compare_rows_carry_unique_labels_and_cpu_baseline_count(tmp_path):
    """Every compare row carries the ``label`` the table shows, unique (no ``trace`` column meaning the
    same); the CPU-only most/fewest-ops sentence states the baseline's own count, cited."""
    paths = [str(SAMPLES / n) for n in ("naive.json.gz", "sdpa_math.json.gz", "sdpa_flash.json.gz")]
    doc = _json(["compare", *paths, "--baseline", paths[1]], tmp_path)
    rows = doc["tables"]["compare"]
    labels = [r["label"] for r in rows]
    assert labels == ["naive", "sdpa_math", "sdpa_flash"] and "trace" not in rows[0]
    check_all(doc)
    ops = next(f for f in doc["findings"] if "the most CPU ops" in f["text"])
    base = next(r for r in rows if r["label"] == "sdpa_math")
    assert ops["text"].endswith(f"sdpa_math: {reads(base['cpu_ops_per_step'], 'count')})")
    assert {"table": "compare", "row": {"label": "sdpa_math"}, "column": "cpu_ops_per_step",
            "reads": "count"} in ops["evidence"]  # fmt: skip


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    """param/'s ranks 0-3 as run ``a`` and ranks 0-1 as run ``b`` (symlinks), one cache for both commands."""
    root = tmp_path_factory.mktemp("runs")
    param = [next((CORPUS / "param").glob(f"dlrm_kineto__worker{r}_*")) for r in range(4)]
    tokenomics = [CORPUS / "tokenomics" / f"trace{r}.json.gz" for r in range(2)]
    for name, files in (("a", param), ("b", param[:2]), ("c", tokenomics)):
        (root / name).mkdir()
        for src in files:
            (root / name / src.name).symlink_to(src)
    return root


@needs_corpus
@pytest.mark.parametrize("command", [["diff"], ["compare", "--run"]], ids=["run_diff", "run_compare"])
def test_every_run_number_rederived_from_its_cells(command, two_runs):
    """diff RUN_A/ RUN_B/ and compare --run: findings are objects whose every figure is a cited cell
    (compare --run quotes each run diff, its evidence in tables vs_baseline*)."""
    doc = _json([*command, str(two_runs / "a"), str(two_runs / "b")], two_runs / "cache")
    check_all(doc)
    assert any(f["text"].startswith("stragglers:") or ": stragglers:" in f["text"] for f in doc["findings"])
    if command == ["compare", "--run"]:
        quoted = [e for f in doc["findings"] for e in f["evidence"] if e["table"].startswith("vs_baseline")]
        assert quoted and all(e["row"]["run"] == "b" for e in quoted)


@needs_corpus
@pytest.mark.parametrize("command", [["diff"], ["compare", "--run"]], ids=["run_diff", "run_compare"])
def test_run_change_numbers_rederived_from_their_cells(command, two_runs):
    """param/ ranks 0-1 against tokenomics' ranks 0-1: the span change, the rank that changed most and
    the exposed wall times and per-cause deltas, each figure a cited cell."""
    doc = _json([*command, str(two_runs / "b"), str(two_runs / "c")], two_runs / "cache")
    check_all(doc)
    texts = " | ".join(f["text"] for f in doc["findings"])
    assert "changed most: span" in texts and "summed step wall time" in texts, texts
