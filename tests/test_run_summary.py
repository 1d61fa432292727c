"""``summary --run`` and ``compare --run``: a run's shared metrics per rank and overall, and runs compared.

The expected figures come from an independent recount of the rank files (stdlib json with
Decimal numbers, nothing shared with the loader): a GPU activity counts for a step when the
runtime call that launched it (same correlation id) starts inside that rank's ProfilerStep
span; with no ProfilerStep the whole trace is one region.
"""

from __future__ import annotations

import gzip
import json
import os
from decimal import Decimal

import pytest
from click.testing import CliRunner
from corpus import CORPUS, SKIP_REASON

import traceview as tv
from traceview.cli import main

PARAM = CORPUS / "param"
TOK = [CORPUS / "tokenomics" / "trace0.json.gz", CORPUS / "tokenomics" / "trace1.json.gz"]
pytestmark = pytest.mark.skipif(not PARAM.is_dir() or not all(p.is_file() for p in TOK), reason=SKIP_REASON)
GPU = {"kernel": "kernel", "gpu_memcpy": "memcpy", "gpu_memset": "memset"}
LAUNCH = {"cuda_runtime", "cuda_driver"}


def recount(path) -> dict:
    """rank, regions, gpu_activities, gpu_time_ns, kernels, cpu_time_ns of one rank file, by hand."""
    with gzip.open(path) as f:
        doc = json.loads(f.read(), parse_float=Decimal)
    ev = [e for e in doc["traceEvents"] if e.get("ph") == "X"]
    ns = lambda v: int(Decimal(v) * 1000)  # noqa: E731  (µs with fractions -> exact ns)
    steps = [
        (e["pid"], ns(e["ts"]), ns(e["ts"]) + ns(e["dur"]))
        for e in ev
        if str(e.get("name", "")).startswith("ProfilerStep#")
    ]
    launch = {
        e["args"]["correlation"]: (e["pid"], ns(e["ts"]))
        for e in ev
        if e.get("cat") in LAUNCH and "correlation" in e.get("args", {})
    }
    acts = [e for e in ev if e.get("cat") in GPU]
    if steps:

        def in_step(e):
            pid, ts = launch.get(e.get("args", {}).get("correlation"), (None, None))
            return ts is not None and any(p == pid and a <= ts <= b for p, a, b in steps)

        acts = [e for e in acts if in_step(e)]
    return {
        "rank": doc["distributedInfo"]["rank"],
        "regions": max(len(steps), 1),
        "gpu_activities": len(acts),
        "gpu_time_ns": sum(max(ns(e["dur"]), 0) for e in acts),
        "kernels": sum(1 for e in acts if GPU[e["cat"]] == "kernel"),
        "cpu_time_ns": sum(b - a for _, a, b in steps) if steps else None,
    }


@pytest.fixture(scope="module")
def param_counts():
    files = sorted(PARAM.glob("dlrm_kineto__worker*"))
    assert len(files) == 8
    return {c["rank"]: c for c in map(recount, files)}


@pytest.fixture(scope="module")
def tok_counts():
    return {c["rank"]: c for c in map(recount, TOK)}


@pytest.fixture(scope="module")
def tok_run(tmp_path_factory):
    """The two tokenomics ranks in a folder of their own (their folder holds another rank-0 trace)."""
    d = tmp_path_factory.mktemp("runs") / "tok"
    d.mkdir()
    for p in TOK:
        os.symlink(p, d / p.name)
    return d


