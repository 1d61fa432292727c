"""CI smoke run of the load benchmark at a tiny size (the real sizes run by hand)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from corpus import corpus_files

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"
SMALL = [f for f in corpus_files() if f.name.startswith("ns_resolution")]


@pytest.mark.skipif(not SMALL, reason="corpus not found")
def test_make_large_trace_and_quick_bench(tmp_path):
    src = SMALL[0]
    out = tmp_path / "tiled.json"
    made = subprocess.run(
        [sys.executable, str(BENCH / "make_large_trace.py"), str(src), str(out), "--copies", "3"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert made.returncode == 0, made.stderr
    doc = json.loads(out.read_text())
    import traceview as tv

    one, three = tv.load(src, cache=False), tv.load(out, cache=False)
    assert len(three.kernels) == 3 * len(one.kernels)
    assert three.stats["linked_to_launch"] == pytest.approx(one.stats["linked_to_launch"])
    assert len(doc["traceEvents"]) > 0

    bench = subprocess.run(
        [
            sys.executable,
            str(BENCH / "bench_load.py"),
            "--quick",
            "--src",
            str(src),
            "--tools",
            "traceview,json.load",
            "--workdir",
            str(tmp_path / "work"),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert bench.returncode == 0, bench.stderr
    rows = [line for line in bench.stdout.splitlines() if line.startswith("|")]
    assert any("| traceview" in line for line in rows), bench.stdout
    assert any("cached reload" in line for line in rows), bench.stdout


@pytest.mark.skipif(not SMALL, reason="corpus not found")
def test_quick_bench_times_whole_processes_for_both_decoders(tmp_path):
    """Issue 23: each tool is a whole process timed by the parent (so at least its load call),
    traceview runs once per decoder and says which ran, and TraceLens without its python is
    skipped visibly, not silently."""
    bench = subprocess.run(
        [
            sys.executable,
            str(BENCH / "bench_load.py"),
            "--quick",
            "--no-cache-bench",
            "--src",
            str(SMALL[0]),
            "--tools",
            "traceview,traceview-python,tracelens",
            "--workdir",
            str(tmp_path / "work"),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert bench.returncode == 0, bench.stdout + bench.stderr
    assert "tracelens: SKIPPED (no --tracelens-python given" in bench.stdout
    assert "traceview-python: decoder python" in bench.stdout, bench.stdout
    rows = [
        [c.strip() for c in line.strip("|").split("|")]
        for line in bench.stdout.splitlines()
        if line.startswith("|")
    ]
    head, body = rows[0], [r for r in rows[2:] if len(r) == len(rows[0])]
    assert head[:4] == ["size", "tool", "process (s)", "load call (s)"]
    assert sorted(r[1] for r in body) == ["traceview", "traceview-python"]
    for r in body:
        assert float(r[2]) > float(r[3]) > 0, r  # the process holds imports and exit besides the load
    assert next(r for r in body if r[1] == "traceview")[5] == "1.0x"


def test_bench_rejects_unknown_tool(tmp_path):
    bench = subprocess.run(
        [sys.executable, str(BENCH / "bench_load.py"), "--quick", "--tools", "traceview,nosuch"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bench.returncode == 1
    assert "unknown tool(s) nosuch" in bench.stderr
