"""JSON that is not a profiler trace is an error, told apart from a damaged trace.

Regression: a bare list of objects without trace events, or ``{"traceEvents":
[{"foo": 1}]}``, used to load as an empty trace (exit 0). Now ``NotATraceError``
(a ``TraceReadError``), which a folder scan can skip. An empty ``traceEvents``
array stays a valid, empty trace: the profiler writes one for an empty capture.
"""

from __future__ import annotations

import gzip
import json
import subprocess
import sys

import pytest

import traceview as tv
from traceview.errors import NotATraceError, TraceReadError

NOT_TRACES = {
    "no_ph_in_object": {"traceEvents": [{"foo": 1}]},
    "no_ph_in_bare_list": [{"foo": 1}, {"name": "x", "ts": 3}],
    "empty_ph_only": {"traceEvents": [{"ph": "", "ts": 1}]},
    "junk_items": {"traceEvents": [1, "x", None]},
    "no_trace_events_key": {"data": [{"ph": "X"}]},
    "traceEvents_not_a_list": {"traceEvents": {"ph": "X"}},
    "scalar_document": 42,
    "string_document": "a trace",
}

DAMAGED = {
    "truncated": b'{"traceEvents": [{"ph": "X", "ts": 1',
    "not_json": b"hello",
    "bad_gzip": b"\x1f\x8b\x08\x00garbage-garbage",
}


def _write(tmp_path, doc, name="t.json"):
    path = tmp_path / name
    path.write_bytes(doc if isinstance(doc, bytes) else json.dumps(doc).encode())
    return path


@pytest.mark.parametrize("doc", NOT_TRACES.values(), ids=NOT_TRACES.keys())
@pytest.mark.parametrize("salvage", [False, True])
def test_load_raises_not_a_trace(tmp_path, doc, salvage):
    path = _write(tmp_path, doc)
    with pytest.raises(NotATraceError) as info:
        tv.load(path, cache=False, salvage=salvage)
    message = str(info.value)
    assert isinstance(info.value, TraceReadError) and isinstance(info.value, tv.TraceviewError)
    assert message.startswith(f"{path}: not a profiler trace: ") and "\n" not in message


def test_message_names_what_is_missing(tmp_path):
    path = _write(tmp_path, NOT_TRACES["no_ph_in_object"])
    with pytest.raises(
        NotATraceError, match="no trace events \\(objects with a 'ph' field\\) in traceEvents"
    ):
        tv.load(path, cache=False)


def test_gzip_not_a_trace(tmp_path):
    path = _write(tmp_path, gzip.compress(json.dumps(NOT_TRACES["no_ph_in_object"]).encode()), "t.json.gz")
    with pytest.raises(NotATraceError):
        tv.load(path, cache=False)


@pytest.mark.parametrize("data", DAMAGED.values(), ids=DAMAGED.keys())
def test_damaged_trace_is_not_not_a_trace(tmp_path, data):
    with pytest.raises(TraceReadError) as info:
        tv.load(_write(tmp_path, data), cache=False)
    assert not isinstance(info.value, NotATraceError)


@pytest.mark.parametrize("doc", [{"traceEvents": []}, [], {"traceEvents": [], "schemaVersion": 1}])
def test_empty_capture_is_not_a_trace(tmp_path, doc):
    with pytest.raises(NotATraceError, match="no trace events"):
        tv.load(_write(tmp_path, doc), cache=False)


def test_one_real_event_among_junk_is_a_trace(tmp_path):
    doc = {"traceEvents": [{"foo": 1}, {"ph": "X", "name": "a", "ts": 1, "dur": 2, "pid": 1, "tid": 1}]}
    trace = tv.load(_write(tmp_path, doc), cache=False)
    assert len(trace.events) == 1


def test_metadata_events_only_is_a_trace(tmp_path):
    doc = {"traceEvents": [{"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "python"}}]}
    assert len(tv.load(_write(tmp_path, doc), cache=False).events) == 0


@pytest.mark.parametrize(
    "doc", [NOT_TRACES["no_ph_in_object"], NOT_TRACES["no_ph_in_bare_list"]], ids=["object", "bare_list"]
)
def test_cli_exits_1_with_one_line(tmp_path, doc):
    path = _write(tmp_path, doc)
    proc = subprocess.run(
        [sys.executable, "-m", "traceview", "summary", str(path), "--no-cache"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 1
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert str(path) in lines[0] and "not a profiler trace" in lines[0]
    assert "Traceback" not in proc.stderr
