"""Incompleteness travels (issue 32 item 5): a trace that lost GPU work says so in ``Trace.warnings``
and in the output of every command, with where in the trace the loss lies; a complete one says
nothing of it. Figures recounted from the raw JSON with the standard library only."""

from __future__ import annotations

import gzip
import json
import re

import pytest
from click.testing import CliRunner
from corpus import CORPUS, SKIP_REASON

import traceview as tv
from traceview.cli import main

LLAMA = CORPUS / "tokenomics" / "llama_trace_4layers0_with_annotations.json.gz"  # complete, 156 launches
# a real incomplete trace: 64 of its 326 GPU activities have no launch in the file
DLRM1 = CORPUS / "param" / "dlrm_kineto__worker1_step_12.1694128201556.pt.trace.json.gz"
GPU_CATS = {"kernel", "gpu_memcpy", "gpu_memset"}
KERNEL_LAUNCH = re.compile(r"cudaLaunchKernel(ExC)?|cuLaunchKernel(Ex)?|cudaGraphLaunch")
MS = re.compile(r"([\d.]+) ms")

needs = pytest.mark.skipif(not LLAMA.exists(), reason=SKIP_REASON)


def _events(path) -> list[dict]:
    with gzip.open(path, "rt") as f:
        return json.load(f)["traceEvents"]


def _t0(events) -> float:
    """The trace's first duration event, us: where "into the trace" counts from."""
    return min(float(e["ts"]) for e in events if e.get("ph") == "X")


@pytest.fixture(scope="module")
def tail(tmp_path_factory):
    """The 4090 llama trace with every kernel record from 41% of them on (by start) dropped, as a
    profiler that stopped recording GPU activity leaves it: a real file, beside the test."""
    if not LLAMA.exists():
        pytest.skip(SKIP_REASON)
    with gzip.open(LLAMA, "rt") as f:
        doc = json.load(f)
    starts = sorted(float(e["ts"]) for e in doc["traceEvents"] if e.get("cat") == "kernel")
    cut = starts[int(0.41 * len(starts))]
    doc["traceEvents"] = [
        e for e in doc["traceEvents"] if not (e.get("cat") == "kernel" and float(e["ts"]) >= cut)
    ]
    path = tmp_path_factory.mktemp("tail") / "llama_tail.json.gz"
    with gzip.open(path, "wt") as f:
        json.dump(doc, f)
    return path


def _lost_launches(events) -> tuple[list[dict], list[dict]]:
    """Kernel launches with no kernel record of their correlation, and those with one."""
    corr = {e["args"].get("correlation") for e in events if e.get("cat") in GPU_CATS}
    launches = [
        e for e in events if e.get("cat") == "cuda_runtime" and KERNEL_LAUNCH.fullmatch(e.get("name", ""))
    ]
    lost = [e for e in launches if e["args"].get("correlation") not in corr]
    return lost, [e for e in launches if e not in lost]


@needs
def test_trace_warnings_say_how_much_was_lost_and_from_when(tail):
    events = _events(tail)
    lost, kept = _lost_launches(events)
    assert len(lost) > 80 and max(float(e["ts"]) for e in kept) < min(float(e["ts"]) for e in lost)
    t = tv.load(tail, cache=False)
    (w,) = [x for x in t.warnings if "incomplete" in x]
    assert t.warnings[0] == w  # first: it bears on every figure after it
    n = len(lost) + len(kept)
    assert w.startswith(f"llama_tail is incomplete: {len(lost)} of {n} kernel launches")
    got = re.search(r"every launch from ([\d.]+) ms into the trace on", w)
    assert got, w
    want_ms = (min(float(e["ts"]) for e in lost) - _t0(events)) / 1000.0
    assert float(got.group(1)) == pytest.approx(want_ms, abs=0.0006)


@needs
def test_a_real_corpus_trace_says_where_its_unlaunched_activities_lie():
    events = _events(DLRM1)
    calls = ("cuda_runtime", "cuda_driver")
    runtime = {e["args"].get("correlation") for e in events if e.get("cat") in calls}
    gpu = [e for e in events if e.get("ph") == "X" and e.get("cat") in GPU_CATS]
    orphans = [float(e["ts"]) for e in gpu if e["args"].get("correlation") not in runtime]
    launched = [float(e["ts"]) for e in gpu if e["args"].get("correlation") in runtime]
    t = tv.load(DLRM1)
    (w,) = [x for x in t.warnings if "incomplete" in x]
    assert f"{len(orphans)} of {len(gpu)} GPU activities" in w
    lo, hi = (float(x) for x in MS.findall(w.split("have no launch in the file")[1])[:2])
    t0 = _t0(events)
    assert lo == pytest.approx((min(orphans) - t0) / 1000, abs=0.0006)
    assert hi == pytest.approx((max(orphans) - t0) / 1000, abs=0.0006)
    early = sum(x < min(launched) for x in orphans)
    assert f"{early} before the first activity whose launch is in the file" in w


@needs
def test_a_complete_trace_has_no_completeness_warning():
    assert not [w for w in tv.load(LLAMA).warnings if "incomplete" in w]


COMMANDS = [
    ["summary"],
    ["kernels"],
    ["exposed"],
    ["memory"],
    ["timeline"],
    ["compare"],
    ["diff", "SELF"],
]


@needs
@pytest.mark.parametrize("args", COMMANDS, ids=lambda a: a[0])
def test_every_command_carries_the_warning_on_stdout(args, tail, tmp_path):
    """On the incomplete trace the output itself (not only stderr) says so, with where; on the
    complete one nothing does."""
    for path, incomplete in ((tail, True), (LLAMA, False)):
        argv = [args[0], str(path), *(str(path) if a == "SELF" else a for a in args[1:])]
        res = CliRunner().invoke(main, argv, env={"TRACEVIEW_CACHE_DIR": str(tmp_path), "COLUMNS": None})
        assert res.exit_code == 0, res.output
        said = "llama_tail is incomplete" in res.stdout and "every launch from" in res.stdout
        assert said == incomplete, res.stdout[-2000:]
        assert ("is incomplete" in res.stdout) == incomplete


@needs
def test_the_html_report_carries_the_warning(tail, tmp_path):
    pytest.importorskip("matplotlib")
    for path, incomplete in ((tail, True), (LLAMA, False)):
        out = tmp_path / f"{path.name}.html"
        res = CliRunner().invoke(
            main, ["report", str(path), "-o", str(out)], env={"TRACEVIEW_CACHE_DIR": str(tmp_path)}
        )
        assert res.exit_code == 0, res.output
        assert ("llama_tail is incomplete" in out.read_text()) == incomplete
