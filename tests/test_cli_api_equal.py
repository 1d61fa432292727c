"""The CLI and the API cannot disagree (issue 37, item 5).

For every command and a set of option combinations, on sample_traces/ and a few corpus traces, the
CLI's ``--format json`` equals the API's result rendered to JSON (tables, findings, notes), and the
files ``report`` and ``annotate`` write are the same bytes. The comparison is of parsed JSON
documents, not of the code paths: the CLI runs in click's runner from its arguments, the API from
its keywords, each loading the traces itself (no cache, so neither reads the other's work).

It cannot be fooled: every result compared holds at least one table with rows; the cases cover
every command the CLI has (checked against the click group); and a control shows the comparison
sees an option the API was not given.
"""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner
from corpus import CORPUS, SKIP_REASON

import traceview as tv
from traceview.cli import main
from traceview.render import render

SAMPLES = Path(__file__).resolve().parents[1] / "sample_traces"
N, NI, FLASH, MATH = (SAMPLES / f"{n}.json.gz" for n in ("naive", "naive_inplace", "sdpa_flash", "sdpa_math"))
TOK = sorted((CORPUS / "tokenomics").glob("trace[01].json.gz"))
ANNOT = CORPUS / "hta" / "with_gpu_user_annotation__step_based_trace_2543932.json.gz"
ALEX = CORPUS / "hta" / "critical_path__alexnet__benchmark_result_2869224_1695835535_trace.json.gz"
ROCM = CORPUS / "rocm" / "hta__mi250_minitoy_train_ROCm6_2_kineto.json.gz"  # steps 1 and 2, GPU work in 1
MOE = [
    CORPUS / "tracelens" / f"b300__moe_0{i}.json.gz"
    for i in ("1_many_experts_few_tokens", "5_large_capacity")
]
HAVE_CORPUS = len(TOK) == 2 and all(p.is_file() for p in (ANNOT, ALEX, ROCM, *MOE))
NO = {"cache": False}  # the API's side of --no-cache

#: commands that are not analyses of traces (the cache folder, running a collector)
NOT_ANALYSES = {"cache", "collect"}


def cli(*args: object) -> tuple[int, str, str]:
    res = CliRunner().invoke(main, [str(a) for a in args])
    return res.exit_code, res.stdout, res.stderr


def cli_json(*args: object, ok: tuple[int, ...] = (0,)):
    code, out, err = cli(*args, "--format", "json", "--no-cache")
    assert code in ok, (args, code, err)
    return json.loads(out)


def api_json(result):
    return json.loads(render(result, "json"))


def has_rows(doc) -> bool:
    """Some table of the document (one report or a list of them) holds a row."""
    docs = doc if isinstance(doc, list) else doc.get("reports", [doc]) if isinstance(doc, dict) else []
    return any(len(rows) > 0 for d in docs for rows in (d.get("tables") or {}).values())


