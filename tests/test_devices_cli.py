"""``--devices FILE`` on the commands that show efficiency, and ``traceview kernels --ops``.

A user's device table is checked before any trace is read: a file that is not TOML, or has a
field the table does not know, is a one-line error naming the file (exit 1). A device it adds
is then found for a trace whose GPU the built-in table does not know.
"""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest
from click.testing import CliRunner
from corpus import CORPUS

import traceview as tv
from traceview.analyses.measure.efficiency import kernel_efficiency, op_table
from traceview.analyses.select.region import Selection, region
from traceview.cli import main

FALCON = CORPUS / "tracelens" / "h100__Falconsai_nsfw_image_detection__1016002.json.gz"
needs_falcon = pytest.mark.skipif(not FALCON.exists(), reason="corpus absent")

GOOD = """version = 1
[[device]]
name = "Imaginary X1"
match = 'Imaginary X1'
tensor = { bf16 = 500.0, fp32 = 250.0 }
vector = { fp32 = 50.0 }
memory_gbps = 2000
source = "made up for a test"
"""


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.fixture(scope="module")
def imaginary(tmp_path_factory):
    """The Falcon H100 trace with its GPU renamed to one no table knows."""
    doc = json.loads(gzip.decompress(FALCON.read_bytes()))
    for props in doc["deviceProperties"]:
        props["name"] = "Imaginary X1"
    path = tmp_path_factory.mktemp("dev") / "imaginary.json.gz"
    path.write_bytes(gzip.compress(json.dumps(doc).encode()))
    return path


def one_line_error(res, *words):
    assert res.exit_code == 1, res.output
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in res.output, res.stderr
    for w in words:
        assert w in lines[0], (w, lines[0])


@pytest.mark.parametrize(
    "command", [["kernels", "T"], ["diff", "T", "T"], ["compare", "T"], ["report", "T", "-o", "OUT"]]
)
def test_malformed_toml_is_one_line_naming_the_file(tmp_path, command):
    bad = tmp_path / "peaks.toml"
    bad.write_text("version = 1\n[[device]\nname = 'x'\n")
    trace = tmp_path / "never-read.json"  # the file is checked before any trace is read
    args = [str(trace) if a == "T" else str(tmp_path / "r.html") if a == "OUT" else a for a in command]
    one_line_error(run(*args, "--devices", bad), str(bad), "not a valid TOML device table")


def test_unknown_field_and_bad_values_are_one_line_errors(tmp_path):
    trace = tmp_path / "never-read.json"
    second = GOOD + "[[device]]\nname = 'Imaginary X2'\nmatch = 'X2'\nmemory_gbps = 1\n"  # lacks its source
    for text, words in (
        (
            GOOD.replace("memory_gbps", "bandwidth"),
            ["device[0]: unknown field 'bandwidth'", "Imaginary X1", "memory_gbps"],
        ),
        (GOOD + "colour = 'red'\n", ["unknown field 'colour'"]),
        (GOOD.replace("bf16 = 500.0", "bf16 = 'fast'"), ["device[0].tensor", "expected number"]),
        (GOOD.replace("'Imaginary X1'", "'(unclosed'"), ["device[0].match: not a regular expression"]),
        ("[gpu]\nname = 'x'\n", ["unknown top-level key 'gpu'"]),
        (GOOD.replace("2000", "true"), ["device[0].memory_gbps: expected number, got boolean"]),
        (GOOD.replace("2000", "2000\nsms = 0"), ["device[0].sms", ">= 1"]),
        (second, ["device[1]: missing 'source'", "Imaginary X2"]),
    ):
        f = tmp_path / f"d{abs(hash(text))}.toml"
        f.write_text(text)
        one_line_error(run("kernels", trace, "--devices", f), str(f), *words)
    one_line_error(run("kernels", trace, "--devices", tmp_path / "absent.toml"), "absent.toml", "cannot read")


