"""Outputs (issue 21 item 5): several reports make one document in every format, any
format can be written to ``-o FILE`` (the same bytes as stdout), and each format declares
its extension and whether it is binary."""

from __future__ import annotations

import csv
import gzip
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

import traceview as tv
from traceview.cli import main
from traceview.render import FORMATS, OUTPUTS, Format, format_for_path, render, write

SAMPLES = Path(__file__).resolve().parents[1] / "sample_traces"
A, B = SAMPLES / "naive.json.gz", SAMPLES / "sdpa_flash.json.gz"


@pytest.fixture
def runner(tmp_path):
    # no COLUMNS: stdout (not a terminal) is never shortened, as a file is not
    return CliRunner(env={"COLUMNS": None, "TRACEVIEW_CACHE_DIR": str(tmp_path / "cache")})


def _invoke(runner, *args):
    res = runner.invoke(main, [str(a) for a in args])
    assert res.exit_code == 0, res.output
    return res


def test_summary_of_two_traces_in_json_is_one_document(runner):
    doc = json.loads(_invoke(runner, "summary", A, B, "--format", "json").stdout)
    assert doc["schema"] == "traceview.reports" and doc["schema_version"] == 1
    assert [r["info"]["label"] for r in doc["reports"]] == ["naive", "sdpa_flash"]
    assert all(r["schema"] == "traceview.report" and r["kind"] == "summary" for r in doc["reports"])


def test_one_report_in_json_stays_a_report_document(runner):
    doc = json.loads(_invoke(runner, "summary", A, "--format", "json").stdout)
    assert doc["schema"] == "traceview.report" and doc["info"]["label"] == "naive"


def test_summary_of_two_traces_in_csv_has_one_header_and_a_report_column(runner):
    text = _invoke(runner, "summary", A, B, "--format", "csv").stdout
    rows = list(csv.reader(io.StringIO(text, newline="")))
    header, body = rows[0], rows[1:]
    assert header[:2] == ["report", "table"] and header not in body  # one header, not one per report
    assert {r[0] for r in body} == {"naive", "sdpa_flash"}
    # each report's rows are its own: its info rows name its trace
    traces = {r[0]: r[header.index("value")] for r in body if r[1] == "info" and r[2] == "trace"}
    assert traces == {"naive": str(A), "sdpa_flash": str(B)}
    # the same rows, less the report column, as each report alone (numbers unchanged)
    alone = list(csv.reader(io.StringIO(_invoke(runner, "summary", A, "--format", "csv").stdout, newline="")))
    mine = [dict(zip(header, r, strict=True)) for r in body if r[0] == "naive"]
    assert [{k: v for k, v in m.items() if k in alone[0]} for m in mine] == [
        dict(zip(alone[0], r, strict=True)) for r in alone[1:]
    ]


def test_the_same_trace_twice_gets_two_report_labels():
    reports = [tv.summary(str(A)), tv.summary(str(A))]
    rows = list(csv.DictReader(io.StringIO(render(reports, "csv"), newline="")))
    assert {r["report"] for r in rows} == {"naive (0)", "naive (1)"}


def test_summary_of_two_traces_in_html_is_one_page(runner):
    page = _invoke(runner, "summary", A, B, "--format", "html").stdout
    assert page.count("<!DOCTYPE html>") == 1 and page.count("</html>") == 1
    assert "<title>Summary of 2 traces</title>" in page
    assert page.count('<section class="report"') == 2


def test_table_and_markdown_show_the_reports_one_after_another(runner):
    for fmt in ("table", "markdown"):
        out = _invoke(runner, "summary", A, B, "--format", fmt).stdout
        assert out.index("Summary of naive") < out.index("Summary of sdpa_flash")
        assert out == "".join(_invoke(runner, "summary", p, "--format", fmt).stdout for p in (A, B))


@pytest.mark.parametrize("fmt", FORMATS)
def test_output_file_holds_the_bytes_stdout_shows(runner, tmp_path, fmt):
    shown = _invoke(runner, "summary", A, B, "--format", fmt, "--wide").stdout_bytes
    target = tmp_path / f"out{OUTPUTS[fmt].extension}"
    res = _invoke(runner, "summary", A, B, "--format", fmt, "-o", target)
    assert res.stdout == "" and f"wrote {target}" in res.stderr
    assert target.read_bytes() == shown


