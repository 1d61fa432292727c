"""The parallel chunk decode (traceview/read/parallel.py) gives exactly the serial result.

Small inputs are forced onto the parallel path: a tiny chunk size, no size
threshold and TRACEVIEW_WORKERS=2; the serial reference runs with TRACEVIEW_WORKERS=1.
"""

from __future__ import annotations

import json
import multiprocessing
import os

import pandas as pd
import pytest
from corpus import CORPUS

import traceview as tv
from traceview.read import chunks, parallel
from traceview.read.columns import RefusedChunk

pytestmark = pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(), reason="needs fork")

CONTROL = CORPUS / "hta" / "trace_diff__control__control.json.gz"


@pytest.fixture(autouse=True)
def msgspec_decoder(monkeypatch):
    """The fork path belongs to the msgspec decoder: the compiled one (threads) is tested in
    test_compiled_decoder.py."""
    monkeypatch.setenv("TRACEVIEW_DECODER", "python")


@pytest.fixture
def forced(monkeypatch):
    """Parallel path on for small texts; records what each parallel attempt returned."""
    monkeypatch.setattr(parallel, "MIN_BYTES", 0)
    seen = []
    real = parallel.event_columns

    def spy(events_raw, path):
        try:
            got = real(events_raw, path)
        except RefusedChunk:
            seen.append("recheck")
            raise
        seen.append("none" if got is None else "parallel")
        return got

    monkeypatch.setattr(parallel, "event_columns", spy)
    return seen


def _load(path, workers: int):
    old = os.environ.get("TRACEVIEW_WORKERS")
    os.environ["TRACEVIEW_WORKERS"] = str(workers)
    try:
        return tv.load(path, cache=False)
    finally:
        if old is None:
            del os.environ["TRACEVIEW_WORKERS"]
        else:
            os.environ["TRACEVIEW_WORKERS"] = old


def assert_same(a, b):
    for name in ("events", "kernels", "ops", "steps"):
        pd.testing.assert_frame_equal(getattr(a, name), getattr(b, name), check_exact=True)
    assert a.meta == b.meta
    assert a.warnings == b.warnings
    assert a.stats == b.stats


def _write(tmp_path, events, name="t.json", top=True):
    path = tmp_path / name
    doc = {"schemaVersion": 1, "traceEvents": events, "displayTimeUnit": "ms"} if top else events
    path.write_text(json.dumps(doc))
    return str(path)


def _events(n, *, junk=False, tricky_names=False, big_floats=False):
    """X events (CPU ops, runtime launches, kernels) linked by flows, over many pids/tids."""
    out = []
    base = 1.7e15 + 0.125 if big_floats else 1000
    for i in range(n):
        ts = base + i * 10
        name = f"aten::op{i % 37}" + ("x" * 3000 + '"},{"x' if tricky_names and i % 5 == 2 else "")
        out.append(
            {
                "ph": "X",
                "cat": "cpu_op",
                "name": name,
                "pid": 1 + i % 3,
                "tid": 10 + i % 5,
                "ts": ts,
                "dur": 8,
                "args": {"External id": i, "Input Dims": [[i % 4, 3]]},
            }
        )
        out.append(
            {
                "ph": "X",
                "cat": "cuda_runtime",
                "name": "cudaLaunchKernel",
                "pid": 1,
                "tid": 10,
                "ts": ts + 1,
                "dur": 2,
                "args": {"correlation": i, "External id": i},
            }
        )
        out.append(
            {
                "ph": "X",
                "cat": "kernel",
                "name": f"kernel_{i % 11}",
                "pid": 0,
                "tid": f"stream {7 + i % 2}",
                "ts": ts + 3,
                "dur": 4.5,
                "args": {"correlation": i, "device": 0, "stream": 7 + i % 2, "External id": i},
            }
        )
        out.append({"ph": "s", "cat": "ac2g", "id": i, "pid": 1, "tid": 10, "ts": ts + 1, "name": "ac2g"})
        out.append(
            {"ph": "f", "cat": "ac2g", "id": i, "pid": 0, "tid": 7, "ts": ts + 3, "bp": "e", "name": "ac2g"}
        )
        if i % 100 == 0:
            out.append(
                {
                    "ph": "X",
                    "cat": "user_annotation",
                    "name": f"ProfilerStep#{i // 100}",
                    "pid": 1,
                    "tid": 10,
                    "ts": ts - 0.5,
                    "dur": 999,
                }
            )
        if junk and i % 97 == 5:
            out.append({"ph": "X", "ts": [1, 2], "name": "bad ts"})  # not a number: dropped
            out.append(17)  # not an object: dropped
        if i % 61 == 0:
            out.append({"ph": "i", "name": "instant", "pid": 1, "tid": 10, "ts": ts, "s": "t"})
    return out