# (id, CLI arguments, the API call that must give the same document)
SAMPLE_CASES = [
    ("summary", ["summary", N], lambda: tv.summary(N, **NO)),
    ("summary-many-top", ["summary", N, FLASH, "--top", 3], lambda: tv.summary([N, FLASH], top=3, **NO)),
    ("summary-folder-step", ["summary", SAMPLES, "--step", 4], lambda: tv.summary(SAMPLES, step=4, **NO)),
    ("kernels-source", ["kernels", N, "--by", "source"], lambda: tv.kernels(N, by="source", **NO)),
    ("diff", ["diff", N, NI], lambda: tv.diff(N, NI, **NO)),
    ("diff-top0", ["diff", N, NI, "--top", 0], lambda: tv.diff(N, NI, top=0, **NO)),
    ("diff-top3-step", ["diff", N, NI, "--top", 3, "--step", 4], lambda: tv.diff(N, NI, top=3, step=4, **NO)),
    ("compare-folder", ["compare", SAMPLES], lambda: tv.compare(SAMPLES, **NO)),
    (
        "compare-baseline",
        ["compare", N, FLASH, MATH, "--baseline", MATH],
        lambda: tv.compare([N, FLASH, MATH], baseline=str(MATH), **NO),
    ),
    ("timeline", ["timeline", N], lambda: tv.timeline(N, **NO)),
    ("timeline-step", ["timeline", MATH, "--step", 5], lambda: tv.timeline(MATH, step=5, **NO)),
    ("memory", ["memory", N], lambda: tv.memory(N, **NO)),
    ("memory-step", ["memory", N, "--step", 4], lambda: tv.memory(N, step=4, **NO)),
    ("exposed", ["exposed", MATH], lambda: tv.exposed(MATH, **NO)),
    ("advise", ["advise", N], lambda: tv.advise(N, **NO)),
    ("advise-min-pct", ["advise", N, "--min-pct", 1], lambda: tv.advise(N, min_pct=1, **NO)),
    ("stacks", ["stacks", N], lambda: tv.stacks(N, form="table", **NO)),
    (
        "stacks-module",
        ["stacks", N, "--by", "module", "--form", "table"],
        lambda: tv.stacks(N, by="module", form="table", **NO),
    ),
    ("check", ["check", NI, "--baseline", N], lambda: tv.check([str(NI)], baseline=[str(N)], **NO)),
    ("check-alone", ["check", N], lambda: tv.check([str(N)], **NO)),
]

CORPUS_CASES = [
    ("c-summary-ranks", ["summary", *TOK], lambda: tv.summary(TOK, **NO)),
    ("c-summary-run", ["summary", "--run", *TOK], lambda: tv.summary(TOK, run=True, **NO)),
    ("c-kernels", ["kernels", ALEX], lambda: tv.kernels(ALEX, **NO)),
    (
        "c-kernels-ops",
        ["kernels", ROCM, "--ops", "--step", 1],
        lambda: tv.kernels(ROCM, ops=True, step=1, **NO),
    ),
    (
        "c-kernels-unclassified",
        ["kernels", ALEX, "--unclassified"],
        lambda: tv.kernels(ALEX, unclassified=True, **NO),
    ),
    ("c-kernels-kind", ["kernels", ALEX, "--kind", "kernel"], lambda: tv.kernels(ALEX, kind="kernel", **NO)),
    ("c-kernels-device", ["kernels", ALEX, "--device", 0], lambda: tv.kernels(ALEX, device=0, **NO)),
    ("c-diff", ["diff", *TOK], lambda: tv.diff(*TOK, **NO)),  # TOK is empty without the corpus
    ("c-compare", ["compare", ANNOT, ALEX, *TOK], lambda: tv.compare([ANNOT, ALEX, *TOK], **NO)),
    ("c-timeline", ["timeline", ANNOT], lambda: tv.timeline(ANNOT, **NO)),
    ("c-timeline-step", ["timeline", ROCM, "--step", 1], lambda: tv.timeline(ROCM, step=1, **NO)),
    ("c-diff-top3", ["diff", *MOE, "--top", 3], lambda: tv.diff(*MOE, top=3, **NO)),
    (
        "c-diff-top0-kind",
        ["diff", *MOE, "--top", 0, "--kind", "kernel"],
        lambda: tv.diff(*MOE, top=0, kind="kernel", **NO),
    ),
    ("c-memory", ["memory", ALEX], lambda: tv.memory(ALEX, **NO)),
    ("c-exposed", ["exposed", ANNOT], lambda: tv.exposed(ANNOT, **NO)),
    ("c-exposed-kind", ["exposed", ALEX, "--kind", "kernel"], lambda: tv.exposed(ALEX, kind="kernel", **NO)),
    ("c-advise", ["advise", ALEX], lambda: tv.advise(ALEX, **NO)),
    ("c-stacks", ["stacks", ANNOT, "--form", "table"], lambda: tv.stacks(ANNOT, form="table", **NO)),
    ("c-ranks", ["ranks", *TOK], lambda: tv.ranks(TOK, **NO)),
    (
        "c-check",
        ["check", *TOK[1:], "--baseline", *TOK[:1]],  # TOK is empty without the corpus
        lambda: tv.check([str(TOK[1])], baseline=[str(TOK[0])], **NO),
    ),
]

