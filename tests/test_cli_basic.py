"""The summary and kernels commands: numbers, formats, exit codes."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from corpus import CORPUS

import traceview as tv
from traceview.cli import main

SAMPLES = Path(__file__).resolve().parents[1] / "sample_traces"
H100 = CORPUS / "tracelens" / "h100__gaunernst_bert-small-uncased__1016001.json.gz"
needs_corpus = pytest.mark.skipif(not H100.exists(), reason="corpus absent")


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def test_summary_runs_on_every_sample_trace():
    result = run("summary", SAMPLES, "--no-cache")
    assert result.exit_code == 0, result.output
    for variant in ("naive", "naive_inplace", "sdpa_math", "sdpa_flash"):
        assert f"Summary of {variant}" in result.output


@needs_corpus
def test_kernels_json_matches_the_dataframe():
    result = run("kernels", H100, "--format", "json", "--no-cache")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["schema"] == "traceview.report" and doc["kind"] == "kernels"
    rows = doc["tables"]["kernels"]
    k = tv.load(H100, cache=False).kernels
    assert sum(r["count"] for r in rows) == len(k)
    assert sum(r["total_ns"] for r in rows) == int(k["dur_ns"].sum())
    top = rows[0]
    same = k[k["name"] == top["name"]]["dur_ns"]
    assert top["total_ns"] == int(same.sum()) and top["max_ns"] == int(same.max())
    assert top["median_ns"] == float(same.median())
    assert abs(sum(r["pct_time"] for r in rows) - 100.0) < 1e-6


@needs_corpus
def test_kernels_csv_and_markdown():
    out = run("kernels", H100, "--format", "csv", "--no-cache").output
    rows = list(csv.DictReader(io.StringIO(out)))
    assert rows and {
        "pct_time",
        "total_ns",
        "count",
        "avg_ns",
        "median_ns",
        "min_ns",
        "max_ns",
        "name",
    } <= set(rows[0])
    md = run("kernels", H100, "--format", "markdown", "--no-cache").output
    assert "| pct_time | total_ns | count |" in md


@needs_corpus
def test_summary_step_selection_counts_one_step():
    t = tv.load(H100, cache=False)
    step = int(t.kernels["step"].dropna().iloc[0])
    doc = json.loads(run("summary", H100, "--step", step, "--format", "json", "--no-cache").output)
    assert doc["info"]["gpu_activities"] == int((t.kernels["step"] == step).sum())


@needs_corpus
def test_unclassified_lists_only_other():
    doc = json.loads(run("kernels", H100, "--unclassified", "--format", "json", "--no-cache").output)
    assert doc["kind"] == "unclassified"
    assert doc["tables"]["unclassified"] == []


def test_unknown_step_is_a_one_line_error(tmp_path):
    result = run("summary", SAMPLES / "naive.json.gz", "--step", 999, "--no-cache")
    assert result.exit_code == 1


@pytest.mark.parametrize(
    "content,needle",
    [
        (None, "no such file"),
        (b"", "empty file"),
        (b"hello", "not JSON"),
        (b'{"traceEvents": [{"ph": "X", ', "truncated"),
        (b'{"foo": 1}', "no traceEvents"),
        (b"\x1f\x8b\x08\x00garbage-garbage", "gzip"),
    ],
)
def test_bad_input_is_one_line_on_stderr_exit_1(tmp_path, content, needle):
    path = tmp_path / "bad.json"
    if content is not None:
        path.write_bytes(content)
    proc = subprocess.run(
        [sys.executable, "-m", "traceview", "summary", str(path), "--no-cache"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 1
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert str(path) in lines[0] and needle in lines[0]
    assert "Traceback" not in proc.stderr


def test_usage_error_exits_2():
    proc = subprocess.run(
        [sys.executable, "-m", "traceview", "summary", "--format", "xml", "x"], capture_output=True, text=True
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr


@needs_corpus
def test_table_fits_columns_and_wide_prints_whole_names():
    import os

    env = {"COLUMNS": "80"}
    fitted = CliRunner(env=env).invoke(main, ["kernels", str(H100)]).output
    # the trace: info line's path stays whole (to be copied; the terminal wraps it)
    assert max(len(line) for line in fitted.splitlines() if not line.startswith("trace: ")) <= 80
    wide = CliRunner(env=env).invoke(main, ["kernels", str(H100), "--wide"]).output
    assert max(len(line) for line in wide.splitlines()) > 80 and "…" not in wide
    piped = (
        CliRunner(env={k: v for k, v in os.environ.items() if k != "COLUMNS"})
        .invoke(main, ["kernels", str(H100)], env={"COLUMNS": None})
        .output
    )
    # piped with no COLUMNS: fitted to PIPED_WIDTH (whole names in --wide, JSON and CSV), issue 32
    assert max(len(line) for line in piped.splitlines() if not line.startswith("trace: ")) <= 200


@needs_corpus
def test_kernels_show_readable_name_and_launching_chain():
    doc = json.loads(run("kernels", H100, "--format", "json").output)
    rows = doc["tables"]["kernels"]
    flash = next(r for r in rows if "flash_fwd_kernel" in r["name"])
    assert flash["kernel"] == "pytorch_flash::flash_fwd_kernel [bfloat16_t]"  # the dtype stays (issue 21)
    assert flash["launched_by"].startswith("aten::scaled_dot_product_attention")
    assert isinstance(flash["other_chains"], int)
    assert all(isinstance(r["total_ns"], int) and isinstance(r["count"], int) for r in rows)


def test_every_command_writes_html():
    naive = SAMPLES / "naive.json.gz"
    for args in (
        ["summary", naive],
        ["summary", SAMPLES],
        ["kernels", naive],
        ["diff", naive, SAMPLES / "sdpa_math.json.gz"],
        ["compare", SAMPLES],
    ):
        out = CliRunner().invoke(main, [str(a) for a in args] + ["--format", "html"]).stdout
        assert out.startswith("<!DOCTYPE html>") and out.count("</html>") == 1, args


@needs_corpus
def test_summary_csv_keeps_the_facts_and_integer_ns():
    rows = list(csv.DictReader(io.StringIO(run("summary", H100, "--format", "csv").output)))
    info = {r["key"]: r["value"] for r in rows if r["table"] == "info"}
    assert info["label"] == "h100__gaunernst_bert-small-uncased__1016001"
    assert info["gpu_time_ns"].isdigit() and info["kernels_per_step"].isdigit()
    by_kind = [r for r in rows if r["table"] == "by_kind"]
    assert by_kind and all(r["count"].isdigit() and r["total_ns"].isdigit() for r in by_kind)


def test_labels_drop_trace_suffix(tmp_path):
    import gzip

    doc = json.loads(gzip.decompress((SAMPLES / "naive.json.gz").read_bytes()))
    doc.pop("traceview", None)
    dst = tmp_path / "run-TP-0-DECODE.trace.json.gz"
    dst.write_bytes(gzip.compress(json.dumps(doc).encode()))
    assert tv.load(dst, cache=False).label == "run-TP-0-DECODE"
