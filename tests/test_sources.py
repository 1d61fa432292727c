"""Source lines (issue 19 part 2): each kernel's line of the user's code, against a recount that
shares no code with traceview (plain json: the launch by correlation, the enclosing op and Python
frame by a scan of the spans, the callers by walking ``Python parent id`` by hand), on corpus
traces with python_function events; the older ``Call stack`` arg, --library and a trace without
stacks on small written traces; the CLI against the API."""

from __future__ import annotations

import gzip
import json
import re
from collections import defaultdict
from decimal import Decimal
from pathlib import Path

import pandas as pd
import pytest
import tomllib
from click.testing import CliRunner
from corpus import CORPUS, SKIP_REASON
from synth import write

import traceview as tv
from traceview.analyses.wording.words import reads
from traceview.cli import main

STACK_TRACES = [  # small corpus traces with python_function events (every one is recounted the same way)
    "torch_profiling_tutorial/log_transformer__dc3b0e7228dd_851.1752215573993169006.pt.trace.json.gz",
    "switchtransformers/trace.json.gz",
    "tracelens/h100__gaunernst_bert-small-uncased__1016001.json.gz",
    "rocm/tracelens__mi300__gaunernst_bert-small-uncased__1016001.json.gz",
]
FRAME = re.compile(r"^(.+)\((\d+)\): (.*)$")
RULES = tomllib.loads((Path(__file__).parents[1] / "traceview" / "rules" / "sources.toml").read_text())
GPU_CATS = {"kernel": "kernels", "gpu_memcpy": "memcpys", "gpu_memset": "memsets"}


def _params():
    if not CORPUS.is_dir():
        return [pytest.param(None, marks=pytest.mark.skip(reason=SKIP_REASON))]
    return [pytest.param(CORPUS / f, id=f.split("/")[0] + "/" + f.split("/")[1][:40]) for f in STACK_TRACES]


def _library(path: str) -> bool:
    """rules/sources.toml's test, written out again: a folder after the start or a '/', a file."""
    return (
        any(path.startswith(m) for m in RULES["markers"])
        or any(("/" + path).find("/" + f) >= 0 for f in RULES["folders"])
        or any(path == f or path.endswith("/" + f) for f in RULES["files"])
    )


def _ns(x) -> int:
    return round(float(x) * 1000)


def _innermost(spans: list, t: int):
    """The span (start, end, event) holding t that started last (ties: the later in the file)."""
    best = None
    for s in spans:
        if s[0] <= t <= s[1] and (best is None or (s[0], s[3]) > (best[0], best[3])):
            best = s
    return best


def recount(path) -> dict:
    """(source line, what it called) -> [GPU ns, activities], by hand from the JSON."""
    with gzip.open(path, "rt") as f:
        events = json.load(f)["traceEvents"]
    ops, frames, by_id = defaultdict(list), defaultdict(list), {}
    launches = {}
    for i, e in enumerate(events):
        if e.get("ph") != "X":
            continue
        key = (e.get("pid"), e.get("tid"))
        span = (_ns(e["ts"]), _ns(e["ts"]) + _ns(e.get("dur", 0)), e, i)
        if e.get("cat") == "cpu_op":
            ops[key].append(span)
        elif e.get("cat") == "python_function":
            frames[key].append(span)
            by_id[(e.get("pid"), e["args"].get("Python id"))] = e
        elif e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {}):
            launches.setdefault(e["args"]["correlation"], span)
    out = defaultdict(lambda: [0, 0])
    for e in events:
        if e.get("ph") != "X" or e.get("cat") not in GPU_CATS:
            continue
        line = ("(no source line)", "")
        launch = launches.get(e.get("args", {}).get("correlation"))
        if launch is not None:
            key = (launch[2].get("pid"), launch[2].get("tid"))
            op = _innermost(ops[key], launch[0])
            frame = _innermost(frames[key], op[0]) if op else None
            frame, below = (frame[2] if frame else None), None
            while frame is not None:  # up the callers by Python parent id
                m = FRAME.match(frame["name"])
                if m and not _library(m[1]):
                    line = (f"{m[1]}:{m[2]} {m[3]}", _called(below))
                    break
                frame, below = by_id.get((frame.get("pid"), frame["args"].get("Python parent id"))), frame
        out[line][0] += _ns(e.get("dur", 0))
        out[line][1] += 1
    return dict(out)