@pytest.mark.parametrize("fmt", FORMATS)
def test_the_format_follows_the_file_extension(runner, tmp_path, fmt):
    target = tmp_path / f"k{OUTPUTS[fmt].extension}"
    _invoke(runner, "kernels", A, "--output", target)
    assert target.read_bytes() == _invoke(runner, "kernels", A, "--format", fmt, "--wide").stdout_bytes


def test_every_command_with_format_takes_output(runner, tmp_path):
    for args in (["diff", A, B], ["compare", A, B], ["kernels", A]):
        target = tmp_path / f"{args[0]}.json"
        _invoke(runner, *args, "-o", target)
        assert json.loads(target.read_text())["kind"] == args[0]


def test_output_into_a_missing_folder_is_one_line_exit_1(tmp_path):
    env = dict(os.environ, TRACEVIEW_CACHE_DIR=str(tmp_path / "cache"))
    missing = tmp_path / "no" / "such" / "out.json"
    res = subprocess.run(
        [sys.executable, "-m", "traceview", "summary", str(A), "-o", str(missing)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert res.returncode == 1 and res.stdout == ""
    assert res.stderr.splitlines() == [
        f"traceview: error: {missing}: cannot write: folder {missing.parent} does not exist"
    ]
    assert not missing.parent.exists()


@pytest.mark.parametrize(
    "args,needle",
    [
        (["-o", "x.xyz"], "no format ends in .xyz"),
        (["-o", "x.csv", "--format", "json"], "names a csv file but --format is json"),
    ],
)
def test_output_and_format_that_disagree_are_usage_errors(runner, tmp_path, args, needle):
    res = runner.invoke(
        main, ["summary", str(A), *[str(tmp_path / a) if a.startswith("x.") else a for a in args]]
    )
    assert res.exit_code == 2 and needle in res.output and "Traceback" not in res.output
    assert list(tmp_path.glob("x.*")) == []


def test_a_file_without_a_known_extension_takes_the_format_given(runner, tmp_path):
    target = tmp_path / "summary.log"
    _invoke(runner, "summary", A, "--format", "json", "-o", target)
    assert json.loads(target.read_text())["kind"] == "summary"


def test_formats_declare_extension_and_binary():
    assert {f: (OUTPUTS[f].extension, OUTPUTS[f].binary) for f in FORMATS} == {
        "table": (".txt", False),
        "markdown": (".md", False),
        "json": (".json", False),
        "csv": (".csv", False),
        "html": (".html", False),
    }
    assert format_for_path("a/B.HTM") == "html" and format_for_path("x.parquet") is None


def test_write_takes_a_binary_format(tmp_path):
    # no built-in format is binary yet; write() must still write bytes whole (atomic.write_bytes)
    gz = Format(
        "json.gz",
        (".json.gz",),
        True,
        lambda reports, **kw: gzip.compress(OUTPUTS["json"].render(reports, **kw).encode(), mtime=0),
    )
    r = tv.summary(str(A))
    path = write([r, r], gz, tmp_path / "two.json.gz")
    assert len(json.loads(gzip.decompress(path.read_bytes()))["reports"]) == 2
    assert [p.name for p in tmp_path.iterdir()] == ["two.json.gz"]  # no temporary file left


def test_a_report_set_renders_through_render():
    # ``traceview report``'s ReportSet: its page in HTML (what report -o writes), its reports in other formats
    pytest.importorskip("matplotlib")
    from traceview.analyses.report_set import report_set
    from traceview.render.htmlreport import render_report_set

    rs = report_set([tv.load(str(A)), tv.load(str(B))])

    def undated(page):  # matplotlib stamps each SVG with the time it was drawn and random ids
        return re.sub(r"<svg.*?</svg>", "<svg/>", page, flags=re.S)

    assert undated(render(rs, "html")) == undated(render_report_set(rs, "traceview report: 2 traces"))
    doc = json.loads(render(rs, "json"))
    assert [r["kind"] for r in doc["reports"]][:2] == ["compare", "glance"]
    # the samples are recorded with stacks (issue 19): each trace's top source lines too
    assert len(rs.sources) == 2 and "collectors/attention.py:106 _naive" in render(rs, "html")
    n = 3 + len(rs.diffs) + len(rs.sources) + sum(tl is not None for _, tl, _ in rs.timelines)
    assert len(doc["reports"]) == n
