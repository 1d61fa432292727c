"""How a table is shortened to COLUMNS=100 (the issue's five cases): the key column is the rule
id and whole, short labels stay whole, list cells are cut at item boundaries (``+N more``),
rank files show the word that tells them apart, and an info line's path is never split.
Real commands through click's CliRunner on the sample traces and small corpus traces."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from corpus import CORPUS, SKIP_REASON

from traceview.cli import main
from traceview.render.fit import ELLIPSIS, column

SAMPLES = Path(__file__).resolve().parents[1] / "sample_traces"
TOKENOMICS = CORPUS / "tokenomics"
PARAM = CORPUS / "param"
TUTORIAL = sorted((CORPUS / "torch_profiling_tutorial").glob("log_transformer__dc3b0e7228dd_851*.json.gz"))
needs = pytest.mark.skipif(not (TOKENOMICS.is_dir() and PARAM.is_dir()), reason=SKIP_REASON)


def run(tmp_path, *args) -> str:
    env = {"COLUMNS": "100", "TRACEVIEW_CACHE_DIR": str(tmp_path / "cache")}
    result = CliRunner(env=env).invoke(main, [str(a) for a in args])
    assert result.exit_code in (0, 1), result.output
    return result.output


def table(text: str, name: str) -> list[list[str]]:
    """The lines of table ``[name…]`` (all its blocks), split on runs of two spaces."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"[{name}"))
    out = []
    for line in lines[start + 1 :]:
        if line.startswith(("[", "note:")):
            break
        if line and not set(line) <= {"-", " "}:
            out.append([c.strip() for c in line.split("  ") if c.strip()])
    return out


def test_check_keys_blocks_on_the_whole_rule_id(tmp_path):
    out = run(tmp_path, "check", SAMPLES / "naive.json.gz", "--baseline", SAMPLES / "naive_inplace.json.gz")
    rows = table(out, "rules")
    headers = [r for r in rows if r[0] == "rule"]
    assert len(headers) >= 2, out  # split into blocks, each keyed on the rule
    ids = {r[0] for r in rows if r[0] != "rule"}
    assert {"no-new-copy-op", "cpu-op-time-per-step", "attention-backend-unchanged"} <= ids, ids


@needs
def test_exposed_causes_whole_and_families_cut_at_items(tmp_path):
    out = run(tmp_path, "diff", TOKENOMICS / "trace0.json.gz", TOKENOMICS / "trace1.json.gz")
    causes = {r[0] for r in table(out, "exposed")}
    assert {"compute: elementwise", "communication exposed", "idle: host launch-bound"} <= causes
    families = [c for r in table(out, "gemm_path") for c in r if "%" in c and "," in c]
    assert families, out
    for cell in families:  # whole items only, each "family N%"
        items = cell.split(", ")
        assert all(ELLIPSIS not in i for i in items), cell
        assert all(i.endswith(("%", " more")) for i in items), cell


def test_compare_top_ops_cut_at_item_boundaries(tmp_path):
    out = run(tmp_path, "compare", SAMPLES)
    text = "\n".join(line for line in out.splitlines() if line.startswith("sdpa_flash "))
    assert "aten::_scaled_dot_product_flash_attention_for_cpu " in text, out
    assert "…caled_dot" not in text and " more" in text, text


def test_list_cell_cut_keeps_whole_items():
    cell = "aten::_scaled_dot_product_flash_attention_for_cpu 100%, aten::scaled_dot_product_attention 0%"
    assert column([cell], 66) == ["aten::_scaled_dot_product_flash_attention_for_cpu 100%, +1 more"]
    assert column(["sgemm 63%, splitK reduce 37%"], 20) == ["sgemm 63%, +1 more"]
    # a template's ", " is not a list: cut in the middle as any name
    assert ELLIPSIS in column(["void f<int, float>(int, float) kernel body here"], 20)[0]


def test_rank_files_by_the_word_that_tells_them_apart():
    names = [
        f"dlrm_kineto__worker{r}_step_12.16941282015{s}.pt.trace.json.gz"
        for r, s in enumerate([45, 56, 54, 57, 47, 49, 53, 53])
    ]
    assert column([*names, "8 files"], 19) == [f"…worker{r}…" for r in range(8)] + ["8 files"]


@needs
def test_run_summary_shows_worker_and_whole_device(tmp_path):
    rows = table(run(tmp_path, "summary", "--run", PARAM), "ranks")
    files = [r[1] for r in rows if r[0].isdigit()]
    assert files[:2] == ["…worker0…", "…worker1…"], rows
    assert any("Tesla V100-SXM2-32GB" in r for r in rows), rows


@pytest.mark.skipif(not TUTORIAL, reason=SKIP_REASON)
def test_info_line_path_stays_whole(tmp_path):
    out = run(tmp_path, "memory", TUTORIAL[0])
    assert f"trace: {TUTORIAL[0]}" in out.splitlines(), out[:500]


H100 = CORPUS / "tracelens" / "h100__gaunernst_bert-small-uncased__1016001.json.gz"


@pytest.mark.skipif(not H100.exists(), reason=SKIP_REASON)
def test_timeline_names_kernels_readably(tmp_path):
    out = run(tmp_path, "timeline", H100, "--plot", tmp_path / "t.png")
    gemms = {r[0] for r in table(out, "timeline") if len(r) > 5 and r[5] == "gemm"}
    assert gemms and not any("Kernel2" in g or g.startswith("void ") for g in gemms), gemms
    assert len(gemms) > 1, gemms  # different GEMMs no longer read as one cut raw name


@pytest.mark.skipif(not H100.exists(), reason=SKIP_REASON)
def test_hta_launch_names_kernels_readably(tmp_path):
    pytest.importorskip("hta")
    out = run(tmp_path, "hta", H100, "--analysis", "launch")
    names = [line for line in out.splitlines() if line.startswith(("void ", "vectorized_"))]
    assert names and not any(n.startswith("void ") for n in names), out