@needs_falcon
def test_a_device_from_the_file_then_matches(tmp_path, imaginary):
    dev = tmp_path / "peaks.toml"
    dev.write_text(GOOD)
    plain = json.loads(run("kernels", imaginary, "--format", "json", "--no-cache").stdout)
    assert any(
        "'Imaginary X1' is not in the device table" in n and "--devices FILE" in n for n in plain["notes"]
    )
    assert all(r["pct_of_peak_tflops"] is None for r in plain["tables"]["kernels"])
    res = run("kernels", imaginary, "--format", "json", "--no-cache", "--devices", dev)
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert not any("not in the device table" in n for n in doc["notes"])
    rows = [r for r in doc["tables"]["kernels"] if r["path"] == "tensor" and r["tflops"] is not None]
    assert rows
    for r in rows:  # tensor-core bf16 kernels against the file's 500 TFLOP/s
        assert r["pct_of_peak_tflops"] == pytest.approx(100.0 * r["tflops"] / 500.0, rel=1e-9)
    # the same file reaches diff's efficiency table (and, through the loader, compare and report)
    d = json.loads(run("diff", imaginary, FALCON, "--format", "json", "--no-cache", "--devices", dev).stdout)
    eff = {r["trace"]: r for r in d["tables"]["efficiency"]}
    a, b = eff["imaginary"], eff[FALCON.name.split(".")[0]]
    assert a["gemm_tflops"] == pytest.approx(b["gemm_tflops"])  # same kernels, other peak
    assert a["gemm_pct_of_peak"] is not None and a["gemm_pct_of_peak"] > b["gemm_pct_of_peak"]  # 500 < 989
    c = json.loads(run("compare", imaginary, "--format", "json", "--no-cache", "--devices", dev).stdout)
    assert not any("not in the device table" in n for n in c["notes"])
    # the Python API: a load keyword
    t = tv.load(imaginary, cache=False, devices=dev)
    assert kernel_efficiency(t)["peak_tflops"].max() == 500.0


@needs_falcon
def test_ops_table_flops_add_up_to_the_kernels_flops_of_the_step():
    t = tv.load(FALCON, cache=False)
    step = int(t.steps["step"].iloc[0])
    r = region(t, Selection(step=step))
    ops = op_table(r)
    kernel_flops = kernel_efficiency(t, r.activities)[
        "flops"
    ].sum()  # FLOPs attributed to this step's kernels
    assert kernel_flops > 1e11
    assert ops["flops"].sum() == pytest.approx(kernel_flops, rel=1e-12)
    assert not ops.duplicated(["op", "input_dims"]).any()  # one row per op name and shapes
    assert ops["gpu_time_ns"].sum() <= r.activities["dur_ns"].sum()
    # the CLI prints it behind --ops, the API returns it as data
    doc = json.loads(run("kernels", FALCON, "--ops", "--step", step, "--format", "json", "--no-cache").stdout)
    assert sum(x["flops"] or 0 for x in doc["tables"]["ops"]) == pytest.approx(kernel_flops, rel=1e-12)
    assert list(doc["tables"]["ops"][0]) == [
        "op",
        "input_dims",
        "count",
        "causal",
        "flops",
        "torch_flops",
        "bytes_moved",
        "gpu_time_ns",
        "tflops",
        "gbps",
        "peak_tflops",
        "pct_of_peak_tflops",
        "pct_of_peak_gbps",
    ]
    assert "ops" in tv.kernels(FALCON, ops=True, step=step, cache=False).tables
    assert "ops" not in tv.kernels(FALCON, step=step, cache=False).tables
    addmm = [x for x in doc["tables"]["ops"] if x["op"] == "aten::addmm" and x["pct_of_peak_tflops"]]
    assert addmm and all(0 < x["pct_of_peak_tflops"] <= 100 for x in addmm)
    for x in addmm:  # rates are the row's FLOPs over its kernels' time
        assert x["tflops"] == pytest.approx(x["flops"] / x["gpu_time_ns"] / 1e3)
    text = run("kernels", FALCON, "--ops", "--step", step, "--no-cache").stdout
    assert "[ops" in text and "aten::addmm" in text
    assert np.isfinite(ops["tflops"].dropna()).all()
