"""Names that say what they hold (issue 21 item 4): every table column and info key of every
command's JSON output is a snake_case identifier; display headers are the renderer's business."""

from __future__ import annotations

import importlib.util
import json
import re

import pytest
from click.testing import CliRunner
from corpus import CORPUS, SKIP_REASON, corpus_files

import traceview as tv
from traceview.cli import main

SNAKE = re.compile(r"^[a-z][a-z0-9_]*$")
H100 = CORPUS / "tracelens" / "h100__gaunernst_bert-small-uncased__1016001.json.gz"
FALCON = CORPUS / "tracelens" / "h100__Falconsai_nsfw_image_detection__1016002.json.gz"
RANKS = [CORPUS / "tokenomics" / f"trace{i}.json.gz" for i in (0, 1)]
needs_corpus = pytest.mark.skipif(not corpus_files(), reason=SKIP_REASON)


def _keys(value, where: str):
    """(where, key) for every key of a JSON object inside ``value``."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield where, k
            yield from _keys(v, f"{where}.{k}")
    elif isinstance(value, list):
        for v in value:
            yield from _keys(v, where)


def _names(doc: dict) -> set[tuple[str, str]]:
    """Every table column (each row's keys) and info key (nested too) of one report document."""
    docs = doc["reports"] if doc["schema"] == "traceview.reports" else [doc]
    out = set()
    for d in docs:
        out |= {(f"{d['kind']} info{w[4:]}", k) for w, k in _keys(d["info"], "info")}
        for name, rows in d["tables"].items():
            out |= {(f"{d['kind']} table {name}", k) for row in rows for k in row}
            out.add((f"{d['kind']} tables", name))
    return out


@pytest.fixture(scope="module")
def run_dirs(tmp_path_factory):
    """Two run folders of the tokenomics pair (links, no copies)."""
    base = tmp_path_factory.mktemp("runs")
    for run in ("a", "b"):
        (base / run).mkdir()
        for p in RANKS:
            (base / run / p.name).symlink_to(p)
    return base / "a", base / "b"


def _commands(run_a, run_b, png):
    h, f = str(H100), str(FALCON)
    return [
        ["summary", h],
        ["summary", h, f],
        ["summary", "--run", str(run_a)],
        ["kernels", h],
        ["kernels", h, "--ops"],
        ["kernels", h, "--unclassified"],
        ["kernels", h, "--by", "source"],
        ["diff", h, f],
        ["diff", str(run_a), str(run_b)],
        ["compare", h, f],
        ["compare", "--run", str(run_a), str(run_b)],
        ["timeline", h, "--plot", str(png)],
        ["ranks", str(run_a)],
        ["memory", f],
        ["exposed", h],
        ["check", f, "--baseline", h],
    ] + (  # HTA's views (the optional extra): idle's describe() quartiles were 25%, 50%, 75%
        [["hta", h, "--analysis", a] for a in ("temporal", "idle", "kernels", "launch")]
        if importlib.util.find_spec("hta")
        else []
    )


@needs_corpus
def test_every_json_column_and_info_key_is_snake_case(run_dirs, tmp_path, monkeypatch):
    monkeypatch.setenv("TRACEVIEW_CACHE_DIR", str(tmp_path / "cache"))
    bad, seen = [], 0
    for args in _commands(*run_dirs, tmp_path / "t.png"):
        res = CliRunner().invoke(main, [*args, "--format", "json"])
        assert res.exit_code in (0, 1) and res.stdout.startswith("{"), (args, res.output[-400:])
        names = _names(json.loads(res.stdout))
        seen += len(names)
        bad += [
            (" ".join(args[:1] + [a for a in args[1:] if a.startswith("-")]), w, k)
            for w, k in names
            if not SNAKE.match(k)
        ]
    assert seen > 300 and not bad, sorted(set(bad))


@needs_corpus
def test_kernels_and_summary_top_kernels_agree():
    """count, total_ns and pct_time mean one thing: kernels' rows equal summary's top_kernels'."""
    t = tv.load(H100, cache=False)
    k = tv.kernels(t)["kernels"].set_index("name")
    top = tv.summary(t, top=5)["top_kernels"].set_index("name")
    assert len(top) == 5
    for col in ("kernel", "count", "total_ns"):
        assert k.loc[top.index, col].tolist() == top[col].tolist(), col
    assert k.loc[top.index, "pct_time"].tolist() == pytest.approx(top["pct_time"].tolist(), rel=1e-12)
