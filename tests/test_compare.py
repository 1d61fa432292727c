"""``traceview compare``: one row per trace, per step, ratios to a baseline."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import numpy as np
import pytest
import synth
from click.testing import CliRunner
from corpus import CORPUS

import traceview as tv
from traceview.cli import main
from traceview.errors import TraceviewError

SAMPLES = Path(__file__).resolve().parents[1] / "sample_traces"
STORY = ["naive", "naive_inplace", "sdpa_math", "sdpa_efficient", "sdpa_flash"]
HTA = [
    CORPUS / "hta" / "trace_diff__control__control.json.gz",
    CORPUS / "hta" / "trace_diff__test__test.json.gz",
]


@pytest.fixture(scope="module")
def story_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("story")
    for i, v in enumerate(STORY):
        synth.make(d, v, steps=3 + i % 3)  # different step counts: 3, 4, 5, 3, 4
    return d


@pytest.fixture(scope="module")
def story(story_dir):
    return [tv.load(story_dir / f"{v}.json.gz", cache=False) for v in STORY]


def independent(trace) -> tuple[float, float]:
    """GPU activities (kernels, memcpys, memsets) and GPU time per step."""
    k = trace.kernels
    inside = k["step"].notna().to_numpy()
    n = len(trace.steps)
    return inside.sum() / n, float(k.loc[inside, "dur_ns"].sum()) / n


def kernels_only(trace) -> float:
    """Kernels per step: GPU activities of kind kernel, no memcpy or memset."""
    k = trace.kernels
    return ((k["step"].notna() & (k["kind"] == "kernel")).sum()) / len(trace.steps)


def test_the_attention_story_table(story):
    r = tv.compare(story)
    assert r.kind == "compare" and r.info["baseline"] == "naive" and r.info["gpu"] is True
    t = r["compare"].set_index("label")
    assert t.index.tolist() == STORY
    for trace, v in zip(story, STORY, strict=True):
        kernels, gpu_ns = independent(trace)
        assert t.loc[v, "gpu_activities_per_step"] == kernels == synth.EXPECTED_PER_STEP[v]
        assert (
            t.loc[v, "kernels_per_step"] == kernels_only(trace) == kernels - (v == "naive")
        )  # naive's memcpy
        assert t.loc[v, "gpu_time_per_step_ns"] == pytest.approx(gpu_ns)
        assert t.loc[v, "regions"] == len(trace.steps)
    base_ns = t.loc["naive", "gpu_time_per_step_ns"]
    assert t.loc["naive", "ratio_gpu_time"] == 1.0
    assert t.loc["sdpa_math", "ratio_gpu_time"] == pytest.approx(
        t.loc["sdpa_math", "gpu_time_per_step_ns"] / base_ns
    )
    assert t.loc["sdpa_math", "ratio_kernels"] == pytest.approx(17 / 5)
    assert t.loc["naive", "tensor_core_pct"] == 100.0 and t.loc["sdpa_math", "tensor_core_pct"] == 0.0
    assert np.isnan(t.loc["sdpa_flash", "tensor_core_pct"])
    assert t.loc["sdpa_math", "gemm_family"] == "sgemm" and t.loc["naive", "gemm_family"] == "s16816"
    assert t["attention_backend"].to_dict() == {
        "naive": "none",
        "naive_inplace": "none",
        "sdpa_math": "math",
        "sdpa_efficient": "mem_efficient",
        "sdpa_flash": "flash",
    }
    assert t.loc["sdpa_efficient", "top_categories"] == "attention 100%"
    assert t.loc["naive", "top_categories"].startswith("gemm 68%")
    cats = r["by_category"]
    naive_mem = cats[(cats["trace"] == "naive") & (cats["category"] == "memcpy")]
    assert naive_mem["count"].tolist() == [1.0] and naive_mem["time_ns"].tolist() == [15_000.0]
    text = "\n".join(r.findings)
    assert "sdpa_flash takes the least GPU time per step" in text and "sdpa_math the most" in text
    assert "GEMMs run on CUDA cores in sdpa_math (sgemm); on tensor cores in naive (s16816)" in text
    assert (
        "attention: naive none; naive_inplace none; sdpa_math math; sdpa_efficient mem_efficient; "
        "sdpa_flash flash" in text
    )


def test_baseline_by_label_path_index_or_trace(story, story_dir):
    for baseline in ("sdpa_math", 2, story[2], str(story_dir / "sdpa_math.json.gz")):
        r = tv.compare(story, baseline=baseline)
        t = r["compare"].set_index("label")
        assert r.info["baseline"] == "sdpa_math"
        assert t.loc["sdpa_math", "ratio_gpu_time"] == 1.0
        assert t.loc["naive", "ratio_kernels"] == pytest.approx(5 / 17)
    with pytest.raises(TraceviewError, match="baseline 'nope' is none of the compared traces"):
        tv.compare(story, baseline="nope")
    with pytest.raises(TraceviewError):
        tv.compare([])


def test_paths_and_folders_are_accepted(story_dir):
    r = tv.compare(story_dir, cache=False)
    assert sorted(r["compare"]["label"]) == sorted(STORY)
    r = tv.compare([story_dir / "naive.json.gz", story_dir / "sdpa_flash.json.gz"], cache=False)
    assert r["compare"]["label"].tolist() == ["naive", "sdpa_flash"]


def test_cpu_sample_traces_compare_cpu_ops():
    r = tv.compare(SAMPLES)
    assert r.info["gpu"] is False
    t = r["compare"].set_index("label")
    assert "kernels_per_step" not in t.columns and "top_ops" in t.columns
    manifest = json.loads((SAMPLES / "manifest.json").read_text())["collected"]
    assert sorted(t.index) == sorted(manifest)
    for variant, m in manifest.items():
        assert t.loc[variant, "cpu_ops_per_step"] == sum(m["trace_op_counts"].values()) / m["steps"], variant
        trace = tv.load(SAMPLES / m["file"])
        assert t.loc[variant, "cpu_time_per_step_ns"] == pytest.approx(trace.steps["dur_ns"].mean())
    assert (
        t.loc["sdpa_math", "attention_backend"] == "math"
        and t.loc["sdpa_flash", "attention_backend"] == "flash (cpu)"
    )
    assert t.loc["naive", "attention_backend"] == "none"
    assert r.findings[0].startswith("no trace holds GPU activity")
    assert any("sdpa_math runs the most CPU ops per step (63)" in f for f in r.findings)
    by_op = r["by_op"]
    naive = by_op[by_op["trace"] == "naive"]
    trace = tv.load(SAMPLES / "naive.json.gz")
    ops = trace.ops[trace.ops["step"].notna()]
    assert naive["self_time_ns"].sum() == pytest.approx(ops.loc[ops["depth"] == 0, "dur_ns"].sum() / 3)


def test_cli_compare_folder_formats_and_baseline(story_dir):
    runner = CliRunner()
    res = runner.invoke(main, ["compare", str(story_dir), "--no-cache"])
    assert res.exit_code == 0, res.output
    assert "Compare 5 traces (per step, baseline naive)" in res.stdout
    res = runner.invoke(
        main, ["compare", str(story_dir), "--baseline", "sdpa_flash", "--format", "json", "--no-cache"]
    )
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["kind"] == "compare" and doc["info"]["baseline"] == "sdpa_flash"
    rows = {row["label"]: row for row in doc["tables"]["compare"]}
    assert rows["sdpa_flash"]["ratio_gpu_time"] == 1.0
    assert rows["sdpa_efficient"]["ratio_gpu_time"] == pytest.approx(40 / 30)
    shown = set(doc["tables"]) - {"advice"}
    assert shown == {"completeness", "verdict", "workload", "compare", "by_category"}
    # the work of each trace against the baseline's (issue 32)
    assert {r["trace"] for r in doc["tables"]["verdict"]} == set(rows) - {"sdpa_flash"}
    docs = (Path(__file__).resolve().parents[1] / "docs" / "json-schema.md").read_text()
    for col in doc["tables"]["compare"][0]:
        assert f"`{col}`" in docs, col
    res = runner.invoke(
        main,
        [
            "compare",
            str(story_dir / "naive.json.gz"),
            str(story_dir / "naive_inplace.json.gz"),
            "--baseline",
            str(story_dir / "naive_inplace.json.gz"),
            "--format",
            "csv",
            "--no-cache",
            "--step",
            "4",
        ],
    )
    assert res.exit_code == 0, res.output
    rows = list(csv.DictReader(io.StringIO(res.stdout)))
    compare_rows = [r for r in rows if r["table"] == "compare"]
    assert [r["label"] for r in compare_rows] == ["naive", "naive_inplace"]
    assert float(compare_rows[0]["ratio_kernels"]) == pytest.approx(5 / 5)  # the memcpy is not a kernel
    assert (
        float(compare_rows[0]["gpu_activities_per_step"]) == 6
        and float(compare_rows[1]["gpu_activities_per_step"]) == 5
    )


def test_cli_compare_errors_are_one_line(tmp_path, story_dir):
    runner = CliRunner()
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    res = runner.invoke(main, ["compare", str(story_dir / "naive.json.gz"), str(bad)])
    assert res.exit_code == 1 and len(res.stderr.strip().splitlines()) == 1 and "bad.json" in res.stderr
    assert "Traceback" not in res.output
    res = runner.invoke(main, ["compare", str(story_dir / "naive.json.gz"), "--baseline", "zzz"])
    assert res.exit_code == 1 and "baseline 'zzz'" in res.stderr and len(res.stderr.strip().splitlines()) == 1
    empty = tmp_path / "empty"
    empty.mkdir()
    res = runner.invoke(main, ["compare", str(empty)])
    assert res.exit_code == 1 and "holds no .json" in res.stderr


@pytest.mark.skipif(not all(p.exists() for p in HTA), reason="corpus absent")
def test_corpus_pair():
    traces = [tv.load(p, cache=False) for p in HTA]
    r = tv.compare(traces)
    t = r["compare"]
    for row, trace in zip(t.itertuples(index=False), traces, strict=True):
        kernels, gpu_ns = independent(trace)
        assert row.gpu_activities_per_step == kernels
        assert row.kernels_per_step == kernels_only(trace)
        assert row.gpu_time_per_step_ns == pytest.approx(gpu_ns)
    assert t["gpu_activities_per_step"].tolist() == [1575.0, 2503.0]
    assert (t["kernel_launches_per_step"] <= t["kernels_per_step"]).all()  # a launch starts >= 1 kernel
    assert t["tensor_core_pct"].iloc[0] > 50 and t["tensor_core_pct"].iloc[1] == 0
    assert any("different devices" in f for f in r.findings)


def test_repeated_labels_get_the_file_name(tmp_path):
    a = synth.make(tmp_path, "naive", steps=3)
    b = synth.make(tmp_path, "naive", steps=5, name="naive_5steps")
    r = tv.compare([a, b], cache=False)
    assert r["compare"]["label"].tolist() == ["naive (naive.json.gz)", "naive (naive_5steps.json.gz)"]
    assert r["compare"]["ratio_gpu_time"].tolist() == [1.0, 1.0]  # per step, 3 vs 5 steps
    d = tv.diff(a, b, cache=False)
    assert (d.info["a_label"], d.info["b_label"]) == ("naive (naive.json.gz)", "naive (naive_5steps.json.gz)")


def test_same_trace_twice_gets_distinct_labels():
    from pathlib import Path

    import traceview as tv

    path = Path(__file__).resolve().parents[1] / "sample_traces" / "naive.json.gz"
    t = tv.load(path, cache=False)
    rep = tv.compare([t, t])
    labels = rep["compare"]["label"].tolist()
    assert len(labels) == 2 and len(set(labels)) == 2
    assert rep["compare"]["cpu_ops_per_step"].tolist() == [45.0, 45.0]
