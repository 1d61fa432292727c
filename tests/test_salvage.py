"""``load(path, salvage=True)`` on truncated traces (issue #8).

Over every corpus trace (and the sample traces): cut the JSON text at 50%,
salvage, and check against an independent reference (stdlib ``json``
``raw_decode`` walking the document) that

* at least 95% of the events that lie wholly before the cut come back (in
  practice: all of them),
* every recovered event is identical to the same event in the uncut file,
* ``load(cut, salvage=True).events`` holds exactly the complete X events of the prefix,
* top-level metadata written before ``traceEvents`` survives.

Plus: cut gzip streams, cuts in the metadata before/after the events, damage
in the middle, strings full of brackets and escapes, intact files (salvage is a
no-op), and a 100 MB+ trace salvaged in seconds.
"""

from __future__ import annotations

import gzip
import json
import re
import time
import zlib
from pathlib import Path

import pandas as pd
import pytest
from corpus import CORPUS

import traceview as tv
from traceview.read.salvage import salvage_prefix

SAMPLES = Path(__file__).resolve().parents[1] / "sample_traces"
_WS = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()


def _trace_files() -> list[Path]:
    files = sorted(CORPUS.glob("*/*.json.gz")) if CORPUS.is_dir() else []
    files += sorted(SAMPLES.glob("*.json.gz")) if SAMPLES.is_dir() else []
    return files


def _params():
    files = _trace_files()
    if not files:
        return [
            pytest.param(None, marks=pytest.mark.skip(reason=f"no corpus at {CORPUS} and no sample traces"))
        ]
    return [pytest.param(f, id=f"{f.parent.name}/{f.name[:48]}") for f in files]


# ---------------------------------------------------------------- reference parser


def reference(text: bytes, stop: int | None = None):
    """(metadata before traceEvents, events, byte offset just past each event) by stdlib json;
    with ``stop``, events after that byte offset are not decoded (saves time on big traces)."""
    s = text.decode("utf-8")
    to_byte = _byte_offsets(s)
    i = _WS.match(s).end()
    assert s[i] == "{"
    i += 1
    before: dict = {}
    events: list = []
    ends: list = []
    seen_events = False
    while True:
        i = _WS.match(s, i).end()
        if s[i] == "}":
            break
        key, i = _DECODER.raw_decode(s, i)
        i = _WS.match(s, i).end()
        assert s[i] == ":"
        i = _WS.match(s, i + 1).end()
        if key == "traceEvents":
            seen_events = True
            assert s[i] == "["
            i += 1
            while True:
                i = _WS.match(s, i).end()
                if s[i] == "]":
                    i += 1
                    break
                obj, i = _DECODER.raw_decode(s, i)
                events.append(obj)
                ends.append(to_byte(i))
                if stop is not None and ends[-1] > stop:
                    return before, events, ends
                i = _WS.match(s, i).end()
                if s[i] == ",":
                    i += 1
        else:
            value, i = _DECODER.raw_decode(s, i)
            if not seen_events:
                before[key] = value
        i = _WS.match(s, i).end()
        if s[i] == ",":
            i += 1
    return before, events, ends


def _byte_offsets(s: str):
    if s.isascii():
        return lambda i: i
    import numpy as np

    widths = np.frombuffer(s.encode("utf-32-le"), dtype=np.uint32)
    nbytes = np.where(widths < 0x80, 1, np.where(widths < 0x800, 2, np.where(widths < 0x10000, 3, 4)))
    cum = np.concatenate([[0], np.cumsum(nbytes)])
    return lambda i: int(cum[i])


def _x_count(events) -> int:
    return sum(1 for e in events if isinstance(e, dict) and e.get("ph") == "X")


# ---------------------------------------------------------------- every corpus trace cut at 50%

RECOVERY: dict[str, float] = {}


@pytest.mark.parametrize("path", _params())
def test_salvage_half_of_every_trace(path, tmp_path):
    text = gzip.decompress(path.read_bytes())
    cut_at = len(text) // 2
    before, events, ends = reference(text, stop=cut_at)
    cut = text[:cut_at]
    complete = sum(1 for end in ends if end <= cut_at)  # events wholly before the cut

    fixed, note = salvage_prefix(cut, str(path))
    assert note and "salvaged" in note
    doc = json.loads(fixed)
    got = doc["traceEvents"] if isinstance(doc, dict) else doc
    RECOVERY[path.name] = len(got) / complete if complete else 1.0
    assert len(got) >= 0.95 * complete, f"recovered {len(got)} of {complete} complete events"
    assert got == events[: len(got)], "a recovered event differs from the uncut file"
    for key, value in before.items():  # metadata written before the events survives, unchanged
        assert doc[key] == value, key

    cut_file = tmp_path / "cut.json"
    cut_file.write_bytes(cut)
    with pytest.raises(tv.TraceReadError, match="truncated"):
        tv.load(cut_file, cache=False)
    trace = tv.load(cut_file, salvage=True, cache=False)
    assert len(trace.events) == _x_count(events[:complete])
    assert sum("salvaged" in w for w in trace.warnings) == 1


