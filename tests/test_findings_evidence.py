"""Every sentence checkable (issue 18 item 3): each finding of diff and compare is an object with its
``text`` and its ``evidence``; every number the text states is re-derived here from the table cells it
cites, read back with the documented rounding (``analyses.wording.words.reads``), and no digit of the
text is left unexplained. Real corpus pairs through the CLI's JSON."""

from __future__ import annotations

import json
import re

import pytest
from click.testing import CliRunner
from corpus import CORPUS, SKIP_REASON

from traceview.analyses.wording.words import reads
from traceview.cli import main

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
]
needs_corpus = pytest.mark.skipif(not CORPUS.is_dir(), reason=SKIP_REASON)


def _json(args, tmp_path) -> dict:
    res = CliRunner().invoke(
        main, [*args, "--format", "json"], env={"TRACEVIEW_CACHE_DIR": str(tmp_path)}, catch_exceptions=False
    )
    assert res.exit_code == 0, res.output
    return json.loads(res.output)


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