def check_rows(report, counts: dict):
    table = report["ranks"]
    rows = table[table["rank"] != "overall"].set_index("rank")
    assert sorted(rows.index) == sorted(map(str, counts))
    for r, c in counts.items():
        row = rows.loc[str(r)]
        assert (row.regions, row.gpu_activities, row.gpu_time_ns) == (
            c["regions"],
            c["gpu_activities"],
            c["gpu_time_ns"],
        ), r
        assert row.kernels_per_step * c["regions"] == c["kernels"]
        assert row.gpu_time_per_step_ns == c["gpu_time_ns"] / c["regions"]
        if c["cpu_time_ns"] is not None:
            assert row.cpu_time_per_step_ns == c["cpu_time_ns"] / c["regions"]
    total = table[table["rank"] == "overall"].iloc[0]
    assert total.gpu_activities == sum(c["gpu_activities"] for c in counts.values())
    assert total.gpu_time_ns == sum(c["gpu_time_ns"] for c in counts.values())
    assert total.gpu_time_per_step_ns == sum(c["gpu_time_ns"] / c["regions"] for c in counts.values())
    assert report.info["gpu_time_ns"] == total.gpu_time_ns and report.info["ranks"] == len(counts)


def test_param_run_matches_the_recount(param_counts):
    report = tv.summary(PARAM, run=True)
    assert report.kind == "run_summary" and report.info["world_size"] == 8
    assert report.info["rank_rule"] == "distributedInfo.rank" and report.info["missing_ranks"] == "none"
    check_rows(report, param_counts)
    assert any(
        c["gpu_activities"] < 300 for c in param_counts.values()
    )  # 64 launches outside the step: left out
    cats = report["by_category"]
    assert int(cats["total_ns"].sum()) == report.info["gpu_time_ns"]


def test_two_tokenomics_ranks_no_steps(tok_counts):
    report = tv.summary_run([str(p) for p in TOK])
    assert report.info["world_size"] == 2 and report.info["per"] == "trace"
    check_rows(report, tok_counts)


