"""``traceview stacks`` / ``tv.stacks`` (issue 36): GPU time per place in the code.

Real data: the H100 BERT trace of the corpus (recorded with_stack=True; skipped visibly when the
corpus is absent) and the project's CPU samples. The GPU times are recounted from the plain JSON
through a link of their own (kernel -> runtime call by correlation -> the Python frame span
around that call on its thread), not through traceview's op links. The line of ``masked_fill``
is found by reading collectors/attention.py as text, not with ``ast``.
"""

from __future__ import annotations

import gzip
import json
import os
import re
from pathlib import Path

import jsonschema
import pytest
from click.testing import CliRunner
from corpus import CORPUS, SKIP_REASON

import traceview as tv
from traceview.analyses.measure.call_lines import FIRST_LINE, FROM_SOURCE, MAX_SOURCE_BYTES, CallLines
from traceview.cli import main

ROOT = Path(__file__).resolve().parents[1]
NAIVE = ROOT / "sample_traces" / "naive.json.gz"
BERT = CORPUS / "tracelens" / "h100__gaunernst_bert-small-uncased__1016001.json.gz"
needs_bert = pytest.mark.skipif(not BERT.is_file(), reason=SKIP_REASON)
GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")


def plain_events(path: Path) -> list[dict]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return json.load(f)["traceEvents"]


def recount_gpu_ns(events: list[dict], frame: str | None = None) -> int:
    """GPU time (ns) of the activities whose runtime launch lies inside a python_function span
    named ``frame`` on the launch's thread (all activities when None), from the plain JSON."""
    acts = [e for e in events if e.get("cat") in GPU_CATS and e.get("ph") == "X"]
    if frame is None:
        return round(sum(e["dur"] for e in acts) * 1000)
    launch = {e["args"]["correlation"]: e for e in events if e.get("cat") in ("cuda_runtime", "cuda_driver")}
    spans = [e for e in events if e.get("cat") == "python_function" and e["name"] == frame]
    total = 0.0
    for a in acts:
        r = launch.get(a["args"].get("correlation"))
        inside = r is not None and any(
            (s["pid"], s["tid"]) == (r["pid"], r["tid"]) and s["ts"] <= r["ts"] <= s["ts"] + s["dur"]
            for s in spans
        )
        total += a["dur"] if inside else 0.0
    return round(total * 1000)


def row(report, frame: str):
    t = report["stacks"]
    hit = t[t["frame"].str.strip() == frame]
    assert len(hit) == 1, (frame, hit)
    return hit.iloc[0]


@needs_bert
def test_root_and_an_inner_module_match_a_plain_json_recount():
    events = plain_events(BERT)
    frames = tv.stacks(BERT, cache=False)
    modules = tv.stacks(BERT, by="module", cache=False)
    assert int(row(frames, "(all)")["gpu_ns"]) == recount_gpu_ns(events) > 0
    for name in ("nn.Module: BertLayer_2", "nn.Module: BertOnlyMLMHead_0"):
        want = recount_gpu_ns(events, name)
        assert 0 < want < recount_gpu_ns(events)
        assert int(row(frames, name)["gpu_ns"]) == want
        assert int(row(modules, name.split(": ")[1])["gpu_ns"]) == want


@needs_bert
def test_the_tree_the_modules_and_the_lines_sum_to_summarys_gpu_time():
    total = tv.summary(BERT, cache=False).info["gpu_time_ns"]
    for by in ("frame", "module", "line"):
        r = tv.stacks(BERT, by=by, form="table", cache=False)
        t = r["stacks"]
        assert r.info["total_ns"] == total == int(t.loc[t["depth"] == 0, "gpu_ns"].iloc[0]), by
        assert int(t["self_gpu_ns"].sum()) == total, by  # every activity counted once, at its leaf
        kids = t.groupby("parent")["gpu_ns"].sum()
        own = t.set_index("node")
        inner = kids.index[kids.index >= 0]
        # a node's time is its own plus its children's
        assert (own.loc[inner, "gpu_ns"] == kids[inner] + own.loc[inner, "self_gpu_ns"]).all(), by