def _called(frame) -> str:
    """The callee's name as written in its frame: a file frame's function, a built-in's name."""
    if frame is None:
        return ""
    name = frame["name"]
    m = FRAME.match(name) or re.match(r"^<built-in (?:method|function) ([^ >]+)", name)
    return m.groups()[-1] if m else re.sub(r"_[0-9]+$", "", name)


@pytest.mark.parametrize("path", _params())
def test_kernel_source_lines_equal_a_recount_by_parent_id(path):
    got = tv.kernels(path, by="source", cache=False).tables["sources"]
    mine = {
        (r.source, r.call): [r.gpu_ns, r.kernels + r.memcpys + r.memsets]
        for r in got.itertuples()
        if r.kernels + r.memcpys + r.memsets
    }
    want = recount(path)
    assert mine == want
    assert len(want) > 1 or ("(no source line)", "") not in want  # real lines, not all unattributed


def _trace(tmp_path, stack_of_parent: str, name="t.json") -> str:
    """One op with a Call stack whose child op launches a kernel (the child has no stack of its own)."""
    ev = [
        {"ph": "X", "cat": "cpu_op", "name": "aten::masked_fill", "pid": 1, "tid": 1, "ts": 100, "dur": 50,
         "args": {"External id": 1, "Call stack": stack_of_parent}},
        {"ph": "X", "cat": "cpu_op", "name": "aten::copy_", "pid": 1, "tid": 1, "ts": 110, "dur": 20,
         "args": {"External id": 2, "Call stack": ""}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaMemcpyAsync", "pid": 1, "tid": 1, "ts": 115, "dur": 5,
         "args": {"correlation": 7, "External id": 2}},
        {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy DtoD (Device -> Device)", "pid": 0, "tid": 7,
         "ts": 130, "dur": 9, "args": {"correlation": 7, "device": 0, "stream": 7, "bytes": 64}},
    ]  # fmt: skip
    return write(tmp_path / name, {"traceEvents": ev})


STACK = (
    "/env/lib/python3.10/site-packages/torch/nn/functional.py(5): softmax;"
    "helpers.py(9): mask;attention.py(42): forward;train.py(3): <module>"
)


def test_call_stack_arg_inner_op_inherits_and_library_frames_are_skipped(tmp_path):
    path = _trace(tmp_path, STACK)
    rows = tv.kernels(path, by="source", cache=False).tables["sources"]
    assert rows.to_dict("records")[0] | {"gpu_pct": 100.0} == {
        "source": "helpers.py:9 mask", "call": "softmax", "gpu_ns": 9000, "gpu_pct": 100.0, "kernels": 0,
        "memcpys": 1, "memsets": 0, "flops": 0, "alloc_bytes": 0, "allocs": 0,
    }  # fmt: skip
    moved = tv.kernels(path, by="source", library=("helpers.py",), cache=False).tables["sources"]
    assert moved["source"].tolist() == ["attention.py:42 forward"]


def test_cli_by_source_is_the_api_and_no_stacks_says_so_once(tmp_path):
    path = _trace(tmp_path, STACK)
    run = CliRunner().invoke(
        main, ["kernels", "--by", "source", "--library", "helpers.py", "--format", "json", path],
        env={"TRACEVIEW_CACHE_DIR": str(tmp_path / "c")},
    )  # fmt: skip
    assert run.exit_code == 0, run.output
    doc = json.loads(run.stdout)
    api = tv.kernels(path, by="source", library=("helpers.py",), cache=False)
    assert doc["tables"]["sources"] == json.loads(json.dumps(api.to_dict()))["tables"]["sources"]
    bare = _trace(tmp_path, "", "bare.json")
    run = CliRunner().invoke(
        main, ["kernels", "--by", "source", bare], env={"TRACEVIEW_CACHE_DIR": str(tmp_path)}
    )
    assert run.exit_code == 0 and run.output.count("records no Python stacks") == 1, run.output
    assert "(no source line)" in run.output
    run = CliRunner().invoke(main, ["kernels", "--library", "x/", bare])
    assert run.exit_code == 2 and "--library applies to --by source" in run.output


