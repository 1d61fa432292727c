"""Launches are launches (issue 32 item 4): the host's kernel-launch calls a diff states are the
runtime's launch events, recorded kernel or not, recounted here from plain json on every corpus
trace; and a diff of a trace that lost its kernel records says how many launches have none."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import pytest
from corpus import CORPUS, SKIP_REASON

import traceview as tv
from traceview.analyses.select.region import region
from traceview.analyses.variants.host_launches import host_launches

TRACES = sorted(CORPUS.rglob("*.json.gz")) if CORPUS.is_dir() else []
# written here, not read from rules/completeness.toml: an independent list of the launch calls
LAUNCH = re.compile(
    r"(cuda|hip)(Ext)?(Module)?LaunchKernel(ExC)?(_v\d+)?|cuLaunchKernel(Ex)?|(cuda|cu|hip)GraphLaunch(_v\d+)?"
    r"|cudaLaunchCooperativeKernel(MultiDevice)?(_v\d+)?|cuLaunchCooperativeKernel"
)
GPU = {"kernel", "gpu_memcpy", "gpu_memset", "memcpy", "memset"}
STEP = re.compile(r"ProfilerStep#\d+")
needs = pytest.mark.skipif(not CORPUS.is_dir(), reason=SKIP_REASON)


def plain(path: Path) -> tuple[float, float]:
    """(launch calls, of them with no GPU activity of their correlation) per step, from the JSON."""
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        doc = json.load(fh)
    events = [e for e in (doc["traceEvents"] if isinstance(doc, dict) else doc) if isinstance(e, dict)]
    xs = [e for e in events if e.get("ph") == "X"]
    cat = [str(e.get("cat", "")).lower() for e in xs]
    steps = [
        (float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0)))
        for e, c in zip(xs, cat, strict=True)
        if c in ("user_annotation", "cpu_op", "operator") and STEP.fullmatch(str(e.get("name")))
    ]
    runtime = [
        e
        for e, c in zip(xs, cat, strict=True)
        if c in ("cuda_runtime", "runtime", "cuda_driver") and LAUNCH.fullmatch(str(e.get("name")))
    ]
    corr = lambda e: (e.get("args") or {}).get("correlation")  # noqa: E731
    by_runtime = {corr(e) for e in runtime if str(e.get("cat")).lower() != "cuda_driver"}
    calls = [
        e
        for e in runtime
        if not (
            str(e.get("cat")).lower() == "cuda_driver" and corr(e) in by_runtime
        )  # one launch, two events
        and (not steps or any(a <= float(e["ts"]) <= b for a, b in steps))
    ]
    ran = {corr(e) for e, c in zip(xs, cat, strict=True) if c in GPU}
    n = max(len(steps), 1)
    return len(calls) / n, sum(1 for e in calls if corr(e) not in ran) / n


@needs
@pytest.mark.parametrize("path", TRACES, ids=lambda p: p.name[:40])
def test_host_launch_calls_are_the_runtime_launch_events(path):
    h = host_launches(region(tv.load(path)))
    launches, without = plain(path)
    assert float(h["launches"]) == pytest.approx(launches)
    assert float(h["without_gpu"]) == pytest.approx(without)


@needs
def test_a_trace_that_lost_kernels_says_how_many_launches_have_none(tmp_path):
    """The llama trace with the second half of its kernel records cut: the host's calls stay, and
    the diff says how many of them have no GPU activity (it read only the launches that survived)."""
    src = CORPUS / "tokenomics/llama_trace_4layers0_with_annotations.json.gz"
    with gzip.open(src, "rt", encoding="utf-8") as fh:
        doc = json.load(fh)
    kernels = [e for e in doc["traceEvents"] if e.get("cat") == "kernel"]
    cut = {id(e) for e in kernels[len(kernels) // 2 :]}
    doc["traceEvents"] = [e for e in doc["traceEvents"] if id(e) not in cut]
    lossy = tmp_path / "lossy.json.gz"
    with gzip.open(lossy, "wt", encoding="utf-8") as fh:
        json.dump(doc, fh)
    launches, without = plain(lossy)
    assert without >= len(cut) > 0
    r = tv.diff(tv.load(src), tv.load(lossy))
    row = r["host_launches"].set_index("side").loc["B"]
    assert row["launch_calls"] == launches and row["without_gpu"] == without
    assert row["with_kernels_recorded"] < row["launch_calls"]
    said = next(f for f in r.findings if f.startswith("host side: B's host makes"))
    assert f"{int(without):,} of them with no GPU activity in the file" in said, said