@needs_bert
def test_modules_give_five_rows_summing_to_the_root_and_fold_layers_adds_the_instances():
    t = tv.stacks(BERT, by="module", form="table", cache=False)["stacks"]
    encoder = t[t["path"] == "BertLMHeadModel_0.BertModel_0.BertEncoder_0"].iloc[0]
    layers = t[t["parent"] == encoder["node"]]
    assert len(layers) >= 4 and set(layers["module_type"]) == {"BertLayer"}
    assert int(layers["gpu_ns"].sum()) == int(encoder["gpu_ns"])  # the encoder launches nothing itself
    under_root = t[t["depth"] >= 1]
    assert len(under_root) >= 5
    folded = tv.stacks(BERT, by="module", fold_layers=True, form="table", cache=False)["stacks"]
    layer = folded[folded["path"] == "BertLMHeadModel.BertModel.BertEncoder.BertLayer"]
    assert int(layer["gpu_ns"].iloc[0]) == int(layers["gpu_ns"].sum())
    assert int(layer["kernels"].iloc[0]) == int(layers["kernels"].sum())


@needs_bert
def test_own_makes_library_lines_yours():
    report = tv.stacks(BERT, by="line", cache=False)
    default = report["stacks"]
    assert len(default) == 2  # the root and the one line outside transformers/ and torch/
    # the notes say which library folders held frames: where to look for an --own
    events = plain_events(BERT)
    in_transformers = {e["name"].split("(")[0] for e in events if e["name"].startswith("transformers/")}
    named = re.search(r"transformers/ \((\d+) files?\)", " ".join(report.notes))
    assert named and 1 <= int(named[1]) <= len(in_transformers), report.notes
    own = tv.stacks(BERT, by="line", own=("transformers/",), cache=False)
    lines = own["stacks"]["frame"].str.strip()
    assert lines.str.startswith("transformers/").sum() >= 3
    assert int(own["stacks"]["gpu_ns"].iloc[0]) == int(default["gpu_ns"].iloc[0])
    assert any("counted as yours: transformers/" in n and "transformers/ (" not in n for n in own.notes)


def masked_fill_line() -> int:
    """The line of ``scores.masked_fill(`` inside ``_naive`` of the collector, found as text."""
    lines = (ROOT / "collectors" / "attention.py").read_text(encoding="utf-8").splitlines()
    start = next(i for i, s in enumerate(lines) if s.startswith("def _naive("))
    return next(i + 1 for i, s in enumerate(lines) if i > start and ".masked_fill(" in s)


def test_the_masked_fill_copy_resolves_to_the_line_that_calls_it():
    r = tv.stacks(NAIVE, by="line", source_root=ROOT, cache=False)
    t = r["stacks"]
    line = masked_fill_line()
    hit = t[t["frame"].str.strip() == f"collectors/attention.py:{line} _naive"]
    assert len(hit) == 1 and hit["line_from"].iloc[0] == FROM_SOURCE
    assert "cpu_ns" in t.columns and "no GPU activity" in " ".join(r.notes)  # a CPU-only sample
    tree = tv.stacks(NAIVE, source_root=ROOT, cache=False)
    call = row(tree, "<built-in method masked_fill of Tensor object>")
    assert call["called_at"] == f"collectors/attention.py:{line}" and call["line_from"] == FROM_SOURCE
    # without the file (a root that lacks it) it is only the function's first line, and says so
    elsewhere = tv.stacks(NAIVE, by="line", source_root=ROOT / "tests", cache=False)["stacks"]
    first = elsewhere[elsewhere["frame"].str.contains("_naive")]
    assert set(first["line_from"]) == {FIRST_LINE} and len(first) == 1


def test_the_samples_cpu_tree_sums_to_the_ops_self_time():
    trace = tv.load(NAIVE, cache=False)
    t = tv.stacks(trace, form="table")["stacks"]
    assert int(t["cpu_ns"].iloc[0]) == int(trace.ops["self_ns"].clip(lower=0).sum())
    assert int(t["self_cpu_ns"].sum()) == int(t["cpu_ns"].iloc[0])


def test_depth_and_min_pct_limit_the_rows_and_say_so():
    whole = tv.stacks(NAIVE, form="table", cache=False)
    cut = tv.stacks(NAIVE, depth=3, min_pct=10, form="table", cache=False)
    t = cut["stacks"]
    assert t["depth"].max() <= 3 and (t["pct"] >= 10).all()
    left = len(whole["stacks"]) - len(t)
    assert left > 0 and any(f"{left} smaller or deeper nodes" in n for n in cut.notes)