def _chunked(monkeypatch, size=20_000):
    monkeypatch.setattr(chunks, "CHUNK_BYTES", size)


def test_workers_setting(monkeypatch):
    monkeypatch.setattr(parallel, "MIN_BYTES", 100)
    monkeypatch.setenv("TRACEVIEW_WORKERS", "1")
    assert parallel.workers(10**9) == 0
    monkeypatch.setenv("TRACEVIEW_WORKERS", "3")
    assert parallel.workers(10**9) == 3
    assert parallel.workers(99) == 0  # small texts stay serial
    monkeypatch.delenv("TRACEVIEW_WORKERS")
    assert parallel.workers(10**9) in (0, *range(2, parallel.MAX_WORKERS + 1))


def test_synthetic_same_as_serial(tmp_path, monkeypatch, forced):
    _chunked(monkeypatch)
    path = _write(tmp_path, _events(3000))
    serial = _load(path, 1)
    assert forced == ["none"]  # TRACEVIEW_WORKERS=1: serial
    forced.clear()
    par = _load(path, 2)
    assert forced == ["parallel"]
    assert_same(serial, par)
    assert len(par.kernels) == 3000


def test_bare_array_and_three_workers(tmp_path, monkeypatch, forced):
    _chunked(monkeypatch, 7_000)
    path = _write(tmp_path, _events(1500), top=False)
    serial = _load(path, 1)
    forced.clear()
    par = _load(path, 3)
    assert forced == ["parallel"]
    assert_same(serial, par)


def test_dropped_events_and_warnings(tmp_path, monkeypatch, forced):
    _chunked(monkeypatch)
    path = _write(tmp_path, _events(3000, junk=True))
    serial = _load(path, 1)
    forced.clear()
    par = _load(path, 2)
    assert forced == ["parallel"]
    assert_same(serial, par)
    assert any("malformed" in w for w in par.warnings)


def test_exact_float_times(tmp_path, monkeypatch, forced):
    _chunked(monkeypatch)
    path = _write(tmp_path, _events(2000, big_floats=True))
    serial = _load(path, 1)
    forced.clear()
    par = _load(path, 2)
    assert forced == ["parallel"]
    assert_same(serial, par)


def test_cut_inside_a_string_rechecks(tmp_path, monkeypatch, forced):
    """Names holding '"},{"' make some cut fall inside an event: both paths go checked."""
    _chunked(monkeypatch, 3_000)
    path = _write(tmp_path, _events(2000, tricky_names=True))
    serial = _load(path, 1)
    forced.clear()
    par = _load(path, 2)
    assert forced == ["recheck"]
    assert_same(serial, par)
    assert any('"},{"' in n for n in par.events["name"].astype(str))


def _die(bound):
    os._exit(3)


def test_dead_worker_falls_back_to_serial(tmp_path, monkeypatch, forced):
    _chunked(monkeypatch)
    path = _write(tmp_path, _events(2000))
    serial = _load(path, 1)
    forced.clear()
    monkeypatch.setattr(parallel, "decode_bound", _die)  # inherited by the forked workers
    par = _load(path, 2)
    assert forced == ["none"]
    assert_same(serial, par)


@pytest.mark.skipif(not CONTROL.exists(), reason=f"corpus trace not found at {CONTROL}")
def test_corpus_trace_same_as_serial(monkeypatch, forced):
    _chunked(monkeypatch, 1 << 20)  # ~28 chunks of the 28 MB control trace
    serial = _load(CONTROL, 1)
    forced.clear()
    par = _load(CONTROL, 2)
    assert forced == ["parallel"]
    assert_same(serial, par)
    assert len(par.kernels) > 1000