HTA_CASES = [
    ("hta", ["hta", ALEX], lambda: tv.hta(ALEX, **NO)),
    ("hta-idle", ["hta", ALEX, "--analysis", "idle"], lambda: tv.hta(ALEX, analysis="idle", **NO)),
]


#: cases whose trace has nothing for the command (every name classified; no [memory] events): the
#: documents still hold the note that says so, and the info
EMPTY = {"c-kernels-unclassified", "c-memory"}


def _compare(args, call, empty: bool = False):
    expected = api_json(call())
    got = cli_json(*args, ok=(0, 1) if args[0] == "check" else (0,))  # check: 1 is a failed rule
    assert has_rows(expected) != empty, f"{args}: rows where none were expected, or none to compare"
    assert got == expected


@pytest.mark.parametrize("case", SAMPLE_CASES, ids=[c[0] for c in SAMPLE_CASES])
def test_sample_traces(case):
    _compare(case[1], case[2], case[0] in EMPTY)


@pytest.mark.skipif(not HAVE_CORPUS, reason=SKIP_REASON)
@pytest.mark.parametrize("case", CORPUS_CASES, ids=[c[0] for c in CORPUS_CASES])
def test_corpus_traces(case):
    _compare(case[1], case[2], case[0] in EMPTY)


@pytest.mark.skipif(not HAVE_CORPUS, reason=SKIP_REASON)
@pytest.mark.parametrize("args,call", [c[1:] for c in HTA_CASES], ids=[c[0] for c in HTA_CASES])
def test_hta(args, call):
    pytest.importorskip("hta", reason="HTA not installed: pip install 'traceview[hta]'")
    _compare(args, call)


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    for name in ("runA", "runB"):
        (root / name).mkdir()
        for p in TOK:
            os.symlink(p, root / name / p.name)
    return root / "runA", root / "runB"


@pytest.mark.skipif(not HAVE_CORPUS, reason=SKIP_REASON)
def test_runs(two_runs):
    a, b = two_runs
    _compare(["compare", "--run", a, b], lambda: tv.compare_runs([a, b], **NO))
    _compare(["diff", a, b], lambda: tv.diff(a, b, **NO))


def test_report_and_annotate_write_the_same_files(tmp_path, monkeypatch):
    matplotlib = pytest.importorskip("matplotlib")
    # matplotlib's SVG carries the time it was drawn and random clip-path ids: fixed here, so
    # that two drawings of one figure are the same bytes
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "0")
    monkeypatch.setitem(matplotlib.rcParams, "svg.hashsalt", "test_cli_api_equal")
    tv.report([N, FLASH], output=tmp_path / "api.html", **NO)
    code, _, err = cli("report", N, FLASH, "-o", tmp_path / "cli.html", "--no-cache")
    assert code == 0, err
    api_page, cli_page = ((tmp_path / f).read_bytes() for f in ("api.html", "cli.html"))
    assert len(api_page) > 10_000 and api_page == cli_page
    gpu = ALEX if HAVE_CORPUS else MATH  # the sample traces are CPU-only: no GPU activity to annotate
    tv.annotate(gpu, tmp_path / "api.json.gz", **NO)
    code, _, err = cli("annotate", gpu, "-o", tmp_path / "cli.json.gz", "--no-cache")
    assert code == 0, err
    docs = [json.loads(gzip.decompress((tmp_path / f).read_bytes())) for f in ("api.json.gz", "cli.json.gz")]
    assert docs[0] == docs[1]
    if gpu == ALEX:
        assert any("traceview.category" in e.get("args", {}) for e in docs[0]["traceEvents"])