def test_call_lines_reads_only_regular_py_files_under_the_root(tmp_path):
    root = tmp_path / "root"
    (root / "pkg").mkdir(parents=True)
    code = "def f(x):\n    y = 1\n    return x.masked_fill(y)\n"
    (root / "pkg" / "m.py").write_text(code)
    (tmp_path / "outside.py").write_text(code)
    os.symlink(tmp_path / "outside.py", root / "link.py")
    (root / "big.py").write_text(code + "#" * MAX_SOURCE_BYTES)
    lines = CallLines(root)
    assert lines.resolve("pkg/m.py", 1, "f", "masked_fill") == (3, FROM_SOURCE)
    assert lines.resolve(str(root / "pkg" / "m.py"), 1, "f", "masked_fill") == (3, FROM_SOURCE)
    for name in ("../outside.py", str(tmp_path / "outside.py"), "link.py", "big.py", "pkg", "pkg/m.py\0"):
        assert lines.resolve(name, 1, "f", "masked_fill") == (1, FIRST_LINE), name
    assert lines.resolve("pkg/m.py", 2, "f", "masked_fill") == (2, FIRST_LINE)  # no function starts there
    assert lines.resolve("pkg/m.py", 1, "f", "softmax") == (1, FIRST_LINE)  # no such call


def parse_folded(text: str) -> list[tuple[list[str], int]]:
    out = []
    for line in text.splitlines():
        stack, weight = line.rsplit(" ", 1)
        out.append((stack.split(";"), int(weight)))
    return out


#: speedscope's file format (src/lib/file-format-spec.ts, the source of its published
#: file-format-schema.json), the parts a sampled profile uses, written out as a JSON schema
SPEEDSCOPE = {
    "type": "object",
    "required": ["$schema", "shared", "profiles"],
    "properties": {
        "$schema": {"const": "https://www.speedscope.app/file-format-schema.json"},
        "shared": {
            "type": "object",
            "required": ["frames"],
            "properties": {
                "frames": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "required": ["name"],
                        "properties": {
                            "name": {"type": "string"},
                            "file": {"type": "string"},
                            "line": {"type": "number"},
                            "col": {"type": "number"},
                        },
                        "additionalProperties": False,
                    },
                }
            },
        },
        "profiles": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["type", "name", "unit", "startValue", "endValue", "samples", "weights"],
                "properties": {
                    "type": {"const": "sampled"},
                    "name": {"type": "string"},
                    "unit": {
                        "enum": ["none", "nanoseconds", "microseconds", "milliseconds", "seconds", "bytes"]
                    },
                    "startValue": {"type": "number"},
                    "endValue": {"type": "number"},
                    "samples": {"type": "array", "items": {"type": "array", "items": {"type": "integer"}}},
                    "weights": {"type": "array", "items": {"type": "number"}},
                },
                "additionalProperties": False,
            },
        },
        "name": {"type": "string"},
        "activeProfileIndex": {"type": "number"},
        "exporter": {"type": "string"},
    },
    "additionalProperties": False,
}


@pytest.mark.parametrize("trace", [NAIVE, pytest.param(BERT, marks=needs_bert)], ids=["naive", "bert"])
def test_folded_and_speedscope_exports_sum_to_the_time(trace, tmp_path):
    total = tv.stacks(trace, cache=False).info["total_ns"]
    run = CliRunner().invoke(main, ["stacks", str(trace), "--format", "folded", "--no-cache"])
    assert run.exit_code == 0, run.output
    stacks = parse_folded(run.output)
    assert sum(w for _, w in stacks) == total > 0
    assert all(s and all(s) for s, _ in stacks)
    out = tmp_path / "t.speedscope.json"
    run = CliRunner().invoke(main, ["stacks", str(trace), "-o", str(out), "--no-cache"])
    assert run.exit_code == 0, run.output
    doc = json.loads(out.read_text())
    jsonschema.validate(doc, SPEEDSCOPE)
    p = doc["profiles"][0]
    assert sum(p["weights"]) == p["endValue"] == total and len(p["samples"]) == len(p["weights"])
    names = [f["name"] for f in doc["shared"]["frames"]]
    assert all(0 <= i < len(names) for s in p["samples"] for i in s)
    # the same stacks as the folded file, frame by frame (speedscope names a file frame func (file:line))
    assert sorted(len(s) for s in p["samples"]) == sorted(len(s) for s, _ in stacks)


