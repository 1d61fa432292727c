"""One number, one meaning: summary, compare and diff agree on every shared metric.

For every corpus trace and every sample trace, for the whole trace and for one
step: the metrics of ``registry.metrics_of`` have the same value in
``summary``'s info, in ``compare``'s row, and on both sides of a trace diffed with
itself (whose deltas are all zero and whose findings say the traces are the same).
An independent count (stdlib json + Decimal, test_corpus_exact) checks the
totals: the activities per step times the steps, plus those left out, are every
GPU activity in the file.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from corpus import corpus_params
from test_corpus_exact import independent_counts

import traceview as tv
from traceview.analyses.measure.registry import numeric

SAMPLES = Path(__file__).resolve().parents[1] / "sample_traces"
NUMERIC = numeric()  # the diff overview's rows, from the registry
GPU_ONLY = set(NUMERIC) - set(numeric(gpu=False))
PARAMS = corpus_params() + [
    pytest.param(p, id=f"samples/{p.name}") for p in sorted(SAMPLES.glob("*.json.gz"))
]


@pytest.fixture(scope="module", params=PARAMS)
def trace(request):
    return tv.load(request.param)


def selections(trace) -> list[tv.Selection]:
    out = [tv.Selection()]
    if len(trace.steps):
        out.append(tv.Selection(step=int(trace.steps["step"].iloc[-1])))
    return out


def same(x, y) -> bool:
    if isinstance(x, float) and math.isnan(x):
        return isinstance(y, float) and math.isnan(y)
    return x == y


def test_summary_compare_and_diff_agree(trace):
    for sel in selections(trace):
        info = tv.summary(trace, sel=sel).info
        row = tv.compare([trace], sel=sel)["compare"].iloc[0].to_dict()
        d = tv.diff(trace, trace, sel=sel)
        overview = d["overview"].set_index("metric")
        gpu = info["gpu_activities"] > 0
        for name in NUMERIC:
            if name in GPU_ONLY and not gpu:
                assert name not in overview.index and name not in row, name
                continue
            assert same(float(overview.loc[name, "a"]), float(info[name])), (sel, name)
            assert same(float(overview.loc[name, "b"]), float(info[name])), (sel, name)
            assert overview.loc[name, "delta"] == 0 or math.isnan(overview.loc[name, "delta"]), (sel, name)
            if name in row:
                assert same(float(row[name]), float(info[name])), (sel, name)
        assert row["attention_backend"] == info["attention_backend"] == d.info["a_attention_backend"]
        # a trace compared with itself: the same, said right after any warning that it is incomplete
        rest = [f for f in d.findings if " is incomplete: " not in f]
        assert rest[0].startswith("same work (judged on "), d.findings  # the workload verdict (issue 32)
        assert rest[1].startswith("A and B are the same"), d.findings
        assert info["per"] == d.info["per"] == tv.compare([trace], sel=sel).info["per"]


def test_totals_match_an_independent_count(trace):
    if Path(trace.path).parent == SAMPLES:
        pytest.skip("sample traces are CPU-only: no GPU activity to count")
    count, dur, _, _ = independent_counts(trace.path)
    info = tv.summary(trace).info
    in_file = sum(count.values())
    assert info["gpu_activities"] + info["left_out_gpu_activities"] == in_file
    assert info["gpu_activities_per_step"] * info["regions"] == pytest.approx(info["gpu_activities"])
    if not info["left_out_gpu_activities"]:  # every activity is in the region: the ns add up exactly
        assert info["gpu_time_ns"] == sum(dur.values())
    k = tv.kernels(trace).info
    assert (k["gpu_activities"], k["gpu_time_ns"]) == (info["gpu_activities"], info["gpu_time_ns"])


# ------------------------------------------------------------------ bugs found by a new user

from click.testing import CliRunner  # noqa: E402
from corpus import CORPUS, SKIP_REASON  # noqa: E402

from traceview.cli import main  # noqa: E402

needs_corpus = pytest.mark.skipif(not CORPUS.is_dir(), reason=SKIP_REASON)


def run(*args):
    res = CliRunner().invoke(main, [str(a) for a in args])
    assert "Traceback" not in res.output
    return res


@needs_corpus
def test_diff_with_a_trace_that_has_kernels_and_no_cpu_ops():
    a = CORPUS / "switchtransformers" / "trace.json.gz"
    b = CORPUS / "shift_equivariant_vit" / "trace.json.gz"
    res = run("diff", a, b, "--format", "json")
    assert res.exit_code == 0, res.output
    r = tv.diff(a, b)
    assert len(tv.load(b).ops) == 0 and r.info["b_kernels_per_step"] > 0
    assert set(r["only_in_b"]["launched_by"]) == {"(no CPU op)"}


def test_compare_folder_skips_files_that_are_not_traces_and_says_which(tmp_path):
    (tmp_path / "sub").mkdir()
    for name in ("naive.json.gz", "sdpa_math.json.gz"):
        (tmp_path / name).write_bytes((SAMPLES / name).read_bytes())
    (tmp_path / "sub" / "sdpa_flash.json.gz").write_bytes((SAMPLES / "sdpa_flash.json.gz").read_bytes())
    (tmp_path / "notes.json").write_text('{"traceEvents": [{"foo": 1}]}')
    (tmp_path / "list.json").write_text('[{"a": 1}, {"b": 2}]')
    res = run("compare", tmp_path, "--format", "json")
    assert res.exit_code == 0, res.output
    assert "skipped" in res.stderr and "notes.json" in res.stderr and "list.json" in res.stderr
    import json

    assert [r["label"] for r in json.loads(res.stdout)["tables"]["compare"]] == ["naive", "sdpa_math"]
    res = run("compare", tmp_path, "--recursive", "--format", "json")
    assert [r["label"] for r in json.loads(res.stdout)["tables"]["compare"]] == [
        "naive",
        "sdpa_math",
        "sdpa_flash",
    ]
    r = tv.compare(tmp_path)
    assert sum("notes.json" in n for n in r.notes) == 1
    for bad in ("notes.json", "list.json"):  # named on its own, a file that is not a trace is an error
        res = run("summary", tmp_path / bad)
        assert res.exit_code == 1 and "not a profiler trace" in res.stderr
        assert len(res.stderr.strip().splitlines()) == 1


def _listed(values) -> str:
    return ", ".join(str(v) for v in sorted(set(values)))


@needs_corpus
@pytest.mark.parametrize(
    "option",
    [
        ["--device", "5"],
        ["--stream", "999"],
        ["--device", "3", "--stream", "999"],
        ["--step", "99"],
        ["--annotation", "nosuch"],
    ],
)
@pytest.mark.parametrize("command", ["summary", "kernels", "compare"])
def test_a_selection_that_matches_nothing_is_an_error_listing_what_exists(command, option):
    path = CORPUS / "hta" / "trace_diff__control__control.json.gz"
    k = tv.load(path).kernels

    def listed(column):
        return _listed(k[column].dropna().astype(int))

    problem = {  # what exists, read off the trace's own table
        "--device": f"has no GPU activity with device 5 (devices: {listed('device')})",
        "--stream": f"has no GPU activity with stream 999 (streams: {listed('stream')})",
        "--step": "has no step 99 (steps: ",
        "--annotation": "has no annotation named 'nosuch'",
    }[option[0]]
    if option[:2] == ["--device", "3"]:
        on3 = k[k["device"] == 3]["stream"].astype(int)
        problem = f"has no GPU activity with stream 999 on device 3 (streams: {_listed(on3)})"
    res = run(command, path, *option)
    assert res.exit_code == 1, res.output
    assert problem in res.stderr and len(res.stderr.strip().splitlines()) == 1, res.stderr


def test_a_kind_that_is_absent_is_an_error(tmp_path):
    import synth

    path = synth.make(tmp_path, "naive")  # kernels and one memcpy per step, no memset
    for command in ("summary", "kernels", "diff"):
        res = run(command, path, *([path] if command == "diff" else []), "--kind", "memset")
        assert (
            res.exit_code == 1
            and "has no GPU activity with kind memset (kinds: kernel, memcpy)" in res.stderr
        )
    assert tv.summary(path, kind="memcpy", cache=False).info["gpu_activities_per_step"] == 1.0


def test_max_size_holds_for_a_cached_trace(tmp_path):
    path = tmp_path / "naive.json.gz"
    path.write_bytes((SAMPLES / "naive.json.gz").read_bytes())
    cache = tmp_path / "cache"
    tv.load(path, cache=cache)
    tv.load(path, cache=cache)  # now a hit
    with pytest.raises(tv.TraceReadError, match=r"size limit \(--max-size MIB raises it\)") as info:
        tv.load(path, cache=cache, max_bytes=1024)
    assert "max_bytes" not in str(info.value)
    res = run("summary", path, "--max-size", "0")  # a limit below 1 MiB is a usage error (issue 22)
    assert res.exit_code == 2 and "--max-size" in res.output


def test_a_trace_without_steps_counts_as_one_step_in_every_command(tmp_path):
    import gzip
    import json

    with gzip.open(SAMPLES / "naive.json.gz") as f:
        doc = json.loads(f.read())
    doc["traceEvents"] = [
        e for e in doc["traceEvents"] if not str(e.get("name", "")).startswith("ProfilerStep#")
    ]
    path = tmp_path / "nosteps.json"
    path.write_text(json.dumps(doc))
    t = tv.load(path, cache=False)
    assert len(t.steps) == 0
    s, c = tv.summary(t), tv.compare([t])
    assert s.info["regions"] == c["compare"]["regions"].iloc[0] == 1
    assert s.info["per"] == c.info["per"] == tv.diff(t, t).info["per"] == "trace"
    assert "per trace" in c.title and any("whole trace counts as one step" in n for n in s.notes)


def test_every_shared_metric_is_defined_once_in_the_docs():
    """docs/metrics.md defines each metric the commands share, by the name the outputs use."""
    import re

    text = (Path(__file__).resolve().parents[1] / "docs" / "metrics.md").read_text()
    defined = re.findall(r"^\| `([a-z_]+)` \|", text, flags=re.M)
    assert len(defined) == len(set(defined)), "a metric is defined twice"
    r = tv.summary(SAMPLES / "naive.json.gz")

    shared = set(NUMERIC) | {
        "attention_backend",
        "gpu_activities",
        "gpu_time_ns",
        "left_out_gpu_activities",
        "linked_to_op_pct",
    }
    assert shared <= set(defined), shared - set(defined)
    assert shared <= set(r.info), shared - set(r.info)
