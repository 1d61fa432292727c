"""Tables fit again (issue 32 item 8): piped with no ``COLUMNS``, no line of a diff is wider than
``PIPED_WIDTH`` (200; rows were padded to lines of up to 10,752 characters by one long kernel
name); at ``COLUMNS=80`` no line of summary, kernels, diff or compare is wider than 80, plain or
rich. Whole names stay in JSON, in CSV and with ``--wide``. A handful of diverse corpus traces
(long C++ kernel names, rank files, ROCm, graph replays), each loaded once."""

from __future__ import annotations

import json
import re

import pytest
from click.testing import CliRunner
from corpus import CORPUS, SKIP_REASON

import traceview as tv
from traceview.cli import main
from traceview.render import render
from traceview.render.fit import PIPED_WIDTH

NAMES = {
    "trace0": "tokenomics/trace0.json.gz",
    "trace1": "tokenomics/trace1.json.gz",
    "llama": "tokenomics/llama_trace_4layers0_with_annotations.json.gz",
    "alexnet": "hta/critical_path__alexnet__benchmark_result_2869224_1695835535_trace.json.gz",
    "simple_add": "hta/critical_path__simple_add__benchmark_result_493459_1694039959_trace.json.gz",
    "dlrm0": "param/dlrm_kineto__worker0_step_12.1694128201545.pt.trace.json.gz",
    "dlrm1": "param/dlrm_kineto__worker1_step_12.1694128201556.pt.trace.json.gz",
    "bert_h100": "tracelens/h100__gaunernst_bert-small-uncased__1016001.json.gz",
    "bert_mi300": "rocm/tracelens__mi300__gaunernst_bert-small-uncased__1016001.json.gz",
    "b300": "tracelens/b300__sglang_deepseek_r1__1782843274.7730265-TP-0-DECODE.trace.json.gz",
}
PAIRS = [
    ("trace0", "trace1"),
    ("llama", "trace0"),
    ("alexnet", "simple_add"),
    ("dlrm0", "dlrm1"),
    ("bert_h100", "bert_mi300"),
    ("b300", "llama"),
]
ANSI = re.compile(r"\x1b\[[0-9;]*m")


@pytest.fixture(scope="module")
def traces():
    if not all((CORPUS / p).exists() for p in NAMES.values()):
        pytest.skip(SKIP_REASON)
    return {k: tv.load(CORPUS / p) for k, p in NAMES.items()}


@pytest.fixture(scope="module")
def diffs(traces):
    return {(a, b): tv.diff(traces[a], traces[b]) for a, b in PAIRS}


def too_wide(text: str, width: int) -> list[str]:
    """The lines over ``width`` columns, but an info line holding one path (kept whole to be copied;
    the terminal wraps it)."""
    lines = ANSI.sub("", text).splitlines()
    return [x for x in lines if len(x) > width and not re.fullmatch(r"\s*\w+: \S+", x)]


def test_a_piped_diff_fits_200_columns(diffs, monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)  # pytest's stdout is no terminal: piped
    for pair, d in diffs.items():
        fitted = render(d, "table", rich=False)
        assert not too_wide(fitted, PIPED_WIDTH), (pair, too_wide(fitted, PIPED_WIDTH)[0][:300])
        whole = render(d, "table", rich=False, width=None)  # --wide
        assert len(fitted) <= len(whole)


def test_the_pair_that_padded_to_10k_columns_now_fits(diffs, monkeypatch):
    """trace0 vs trace1: one by_kernel row names a kernel of thousands of characters; unfitted,
    every row of its table is padded to it."""
    monkeypatch.delenv("COLUMNS", raising=False)
    d = diffs["trace0", "trace1"]
    wide = max(len(x) for x in render(d, "table", rich=False, width=None).splitlines())
    assert wide > 2000  # what --wide still prints: the whole name
    assert max(len(x) for x in render(d, "table", rich=False).splitlines()) <= PIPED_WIDTH


def test_whole_names_stay_in_json_csv_and_wide(diffs, monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)
    d = diffs["trace0", "trace1"]
    columns = [t.iloc[:, i] for t in d.tables.values() for i in range(t.shape[1])]
    cells = [str(v) for col in columns if col.dtype.kind not in "iufb" for v in col]
    longest = max(cells, key=len)  # a kernel's whole name (by_kernel's a_example: 5,123 characters)
    assert len(longest) > PIPED_WIDTH
    assert longest not in render(d, "table", rich=False)  # cut when piped
    assert longest in render(d, "table", rich=False, width=None)  # --wide
    assert longest in json.dumps(json.loads(render(d, "json")), ensure_ascii=False)
    assert longest in render(d, "csv") or longest.replace('"', '""') in render(d, "csv")


@pytest.fixture(scope="module")
def reports(traces, diffs):
    """summary and kernels of each trace, the diffs, and compare on three of the pairs."""
    out = [tv.summary(t) for t in traces.values()] + [tv.kernels(t) for t in traces.values()]
    return out + list(diffs.values()) + [tv.compare([traces[a], traces[b]]) for a, b in PAIRS[:3]]


@pytest.mark.parametrize("rich", [False, True], ids=["plain", "rich"])
def test_80_columns_fit_summary_kernels_diff_compare(reports, monkeypatch, rich):
    monkeypatch.setenv("COLUMNS", "80")
    for r in reports:
        wide = too_wide(render(r, "table", rich=rich), 80)
        assert not wide, (r.title, wide[0])


def test_the_cli_piped_fits_and_wide_does_not_cut(traces, tmp_path):
    a, b = (str(CORPUS / NAMES[k]) for k in ("trace0", "trace1"))
    env = {"TRACEVIEW_CACHE_DIR": str(tmp_path), "COLUMNS": None}
    piped = CliRunner().invoke(main, ["diff", a, b], env=env)
    assert piped.exit_code == 0, piped.output
    assert not too_wide(piped.stdout, PIPED_WIDTH)
    wide = CliRunner().invoke(main, ["diff", a, b, "--wide"], env=env)
    assert max(map(len, wide.stdout.splitlines())) > 2000