def test_every_command_is_compared():
    """A new command without a case here fails this test."""
    ids = [c[1][0] for c in SAMPLE_CASES + CORPUS_CASES + HTA_CASES] + ["report", "annotate"]
    assert set(main.commands) - NOT_ANALYSES == set(ids)


def test_the_comparison_sees_an_option_left_out():
    """Control: the CLI given --step 4 is not the API's whole trace, nor --top 1 its default top."""
    assert cli_json("summary", N, "--step", 4) != api_json(tv.summary(N, **NO))
    assert cli_json("diff", N, NI, "--step", 4) != api_json(tv.diff(N, NI, **NO))
    if HAVE_CORPUS:
        assert cli_json("summary", ALEX, "--top", 1) != api_json(tv.summary(ALEX, **NO))


# ------------------------------------------------------------------ one loader, one voice (item 3)


def _malformed(tmp_path: Path) -> Path:
    """naive.json.gz with one event whose name is not UTF-8: the load drops it and says so."""
    text = gzip.decompress(N.read_bytes())
    bad = b'{"ph": "X", "name": "\xff\xfe", "ts": 1, "dur": 1, "pid": 1, "tid": 1}, '
    at = text.index(b'"traceEvents"')
    at = text.index(b"[", at) + 1
    path = tmp_path / "malformed.json"
    path.write_bytes(text[:at] + bad + text[at:])
    return path


@pytest.mark.parametrize(
    "command",
    [
        ["summary"],
        ["kernels"],
        ["timeline"],
        ["memory"],
        ["exposed"],
        ["advise"],
        ["stacks"],
        ["check"],
        ["compare"],
        ["diff", N],
        ["ranks"],
        ["summary", "--run"],
    ],
    ids=lambda c: " ".join(c[:2]) if c[-1] == "--run" else c[0],
)
def test_every_command_says_the_load_warning_on_stderr(tmp_path, command):
    path = _malformed(tmp_path)
    code, _, err = cli(*command, path, "--format", "json", "--no-cache")
    assert code in (0, 1) and "Traceback" not in err, err
    assert err.count("skipped 1 malformed event(s)") == 1, err


def test_the_api_says_the_same_warning_to_its_callback(tmp_path):
    path, heard = _malformed(tmp_path), []
    tv.exposed(path, cache=False, on_warning=heard.append)
    _, _, err = cli("exposed", path, "--no-cache", "--format", "json")
    assert len(heard) == 1 and heard[0] in err.splitlines()


# ------------------------------------------------------------------ the disagreements (item 4)


def test_compare_run_refuses_a_file_in_both(tmp_path):
    code, _, err = cli("compare", "--run", N, N)
    assert code == 1 and "naive.json.gz: not a folder" in err, err
    with pytest.raises(tv.TraceviewError) as e:
        tv.compare_runs([N, N])
    assert str(e.value) in err


def test_summary_takes_the_cli_inputs():
    many = tv.summary([N, FLASH], **NO)
    folder = tv.summary(SAMPLES, **NO)
    assert isinstance(many, list) and [r.title for r in many] == [
        tv.summary(p, **NO).title for p in (N, FLASH)
    ]
    assert len(folder) == len(list(SAMPLES.glob("*.json.gz")))


def test_refusals_are_one_table_in_both():
    """The same rule refuses the same option in the CLI and the API, in the same words."""
    code, _, err = cli("kernels", N, "--library", "x/")
    with pytest.raises(TypeError) as e:
        tv.kernels(N, library=("x/",))
    assert (
        code == 2
        and "--library applies to --by source" in err
        and "library= applies to by='source'" in str(e.value)
    )
    code, _, err = cli("summary", N, "--workers", 2)
    with pytest.raises(TypeError, match="spread a run's rank files over Dask: give run=True"):
        tv.summary(N, workers=2)
    assert code == 2 and "give --run" in err
