"""The HTML report's flame graph (issue 36 item 6): a static SVG of the whole call tree of each
trace recorded with stacks, boxes nested as the tree, its text escaped, no script."""

from __future__ import annotations

import itertools
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from corpus import CORPUS, SKIP_REASON

import traceview as tv
from traceview.render.flame import _offsets, flame_svg

SAMPLES = Path(__file__).resolve().parents[1] / "sample_traces"
BERT = CORPUS / "tracelens/h100__gaunernst_bert-small-uncased__1016001.json.gz"
SVG = "{http://www.w3.org/2000/svg}"


def _tree(path):
    return tv.stacks(str(path), form="table")


def _nested(report):
    t = report.tables["stacks"]
    weight = "gpu_ns" if "gpu_ns" in t.columns else "cpu_ns"
    x = _offsets(t, weight)
    w = dict(zip(t["node"], t[weight].astype(float), strict=True))
    for node, parent in zip(t["node"], t["parent"], strict=True):
        if parent >= 0:  # inside its parent
            assert x[node] >= x[parent] - 1e-6 and x[node] + w[node] <= x[parent] + w[parent] + 1e-6
    for _, g in t[t["parent"] >= 0].groupby("parent"):  # siblings side by side, never overlapping
        spans = sorted((x[n], x[n] + w[n]) for n in g["node"])
        assert all(a[1] <= b[0] + 1e-6 for a, b in itertools.pairwise(spans))


@pytest.mark.skipif(not CORPUS.is_dir(), reason=SKIP_REASON)
def test_boxes_nest_as_the_tree_and_the_root_spans_the_width():
    r = _tree(BERT)
    _nested(r)
    root = ET.fromstring(flame_svg(r, width=1000))
    rects = root.findall(f".//{SVG}rect")
    assert float(rects[0].get("width")) == pytest.approx(1000.0) and float(rects[0].get("x")) == 0
    assert all(float(b.get("x")) >= 0 and float(b.get("x")) + float(b.get("width")) <= 1000.05 for b in rects)
    titles = [g.find(f"{SVG}title").text for g in root.findall(f"{SVG}g")]
    assert len(titles) == len(rects) and titles[0].startswith("(all): 309.437 us (100.0%)")


def test_sample_report_draws_one_flame_graph_per_trace_with_stacks(tmp_path):
    pytest.importorskip("matplotlib")
    page = tv.report([str(SAMPLES / "naive.json.gz"), str(SAMPLES / "sdpa_math.json.gz")])
    assert page.count("the call stacks as a flame graph</h2>") == 2
    _nested(_tree(SAMPLES / "naive.json.gz"))


def test_frame_text_is_escaped_in_the_svg():
    r = _tree(SAMPLES / "naive.json.gz")
    t = r.tables["stacks"].copy()
    t["frame"] = t["frame"].astype(object)
    t.loc[1, "frame"] = '<script>alert(1)</script> & "x" \x1b[31m'
    r.tables["stacks"] = t
    svg = flame_svg(r)
    ET.fromstring(svg)  # still well-formed XML
    assert "<script>" not in svg and "\x1b" not in svg and "&lt;script&gt;" in svg
