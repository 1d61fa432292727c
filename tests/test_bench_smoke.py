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