def test_python_equals_cli_json(param_counts):
    res = CliRunner().invoke(main, ["summary", "--run", str(PARAM), "--format", "json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    api = tv.summary_run(PARAM).to_dict()
    assert doc["tables"] == api["tables"] and doc["info"] == api["info"]
    assert [r["gpu_time_ns"] for r in doc["tables"]["ranks"][:8]] == [
        param_counts[r]["gpu_time_ns"] for r in range(8)
    ]


@pytest.mark.parametrize("fmt", ["table", "markdown", "json", "csv", "html"])
def test_summary_run_every_format(fmt, param_counts):
    res = CliRunner().invoke(main, ["summary", "--run", str(PARAM), "--format", fmt, "--wide"])
    assert res.exit_code == 0, res.output
    total = sum(c["gpu_time_ns"] for c in param_counts.values())
    assert (str(total) if fmt in ("json", "csv") else f"{total:,}") in res.stdout
    assert "overall" in res.stdout and "dlrm_kineto__worker7" in res.stdout


def test_summary_run_takes_the_selection(param_counts):
    step = tv.load(str(sorted(PARAM.glob("dlrm_kineto__worker0*"))[0])).steps["step"].iloc[0]
    whole, one = tv.summary_run(PARAM), tv.summary_run(PARAM, step=int(step), kind="memcpy")
    assert one.info["selection"] == f"step={step}, kind=memcpy"
    assert 0 < one.info["gpu_activities"] < whole.info["gpu_activities"]
    res = CliRunner().invoke(main, ["summary", "--run", str(PARAM), "--step", "999"])
    assert res.exit_code == 1 and "worker0" in res.output and len(res.output.strip().splitlines()) == 1


def test_compare_runs_ratios_from_the_recount(param_counts, tok_counts, tok_run):
    report = tv.compare([PARAM, tok_run], run=True)
    assert report.kind == "run_compare" and report.info["compared_ranks"] == "0-1"
    assert any("2-7 only in some runs" in n for n in report.notes)
    t = report["compare"].set_index("run")
    a = sum(param_counts[r]["gpu_time_ns"] / param_counts[r]["regions"] for r in (0, 1))
    b = sum(c["gpu_time_ns"] / c["regions"] for c in tok_counts.values())
    assert (t.loc["param", "gpu_time_per_step_ns"], t.loc["tok", "gpu_time_per_step_ns"]) == (a, b)
    assert t.loc["tok", "ratio_gpu_time"] == pytest.approx(b / a, rel=1e-12)
    assert t.loc["param", "ratio_gpu_time"] == 1.0
    ranks = report["ranks"].set_index(["rank", "run"])
    assert ranks.loc[(1, "tok"), "ratio_gpu_time"] == pytest.approx(
        tok_counts[1]["gpu_time_ns"] / param_counts[1]["gpu_time_ns"], rel=1e-12
    )


def test_compare_runs_reuses_ranks_and_run_diff(tok_run):
    """The distributed columns are traceview ranks' figures; the overall ones are diff RUN_A/ RUN_B/'s."""
    report = tv.compare_runs([PARAM, tok_run], baseline=str(tok_run))
    assert report.info["baseline"] == "tok"
    dist = tv.ranks(PARAM)["ranks"].set_index("rank")
    rows = report["ranks"][report["ranks"]["run"] == "param"].set_index("rank")
    for col in ("span_ns", "idle_ns", "communication_ns", "wait_caused_ns", "overlap_pct"):
        assert rows[col].tolist() == dist.loc[[0, 1], col].tolist(), col
    overall = tv.api.diff_runs(tok_run, PARAM)["ranks"].set_index("rank").loc["overall"]
    t = report["compare"].set_index("run")
    assert t.loc["param", "span_ns"] == overall.b_span_ns and t.loc["tok", "idle_ns"] == overall.a_idle_ns
    assert any(f.startswith("param against tok: summed GPU span") for f in report.findings)


def test_a_run_compared_with_itself():
    report = tv.compare_runs([PARAM, PARAM])
    assert report["compare"]["run"].tolist() == [f"{PARAM} (0)", f"{PARAM} (1)"]  # one run given twice
    assert (report["ranks"]["ratio_gpu_time"] == 1.0).all() and len(report["ranks"]) == 16


@pytest.mark.parametrize("fmt", ["table", "markdown", "json", "csv", "html"])
def test_compare_run_every_format(fmt, tok_run):
    res = CliRunner().invoke(main, ["compare", "--run", str(PARAM), str(tok_run), "--format", fmt, "--wide"])
    assert res.exit_code == 0, res.output
    assert "ratio_gpu_time" in res.stdout and "tok" in res.stdout and "span_ns" in res.stdout
    if fmt == "json":
        doc = json.loads(res.stdout)
        assert (
            doc["kind"] == "run_compare"
            and len(doc["tables"]["compare"]) == 2
            and len(doc["tables"]["ranks"]) == 4
        )


@pytest.mark.parametrize(
    "args,code,needle",
    [
        (["compare", "--run", str(PARAM), str(TOK[0])], 1, "trace0.json.gz: not a folder"),
        (["compare", "--run", str(PARAM), "/no/such/run"], 1, "/no/such/run"),
        (["compare", "--run", str(PARAM), str(PARAM), "--plot", "x.png"], 2, "--plot"),
        (["summary", "--run", str(TOK[0].parent)], 1, "rank 0 again"),
    ],
)
def test_run_errors_are_short(args, code, needle):
    res = CliRunner().invoke(main, args)
    assert res.exit_code == code and needle in res.output and "Traceback" not in res.output


def test_without_run_ranks_are_variants_and_a_note_says_so():
    report = tv.compare([str(p) for p in TOK])
    assert report.kind == "compare" and len(report["compare"]) == 2
    assert any("ranks 0-1 of one job" in n and "--run" in n for n in report.notes)
    res = CliRunner().invoke(main, ["summary", *map(str, TOK), "--format", "json"])
    assert res.exit_code == 0 and "--run treats them as one run" in res.stderr


def test_sample_traces_stay_variants():
    sample = os.path.join(os.path.dirname(__file__), "..", "sample_traces")
    report = tv.compare(sample)
    assert report.kind == "compare" and not any("--run" in n for n in report.notes)
