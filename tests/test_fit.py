"""Terminal output fits: with COLUMNS=80 no line of the plain tables of summary, kernels,
diff and compare over the corpus is wider than 80, and kernel-name columns keep 30
characters (or their whole names). Each corpus trace is loaded once for the module.

diff runs on a representative subset of pairs (all 48x47 pairs would take minutes): the
H100/MI300 BERT pair (longest names), each folder's first two traces, and the largest
traces against each other. compare runs once per corpus folder.
"""

from __future__ import annotations

import re

import pytest
from corpus import SKIP_REASON, corpus_files
from hypothesis import given, settings
from hypothesis import strategies as st

import traceview as tv
from traceview.analyses.trace.kernels import kernel_stats
from traceview.analyses.trace.summary import summary
from traceview.analyses.variants.compare import compare
from traceview.analyses.variants.diff import diff
from traceview.render import render
from traceview.render.fit import ELLIPSIS, PIPED_WIDTH, middle, output_width, terminal_width

FILES = corpus_files()
needs_corpus = pytest.mark.skipif(not FILES, reason=SKIP_REASON)
WIDTH = 80
KERNEL_COLUMNS = {"name", "kernel", "example"}


@pytest.fixture(scope="module")
def traces():
    return {f: tv.load(f) for f in FILES}


def check(text: str) -> None:
    lines = text.splitlines()
    # an info line's path stays whole (copyable; the terminal wraps it): the one line allowed over
    wide = [line for line in lines if len(line) > WIDTH and not re.fullmatch(r"\w+: \S+", line)]
    assert not wide, f"{len(wide)} lines over {WIDTH}: {wide[0]!r}"
    for i, line in enumerate(lines):
        if i == 0 or not re.fullmatch(r"-+(  -+)*", line):
            continue
        header = lines[i - 1]
        for m in re.finditer(r"-+", line):
            name = header[m.start() : m.end()].strip()
            if name not in KERNEL_COLUMNS:
                continue
            body = lines[i + 1 :]
            body = body[: body.index("")] if "" in body else body  # this table only
            cells = [row[m.start() : m.end()] for row in body]
            shortened = any(ELLIPSIS in c for c in cells)
            assert m.end() - m.start() >= 30 or not shortened, f"{name} column {m.end() - m.start()} wide"


def plain(report) -> str:
    return render(report, "table", rich=False)


@pytest.fixture(autouse=True)
def columns(monkeypatch):
    monkeypatch.setenv("COLUMNS", str(WIDTH))


def pairs():
    files = FILES
    by_folder: dict = {}
    for f in files:
        by_folder.setdefault(f.parent.name, []).append(f)
    out = [tuple(v[:2]) for v in by_folder.values() if len(v) >= 2]
    bert = [f for f in files if "gaunernst_bert" in f.name]
    if len(bert) == 2:
        out.append(tuple(bert))
    big = sorted(files, key=lambda f: f.stat().st_size)[-2:]
    out.append(tuple(big))
    return out


@needs_corpus
def test_summary_and_kernels_fit(traces):
    for t in traces.values():
        check(plain(summary(t)))
        check(plain(kernel_stats(t)))


@needs_corpus
def test_diff_fits_on_representative_pairs(traces):
    for a, b in pairs():
        check(plain(diff(traces[a], traces[b])))


@needs_corpus
def test_compare_fits_per_folder(traces):
    folders: dict = {}
    for f, t in traces.items():
        folders.setdefault(f.parent.name, []).append(t)
    for group in folders.values():
        check(plain(compare(group)))


def test_width_comes_from_columns_else_piped_width_when_piped(monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    assert terminal_width() == output_width() == 100
    monkeypatch.delenv("COLUMNS")
    assert terminal_width() is None  # pytest captures stdout: not a TTY
    assert output_width() == PIPED_WIDTH  # tables piped fit 200 columns (issue 32), --wide none


def test_middle_ellipsis_keeps_both_ends():
    name = "cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_64x6_tn_align8"
    short = middle(name, 30)
    assert len(short) == 30 and short.startswith("cutlass_80_") and short.endswith("align8")


def test_rich_output_fits_and_shows_markup_as_written():
    import re as _re

    import pandas as pd

    from traceview.report import Report

    evil = "[bold]x[/bold] :smile: <script>" + "k" * 120
    r = Report(
        kind="t",
        title=f"Title {evil}",
        tables={"kernels": pd.DataFrame({"kernel": [evil], "count": [3], "total_ns": [1234.0]})},
        findings=[f"finding {evil}"],
        info={"label": evil},
    )
    text = _re.sub(r"\x1b\[[0-9;]*m", "", render(r, "table", rich=True, width=80))
    assert max(len(line) for line in text.splitlines()) <= 80
    assert "[bold]x[/bold] :smile:" in text and "<script>" in text and "😄" not in text


@settings(max_examples=2000, deadline=None)
@given(st.text(alphabet="ab ,<>()[]{}%_", max_size=24))
def test_a_list_cell_is_told_as_its_top_level_items_say(text):
    """``_is_list``'s shortcut (a bracket anywhere: no list; else split at every ", ") against its
    definition: two or more top-level items, each of one to three words and no bracket."""
    from traceview.render import fit

    items = fit._items(text)
    want = len(items) > 1 and all(0 < len(i.split()) <= 3 and not set("()<>[]{}") & set(i) for i in items)
    assert fit._is_list(text) == want