def test_salvage_recovery_summary():
    """Runs after the per-file test (same module, file order): the minimum recovery is 100%."""
    if not RECOVERY:
        pytest.skip("no traces were cut")
    values = sorted(RECOVERY.values())
    assert values[0] >= 0.95, {k: v for k, v in RECOVERY.items() if v < 0.95}


def _medium_trace() -> Path | None:
    """A real trace of a few MB, else the largest available one."""
    files = [f for f in _trace_files() if 50_000 < f.stat().st_size < 400_000]
    return files[0] if files else (max(_trace_files(), key=lambda f: f.stat().st_size, default=None))


def test_salvage_cut_gzip_stream(tmp_path):
    """The gzip bytes themselves cut at 50%: everything decompressed up to the cut, minus the
    partial event."""
    src = _medium_trace()
    if src is None:
        pytest.skip("no traces")
    blob = src.read_bytes()
    cut_file = tmp_path / "cut.json.gz"
    cut_file.write_bytes(blob[: len(blob) // 2])
    recovered = zlib.decompressobj(wbits=31).decompress(blob[: len(blob) // 2])
    _, events, ends = reference(gzip.decompress(blob))
    complete = sum(1 for end in ends if end <= len(recovered))

    with pytest.raises(tv.TraceReadError, match="truncated gzip"):
        tv.load(cut_file, cache=False)
    trace = tv.load(cut_file, salvage=True, cache=False)
    assert len(trace.events) == _x_count(events[:complete])
    (note,) = [w for w in trace.warnings if "gzip" in w]
    assert "gzip stream was cut" in note and f"recovered {len(recovered)} bytes" in note
    full = tv.load(src, cache=False)
    n = len(trace.events)
    for col in ("name", "cat", "dur_ns", "correlation"):
        assert trace.events[col].astype(object).tolist() == full.events[col].iloc[:n].astype(object).tolist()


# ---------------------------------------------------------------- where the cut lands


def _kineto_like() -> dict:
    return {
        "schemaVersion": 1,
        "deviceProperties": [{"id": 0, "name": 'GPU "0" {[x]}', "totalGlobalMem": 1}],
        "traceEvents": [
            {
                "ph": "X",
                "cat": "cpu_op",
                "name": f'op{i} \\"}}]] \u00e9',
                "pid": 1,
                "tid": 1,
                "ts": 1000 + i,
                "dur": 1,
                "args": {"Input Dims": [[i]], "note": "\\" * (i % 4)},
            }
            for i in range(200)
        ],
        "traceName": "x.json",
        "displayTimeUnit": "ms",
        "baseTimeNanoseconds": 1_700_000_000_000_000_000,
    }


def _write(tmp_path: Path, data: bytes, name: str = "t.json") -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


def test_salvage_every_cut_of_a_small_trace(tmp_path):
    """Cut at every byte: strings with brackets, escaped quotes, backslash runs and UTF-8 never confuse it."""
    doc = _kineto_like()
    doc["traceEvents"] = doc["traceEvents"][:12]
    text = json.dumps(doc, ensure_ascii=False).encode()  # raw UTF-8: some cuts split a character
    _, events, ends = reference(text)
    start = text.index(b'"traceEvents"')
    for cut_at in range(start, len(text)):
        complete = sum(1 for end in ends if end <= cut_at)
        try:
            fixed, note = salvage_prefix(text[:cut_at], "t.json")
        except tv.TraceReadError as exc:
            assert complete == 0 and "cannot salvage" in str(exc), (cut_at, str(exc))
            continue
        doc = json.loads(fixed)
        assert doc["traceEvents"] == events[: len(doc["traceEvents"])]
        assert len(doc["traceEvents"]) == complete, cut_at
        assert doc["deviceProperties"] == _kineto_like()["deviceProperties"]
        assert note


def test_salvage_cut_in_metadata_after_events(tmp_path):
    doc = _kineto_like()
    text = json.dumps(doc).encode()
    cut_at = text.index(b'"baseTimeNanoseconds"') + 5  # inside the last key
    trace = tv.load(_write(tmp_path, text[:cut_at]), salvage=True, cache=False)
    assert len(trace.events) == 200
    assert trace.meta["traceName"] == "x.json" and trace.meta["displayTimeUnit"] == "ms"
    assert "baseTimeNanoseconds" not in trace.meta
    (note,) = trace.warnings
    assert "all 200 events are complete" in note and "trailing metadata" in note


def test_salvage_cut_in_metadata_before_events(tmp_path):
    text = json.dumps(_kineto_like()).encode()
    path = _write(tmp_path, text[: text.index(b'"traceEvents"') - 20])
    with pytest.raises(tv.TraceReadError, match="before the traceEvents array started") as info:
        tv.load(path, salvage=True, cache=False)
    assert str(path) in str(info.value) and "\n" not in str(info.value)


def test_salvage_damage_in_the_middle(tmp_path):
    """Invalid bytes mid-file: keep the events before the damage, say where and how much was dropped."""
    text = bytearray(json.dumps(_kineto_like()).encode())
    _, _events, ends = reference(bytes(text))
    at = ends[99] + 3  # inside event 100
    text[at] = ord("\x01")
    path = _write(tmp_path, bytes(text))
    with pytest.raises(tv.TraceReadError, match="not valid JSON"):
        tv.load(path, cache=False)
    trace = tv.load(path, salvage=True, cache=False)
    assert len(trace.events) == 100
    (note,) = trace.warnings
    assert f"invalid JSON at byte {at}" in note and "kept 100 complete events" in note
    lost = len(text) - ends[99]
    assert f"dropped the last {lost} bytes" in note
    assert 95 <= int(re.search(r"about (\d+) events", note).group(1)) <= 105, note


def test_salvage_bare_array_trace(tmp_path):
    events = _kineto_like()["traceEvents"]
    text = json.dumps(events).encode()
    trace = tv.load(_write(tmp_path, text[: len(text) // 2]), salvage=True, cache=False)
    assert 0 < len(trace.events) < 200
    assert trace.events["name"].astype(str).tolist() == [e["name"] for e in events[: len(trace.events)]]


def test_salvage_nothing_to_recover(tmp_path):
    for data in (b'{"traceEvents": [{"ph": "X", "na', b'{"schemaVer', b"[{", b"\x00\x01"):
        path = _write(tmp_path, data)
        with pytest.raises(tv.TraceReadError) as info:
            tv.load(path, salvage=True, cache=False)
        assert str(path) in str(info.value) and "\n" not in str(info.value)


# ---------------------------------------------------------------- intact files: a no-op


def _intact_files() -> list[Path]:
    files = _trace_files()
    small = [f for f in files if f.stat().st_size < 150_000][:6]
    return small + ([_medium_trace()] if _medium_trace() else [])


@pytest.mark.parametrize("path", _intact_files() or [pytest.param(None, marks=pytest.mark.skip("no traces"))])
def test_salvage_is_a_noop_on_intact_files(path):
    text = gzip.decompress(path.read_bytes())
    out, note = salvage_prefix(text, str(path))
    assert out is text and note is None
    plain = tv.load(path, cache=False)
    salvaged = tv.load(path, salvage=True, cache=False)
    assert salvaged.warnings == plain.warnings
    assert salvaged.meta == plain.meta and salvaged.stats == plain.stats
    for table in ("events", "kernels", "ops", "steps"):
        pd.testing.assert_frame_equal(getattr(salvaged, table), getattr(plain, table))


# ---------------------------------------------------------------- scale


def test_salvage_100mb_in_seconds():
    event = json.dumps(
        {
            "ph": "X",
            "cat": "kernel",
            "name": 'void gemm<"x\\\\">{}[]',
            "pid": 0,
            "tid": 7,
            "ts": 1695835535123456.789,
            "dur": 12.5,
            "args": {"correlation": 1, "External id": 2, "grid": [1, 2, 3]},
        }
    ).encode()
    n = 110_000_000 // (len(event) + 2)
    text = b'{"schemaVersion": 1, "traceEvents": [' + b", ".join([event] * n) + b"]}"
    cut = text[: len(text) - 1000]
    del text
    start = time.perf_counter()
    fixed, note = salvage_prefix(cut, "big.json")
    elapsed = time.perf_counter() - start
    assert fixed.endswith(b"}]}") and "salvaged" in note
    assert elapsed < 20, f"salvaging {len(cut) >> 20} MiB took {elapsed:.1f}s"


def test_salvage_junk_after_a_complete_document(tmp_path):
    """Two traces concatenated, or junk appended: keep the whole first document, metadata and all."""
    text = json.dumps(_kineto_like()).encode()
    path = _write(tmp_path, text + b"\n{garbage")
    with pytest.raises(tv.TraceReadError, match="not valid JSON"):
        tv.load(path, cache=False)
    trace = tv.load(path, salvage=True, cache=False)
    assert len(trace.events) == 200 and trace.meta["baseTimeNanoseconds"] == 1_700_000_000_000_000_000
    (note,) = trace.warnings
    assert "dropped the last 9 bytes (junk after its end)" in note