def test_a_cut_tree_is_no_flame_graph_and_a_wrong_name_is_refused(tmp_path):
    for args in (
        ["--depth", "2", "--format", "folded"],
        ["-o", str(tmp_path / "x.json"), "--format", "folded"],
        ["-o", str(tmp_path / "x.folded"), "--format", "json"],
    ):
        run = CliRunner().invoke(main, ["stacks", str(NAIVE), *args, "--no-cache"])
        assert run.exit_code == 2, run.output
    assert not list(tmp_path.iterdir())
    out = tmp_path / "x.folded"
    run = CliRunner().invoke(main, ["stacks", str(NAIVE), "-o", str(out), "--no-cache"])
    assert run.exit_code == 0 and sum(w for _, w in parse_folded(out.read_text())) > 0, run.output


QWEN = CORPUS / "rocm" / "tracelens__sglang_Qwen3-8B_decode.json.gz"


@pytest.mark.skipif(not QWEN.is_file(), reason=SKIP_REASON)
def test_graph_replays_go_to_the_frame_that_called_replay():
    """The replayed kernels' launch (hipGraphLaunch) is inside no op: they go to the Python frame
    around the launch, marked as a replay, not to the node of activities without an op."""
    events = plain_events(QWEN)
    graph = {
        e["args"]["correlation"] for e in events if e.get("name") in ("hipGraphLaunch", "cudaGraphLaunch")
    }
    acts = [e for e in events if e.get("cat") in GPU_CATS and e["args"].get("correlation") in graph]
    t = tv.stacks(QWEN, form="table", cache=False)["stacks"]
    replay = t[t["frame"] == "hipGraphLaunch (graph replay)"]
    assert len(replay) == 1 and int(replay["activities"].iloc[0]) == len(acts) > 500
    assert int(replay["gpu_ns"].iloc[0]) == round(sum(e["dur"] for e in acts) * 1000)
    caller = t[t["node"] == replay["parent"].iloc[0]]["frame"].iloc[0]
    assert caller == "torch/cuda/graphs.py(139): replay"
    no_op = t[t["frame"] == "(no CPU op)"]
    assert int(no_op["gpu_ns"].sum()) < int(replay["gpu_ns"].iloc[0]) / 50


@needs_bert
def test_a_selection_narrows_every_view_to_summarys_time_for_it():
    whole = tv.summary(BERT, cache=False).info["gpu_time_ns"]
    want = tv.summary(BERT, kind="kernel", cache=False).info["gpu_time_ns"]
    assert 0 < want < whole  # the trace's one memcpy is left out
    kernels = sum(e.get("cat") == "kernel" for e in plain_events(BERT))
    for by in ("frame", "module", "line"):
        r = tv.stacks(BERT, by=by, kind="kernel", form="table", cache=False)
        assert r.info["total_ns"] == want == int(r["stacks"]["self_gpu_ns"].sum()), by
        assert int(r["stacks"]["activities"].iloc[0]) == int(r["stacks"]["kernels"].iloc[0]) == kernels, by


def _thread(tid: int, names: list[str]) -> list[dict]:
    """python_function frames each inside the one before (the first outermost) on thread
    ``tid``, and one op of 5 us inside the innermost."""
    frames = [
        {"ph": "X", "pid": 1, "tid": tid, "cat": "python_function", "name": n, "ts": 10 * i}
        | {"dur": 100 - 20 * i, "args": {"Python id": 10 * tid + i + 1, "Python parent id": 10 * tid + i}}
        for i, n in enumerate(names)
    ]
    op = {"ph": "X", "pid": 1, "tid": tid, "cat": "cpu_op", "name": "aten::x"}
    return [*frames, op | {"ts": 10 * len(names) - 9, "dur": 5}]


