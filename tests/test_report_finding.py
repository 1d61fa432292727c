"""A Finding keeps its evidence through the string operations that make one new text of it
(issue 37: under any of them it used to become a plain str, its evidence silently gone)."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

import traceview as tv
from traceview.report import Finding

EVIDENCE = ({"table": "overview", "row": {"metric": "gpu_ns"}, "column": "delta", "reads": "ms"},)
SAMPLES = Path(__file__).resolve().parents[1] / "sample_traces"


@pytest.mark.parametrize(
    "op",
    [
        lambda f: f.strip(),
        lambda f: f.replace("GPU", "gpu"),
        lambda f: f + ".",
        lambda f: "- " + f,
        lambda f: f[2:],
        lambda f: f.upper(),
        lambda f: f.removesuffix(" "),
        lambda f: f.translate({0x20: "_"}),
        lambda f: f.center(80),
    ],
)
def test_one_new_text_keeps_the_evidence(op):
    f = Finding("  GPU time rose 3.0 ms ", EVIDENCE)
    out = op(f)
    assert isinstance(out, Finding) and out.evidence == EVIDENCE
    assert str(out) == op(str(f))  # the text is what the same operation makes of a str


def test_it_is_still_the_sentence_and_plain_text_is_asked_for():
    f = Finding("GPU time rose 3.0 ms", EVIDENCE)
    assert f == "GPU time rose 3.0 ms" and hash(f) == hash("GPU time rose 3.0 ms")
    assert type(str(f)) is str and type(f"{f}") is str and type(" ".join([f])) is str
    assert f.startswith("GPU") and "3.0" in f and f.split()[0] == "GPU"
    assert pickle.loads(pickle.dumps(f)).evidence == EVIDENCE


def test_a_diffs_findings_keep_their_evidence_when_trimmed():
    r = tv.diff(SAMPLES / "naive.json.gz", SAMPLES / "sdpa_flash.json.gz")
    cited = [f for f in r.findings if getattr(f, "evidence", ())]
    assert cited
    for f in cited:
        assert f.strip().evidence == f.evidence and (f + " ").evidence == f.evidence