SAMPLES = Path(__file__).parents[1] / "sample_traces"


def _masked_fill_allocations(path) -> tuple[int, int]:
    """Plain json: bytes of the [memory] allocations inside aten::masked_fill spans (same thread),
    and the number of ProfilerStep spans."""
    with gzip.open(path, "rt") as f:
        events = json.load(f)["traceEvents"]
    spans = [
        (e["tid"], Decimal(str(e["ts"])), Decimal(str(e["ts"])) + Decimal(str(e["dur"])))
        for e in events
        if e.get("ph") == "X" and e.get("name") == "aten::masked_fill"
    ]
    steps = sum(1 for e in events if e.get("ph") == "X" and str(e.get("name")).startswith("ProfilerStep#"))
    total = 0
    for e in events:
        if e.get("name") == "[memory]" and e["args"]["Bytes"] > 0:
            t = Decimal(str(e["ts"]))
            total += e["args"]["Bytes"] * any(tid == e["tid"] and a <= t <= b for tid, a, b in spans)
    return total, steps


def test_sample_diff_names_the_copying_line_and_its_bytes():
    """The done-when: diff naive naive_inplace names the line of collectors/attention.py whose
    masked_fill made the copy, and the bytes it allocated per step (recounted from the JSON)."""
    naive, inplace = SAMPLES / "naive.json.gz", SAMPLES / "naive_inplace.json.gz"
    report = tv.diff(naive, inplace, cache=False)
    total, steps = _masked_fill_allocations(naive)
    rows = report.tables["copy_sources"]
    assert rows[["side", "source", "call"]].values.tolist() == [
        ["A", "collectors/attention.py:113 _naive", "masked_fill"]
    ]  # the line of the call, read from the file (torch records the def line, 106; issue 36)
    assert rows["line_from"].tolist() == ["source"]
    assert rows["alloc_bytes_per_step"].tolist() == [total / steps] and total / steps == 64 * 64 * 2 * 4
    words = [str(f) for f in report.findings]
    assert (
        "the copy in A (aten::masked_fill → aten::clone) comes from collectors/attention.py:113 _naive "
        "(its call to masked_fill): 32.0 KiB allocated by the copy per step"
    ) in words
    (finding,) = [f for f in report.findings if str(f).startswith("the copy in A")]
    for e in finding.evidence:  # every figure it states is the cell it cites, as words.reads writes it
        table = report.tables[e["table"]]
        row = table[(table[list(e["row"])] == pd.Series(e["row"])).all(axis=1)]
        assert len(row) == 1 and reads(row[e["column"]].iloc[0], e["reads"]) in str(finding)
    src = (Path(__file__).parents[1] / "collectors" / "attention.py").read_text().splitlines()
    assert src[105].lstrip().startswith("def _naive(") and ".masked_fill(" in src[112]


@pytest.mark.parametrize("path", _params()[1:2])  # switchtransformers: kernels, memcpys and memsets
def test_annotate_writes_each_activity_source_as_kernels_by_source_counts_it(path, tmp_path):
    out = tmp_path / "annotated.json.gz"
    run = CliRunner().invoke(
        main, ["annotate", str(path), "-o", str(out)], env={"TRACEVIEW_CACHE_DIR": str(tmp_path / "c")}
    )
    assert run.exit_code == 0, run.output
    with gzip.open(out, "rt") as f:
        events = json.load(f)["traceEvents"]
    per = defaultdict(int)
    for e in events:
        if e.get("ph") == "X" and e.get("cat") in GPU_CATS:
            per[e["args"].get("traceview.source", "(no source line)")] += 1
    table = tv.kernels(path, by="source", cache=False).tables["sources"]
    table = table.assign(n=table["kernels"] + table["memcpys"] + table["memsets"])
    assert dict(per) == {k: v for k, v in table.groupby("source")["n"].sum().items() if v}