def test_hostile_frame_text_is_shown_safely_in_every_output(tmp_path):
    """Frame names are trace text: a line break, a terminal escape, a 5,000-digit line number and
    a path out of the source root must neither break a format nor crash (exit 3) nor be read."""
    code = "def f():\n    x.masked_fill()\n"
    root = tmp_path / "root"
    root.mkdir()
    (tmp_path / "secret.py").write_text(code)
    (root / "inside.py").write_text(code)
    call = "<built-in method masked_fill of Tensor object at 0x7f00>"
    hostile = ["evil\nname\x1b[31m.py(7): g", "m.py(" + "9" * 5000 + "): h"]
    events = _thread(1, ["../secret.py(1): f", call, *hostile]) + _thread(2, ["inside.py(1): f", call])
    trace = root / "hostile.json"
    trace.write_text(json.dumps({"traceEvents": events}))
    base = ["stacks", str(trace), "--no-cache", "--source-root", str(root)]
    for args in (["--format", "json"], ["--format", "csv"], ["--by", "line"], ["--form", "table"]):
        run = CliRunner().invoke(main, [*base, *args])
        assert run.exit_code == 0 and "\x1b" not in run.output, (args, run.output)
    run = CliRunner().invoke(main, [*base, "--format", "folded"])
    assert run.exit_code == 0, run.output
    stacks = parse_folded(run.output)
    assert sorted(len(s) for s, _ in stacks) == [2, 4] and {w for _, w in stacks} == {5000}
    called = tv.stacks(str(trace), source_root=root, cache=False)["stacks"]["called_at"].tolist()
    assert "inside.py:2" in called  # read: under the root
    assert "../secret.py:1" in called and "../secret.py:2" not in called  # outside it: not read
    run = CliRunner().invoke(main, [*base, "--format", "speedscope"])
    assert run.exit_code == 0 and "\x1b" not in run.output
    jsonschema.validate(json.loads(run.stdout), SPEEDSCOPE)


#: corpus traces recorded with stacks (python_function frames), of up to a few MB
WITH_STACKS = [
    "kineto/tb_plugin_samples__resnet50_num_workers_0__worker0.1623143089861.pt.trace.json.gz",
    "rocm/tracelens__mi300__gaunernst_bert-small-uncased__1016001.json.gz",
    "switchtransformers/trace.json.gz",
    "tracelens/b200__eager_trace.json.gz",
    "tracelens/h100__Falconsai_nsfw_image_detection__1016002.json.gz",
]


@pytest.mark.parametrize("name", WITH_STACKS, ids=lambda n: n.split("/")[0])
def test_every_view_and_the_folded_export_sum_to_summarys_gpu_time(name):
    path = CORPUS / name
    if not path.is_file():
        pytest.skip(SKIP_REASON)
    trace = tv.load(path, cache=False)
    gpu = tv.summary(trace).info["gpu_time_ns"]
    assert gpu > 0
    for by in ("frame", "module", "line"):
        r = tv.stacks(trace, by=by, form="table")
        assert r.info["total_ns"] == int(r["stacks"]["self_gpu_ns"].sum()) == gpu, by
    run = CliRunner().invoke(main, ["stacks", str(path), "--format", "folded", "--no-cache"])
    assert run.exit_code == 0 and sum(w for _, w in parse_folded(run.output)) == gpu


#: speedscope's published schema (``dist/release/file-format-schema.json`` of its npm package,
#: ``npm pack speedscope``), when the environment names a copy: not ours to ship in the project
PUBLISHED = os.environ.get("SPEEDSCOPE_SCHEMA")


@pytest.mark.skipif(not PUBLISHED, reason="set SPEEDSCOPE_SCHEMA to speedscope's file-format-schema.json")
@pytest.mark.parametrize("trace", [NAIVE, pytest.param(BERT, marks=needs_bert)], ids=["naive", "bert"])
def test_speedscope_export_validates_against_the_published_schema(trace):
    schema = json.loads(Path(str(PUBLISHED)).read_text(encoding="utf-8"))
    run = CliRunner().invoke(main, ["stacks", str(trace), "--format", "speedscope", "--no-cache"])
    assert run.exit_code == 0, run.output
    doc = json.loads(run.stdout)
    jsonschema.validate(doc, schema)
    broken = {**doc, "profiles": [{k: v for k, v in doc["profiles"][0].items() if k != "weights"}]}
    with pytest.raises(jsonschema.ValidationError):  # the schema can fail: a sampled profile needs weights
        jsonschema.validate(broken, schema)
