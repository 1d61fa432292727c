"""The direct path (traceview/read/direct.py) reads a trace exactly as the serial path does:
a plain file straight from the file, a gzip file from its inflated text.

The serial path (whole text read, msgspec's split, then the events) shares none of the direct
path's code for the document: no ``find_events``, no open scan, no windows. Every case is
read both ways (``decoders.same_read``: msgspec alone against the compiled decoder, whose
first try on a plain file is the direct path) and must give the same columns, metadata,
counts, warnings, or the same error. Each case also says whether the direct path must take
the file or decline it (and leave it to the serial path): a decline costs a second read, so
real traces must never be declined.
"""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import decoders
import pytest
from corpus import corpus_params
from hypothesis import given
from hypothesis import strategies as st
from test_compiled_decoder import EVENT, FUZZ, PLAIN, SPACE, STRINGS, VALUES, needs_build

import traceview as tv
from traceview.read import chunks, compiled, direct, read, strategies

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = sorted((ROOT / "sample_traces").glob("*.json.gz"))


def _taken(monkeypatch) -> list:
    """What each call of the direct path returned (a plain file's, a gzip file's stream, then
    its whole inflated text): True where it decoded the events itself."""
    calls: list = []
    for name in ("read_direct", "read_gzip", "read_held"):
        real = getattr(direct, name)

        def spied(*args, real=real):
            got = real(*args)
            calls.append(got is not None)
            return got

        monkeypatch.setattr(direct, name, spied)
    return calls


def _same(monkeypatch, path: Path, *, taken: bool, chunk: int = 1 << 12, workers: str = "3"):
    """``path`` read both ways with small chunks on threads; the compiled read took the direct
    path (``taken``) or was declined by it."""
    monkeypatch.setattr(chunks, "CHUNK_BYTES", chunk)
    monkeypatch.setenv("TRACEVIEW_WORKERS", workers)
    calls = _taken(monkeypatch)
    got = decoders.same_read(path)
    assert any(calls) == taken, calls
    return got


def _events(n: int, name=lambda i: f"aten::op{i % 50}") -> list:
    return [
        {"ph": "X", "cat": "cpu_op", "name": name(i), "pid": 1, "tid": 1, "ts": 1000 + 10 * i, "dur": 5}
        for i in range(n)
    ]


def _write(tmp_path: Path, text: str | bytes, name: str = "t.json", gz: bool = False) -> Path:
    """The text as a plain file, or gzip-compressed (``gz``: read from its inflated text)."""
    path = tmp_path / (name + ".gz" if gz else name)
    data = text.encode("utf-8", "surrogateescape") if isinstance(text, str) else text
    path.write_bytes(gzip.compress(data, compresslevel=1) if gz else data)
    return path


both = pytest.mark.parametrize("gz", [False, True, "held"], ids=["plain", "gzip", "gzip-held"])


@pytest.fixture(autouse=True)
def _gzip_held(request, monkeypatch):
    """``gz="held"``: a gzip file read from its whole inflated text (``read_held``), as where its
    stream is declined: the stream's strategy taken out."""
    if getattr(request.node, "callspec", None) and request.node.callspec.params.get("gz") == "held":
        without = tuple(s for s in strategies.STRATEGIES if s is not strategies.from_gzip_stream)
        monkeypatch.setattr(strategies, "STRATEGIES", without)


@needs_build
@pytest.mark.parametrize("path", [*SAMPLES, *(p.values[0] for p in corpus_params("*/*.json*"))])
@both
def test_real_traces_are_read_directly(path, gz, monkeypatch, tmp_path):
    """Every corpus and sample trace, as it is (gzip) and written out plain: taken, and the
    same, in 64 KiB chunks."""
    if path is None:
        pytest.skip("corpus not found")
    plain = path if gz else _write(tmp_path, gzip.decompress(path.read_bytes()))
    got = _same(monkeypatch, plain, taken=True, chunk=1 << 16)
    assert got.decoder == compiled.COMPILED


@needs_build
@pytest.mark.parametrize("chunk", [1 << 8, 1 << 12, 1 << 30])
@both
def test_events_then_a_long_tail(chunk, gz, monkeypatch, tmp_path):
    """Members after traceEvents that are full of ``},{``: the chunks cut in them are scanned
    and dropped, the array's ``]`` found in the chunk before; their values are the metadata."""
    tail = {"deviceProperties": [{"id": k, "name": "GPU"} for k in range(300)], "traceName": "t"}
    text = json.dumps({"schemaVersion": 1, "traceEvents": _events(500), **tail}, indent=1)
    got = _same(monkeypatch, _write(tmp_path, text, gz=gz), taken=True, chunk=chunk)
    assert got.n_events == 500 and len(got.meta["deviceProperties"]) == 300


@needs_build
@pytest.mark.parametrize(
    "text",
    [
        '{"traceEvents": []}',
        ' \n{ "a" : {"b": [1, {"c": "},{"}]} ,\n"traceEvents" :\n[ ] , "z": null }\n ',
        '{"traceEvents":[{"ph":"X","name":"a","ts":1,"dur":2}]}',
        '{"traceEvents":[{"ph":"X","name":"a","ts":1,"dur":2}\n]\n,"traceName":"]"}',
    ],
)
@both
def test_small_documents_taken(text, gz, monkeypatch, tmp_path):
    _same(monkeypatch, _write(tmp_path, text, gz=gz), taken=True)


@needs_build
@pytest.mark.parametrize("odd", ['1, "x", []', '{"ph":"X","ts":1e3}'])
@both
def test_chunks_left_to_msgspec(odd, gz, monkeypatch, tmp_path):
    """Items the scanner leaves to msgspec (not events: dropped and counted; a number it does
    not convert): their chunk is msgspec's, taken where it is not the array's last; in the
    last chunk they send the file to the serial path (msgspec cannot say where the array ends)."""
    events = [json.dumps(e) for e in _events(400)]
    early = '{"traceEvents": [' + ",".join([odd, *events]) + "]}"
    got = _same(monkeypatch, _write(tmp_path, early, gz=gz), taken=True)
    assert got.decoder.startswith(f"{compiled.COMPILED} (1 of ")
    late = '{"traceEvents": [' + ",".join([*events, odd]) + "]}"
    _same(monkeypatch, _write(tmp_path, late, gz=gz), taken=False)


TRUNCATED = json.dumps({"traceEvents": _events(400)})[:-9000]


@needs_build
@pytest.mark.parametrize(
    "text",
    [
        "[" + json.dumps(_events(3))[1:],  # a bare array
        '{"trace\\u0045vents": [], "traceEvents": [{"ph":"X"}]}',  # an escaped key before it
        '{"traceEvents": {"ph": "X"}}',  # not a list
        '{"traceEvents": [{"ph":"X","ts":1}], "traceEvents": []}',  # a second traceEvents: msgspec keeps one
        '{"traceEvents": [{"ph":"X","ts":1}], "x": [1,}',  # the tail is not JSON
        '{"traceEvents": [{"ph":"X","ts":1}]} {}',  # something after the document
        '{"traceEvents": [{"ph":"X","ts":1},]}',  # a trailing comma
        '{"traceEvents": [{"ph":"X","ts":1}',  # cut short
        TRUNCATED,  # cut short in its last chunk
        TRUNCATED[: TRUNCATED.rindex("}") + 1],  # cut short right after an event
        '{"a": ' + "[" * 100 + "]" * 100 + ', "traceEvents": []}',  # nested deeper than the scanner goes
        '{"traceEvents": [{"ph":"X","name":"\\ud800"}, {"ph":"X"}]}',  # an event msgspec refuses alone
        "   \n",
        '{"x": 1}',
        "\x1f\x8b not gzip after all",
    ],
)
@both
def test_declined_documents_read_as_before(text, gz, monkeypatch, tmp_path):
    """What the direct path is not sure of goes to the serial path: its error or its result."""
    _same(monkeypatch, _write(tmp_path, text, gz=gz), taken=False)


@needs_build
def test_a_long_head_is_declined(monkeypatch, tmp_path):
    """traceEvents must open within the head the direct path reads (1 MiB; 64 bytes here)."""
    monkeypatch.setattr(direct, "HEAD_BYTES", 64)
    text = json.dumps({"deviceProperties": [{"name": "GPU"}] * 4, "traceEvents": _events(50)})
    _same(monkeypatch, _write(tmp_path, text), taken=False)
    monkeypatch.setattr(direct, "HEAD_BYTES", 1 << 20)
    _same(monkeypatch, _write(tmp_path, text), taken=True)


@needs_build
@both
def test_cuts_inside_strings_are_declined(gz, monkeypatch, tmp_path):
    """Names holding ``},{`` make cuts land inside strings: the chunk before such a cut ends
    in an open string, neither the scanner nor msgspec takes it, and the serial path reads it."""
    text = json.dumps({"traceEvents": _events(3000, lambda i: 'x"},{"y' * (i % 7))})
    got = _same(monkeypatch, _write(tmp_path, text, gz=gz), taken=False)
    assert got.n_events == 3000


@needs_build
@pytest.mark.parametrize("spaces", [1, 5000, 100_000])
def test_cuts_across_windows(spaces, monkeypatch, tmp_path):
    """Whitespace inside ``},{`` that spans the windows the cuts are looked for in (64 KiB; 16
    bytes here): a cut is found across two windows, or missed (a longer chunk), never wrong."""
    monkeypatch.setattr(direct, "WINDOW", 16)
    between = " " * spaces + ",\n"
    text = '{"traceEvents": [' + between.join(json.dumps(e) for e in _events(200)) + "]}"
    got = _same(monkeypatch, _write(tmp_path, text), taken=True, chunk=1 << 10)
    assert got.n_events == 200


@needs_build
def test_a_file_that_changes_while_read_is_an_error(monkeypatch, tmp_path):
    """Chunks of a file written to meanwhile would mix two texts: one line naming the file."""
    plain = _write(tmp_path, json.dumps({"traceEvents": _events(20_000)}))
    monkeypatch.setattr(chunks, "CHUNK_BYTES", 1 << 14)
    real = direct._scan

    def written_meanwhile(*args):
        os.utime(plain, ns=(1, 1))
        return real(*args)

    monkeypatch.setattr(direct, "_scan", written_meanwhile)
    with decoders.decoder(compiled.COMPILED), pytest.raises(tv.TraceReadError) as err:
        decoders.read(plain)
    assert str(err.value) == f"{plain}: {compiled.CHANGED}"


@needs_build
def test_the_text_is_never_held_whole(monkeypatch, tmp_path):
    """The direct read's peak is the columns' (their join), not the text and the columns
    together, as it is where the serial path holds the text (a gzip file, or no region)."""
    text = json.dumps({"traceEvents": _events(200_000, lambda i: f"aten::some_long_operator_name_{i % 50}")})
    plain = _write(tmp_path, text)
    monkeypatch.setattr(chunks, "CHUNK_BYTES", 1 << 20)
    monkeypatch.setenv("TRACEVIEW_WORKERS", "2")

    def peak() -> int:
        return decoders.read_peak(plain, 200_000)

    calls = _taken(monkeypatch)
    with decoders.decoder(compiled.COMPILED):
        direct_peak = peak()
        assert calls == [True]
        monkeypatch.setattr(direct, "read_direct", lambda *args: None)
        monkeypatch.setattr(compiled, "region_of", lambda *args: None)
        held = peak()
    # 1.37x the text against 2.2x (these events are short: their columns weigh more than the text)
    assert direct_peak < held - 0.5 * len(text), (direct_peak / len(text), held / len(text))


@needs_build
def test_a_gzip_text_is_never_held_whole(monkeypatch, tmp_path):
    """A gzip file scanned as it inflates (``read_gzip``): its peak is the columns', not the
    whole inflated text and the columns together, as where the stream is declined."""
    text = json.dumps({"traceEvents": _events(200_000, lambda i: f"aten::some_long_operator_name_{i % 50}")})
    packed = _write(tmp_path, text, gz=True)
    monkeypatch.setattr(chunks, "CHUNK_BYTES", 1 << 20)
    monkeypatch.setenv("TRACEVIEW_WORKERS", "2")
    calls = _taken(monkeypatch)
    with decoders.decoder(compiled.COMPILED):
        streamed = decoders.read_peak(packed, 200_000)
        assert calls == [False, True]  # read_direct declines a gzip file, read_gzip takes it
        without = tuple(s for s in strategies.STRATEGIES if s is not strategies.from_gzip_stream)
        monkeypatch.setattr(strategies, "STRATEGIES", without)
        held = decoders.read_peak(packed, 200_000)
    # here 1.15x against 1.60x: the few chunk buffers the stream fills again and again (each 1 MiB
    # of chunk and 1 MiB of inflated piece here) against the whole text
    assert streamed < held - 0.3 * len(text), (streamed / len(text), held / len(text))


# ------------------------------------------------------------ generated documents

MEMBERS = st.lists(st.tuples(STRINGS, VALUES), max_size=3).map(lambda kv: [f"{k}:{v}" for k, v in kv])
NAMES = st.sampled_from(["a", "},{", '"},{"', "]", "}, {", "[", "\\u005d"])


@needs_build
@FUZZ
@given(
    before=MEMBERS,
    after=MEMBERS,
    events=st.lists(st.one_of(EVENT, PLAIN), max_size=8),
    named=st.lists(NAMES, max_size=6),
    space=SPACE,
    chunk=st.sampled_from([1, 8, 64, 1 << 20]),
)
def test_generated_documents_read_the_same(tmp_path, before, after, events, named, space, chunk):
    """Members before and after the events, events of every kind, names that look like cuts,
    chunks of a byte to a MiB: the same as the serial path, whether taken or declined."""
    named_events = [json.dumps({"ph": "X", "name": name, "ts": 1}) for name in named]
    body = "[" + f",{space}".join([*events, *named_events]) + f"{space}]"
    text = "{" + ",".join([*before, f'{space}"traceEvents"{space}:{space}{body}', *after]) + "}"
    path = tmp_path / "doc.json"
    path.write_bytes(text.encode("utf-8", "surrogateescape"))
    old = chunks.CHUNK_BYTES
    chunks.CHUNK_BYTES = chunk
    try:
        decoders.same_read(path)
    finally:
        chunks.CHUNK_BYTES = old


TRIM_PROBE = """
import sys, traceview.limits as limits
from traceview.read import chunks, read
chunks.CHUNK_BYTES = 1 << 20
if sys.argv[2] == "kept":
    limits._TRIM = None
assert read(sys.argv[1]).n_events == 400_000
print([line for line in open("/proc/self/status") if line.startswith("VmRSS:")][0].split()[1])
"""


@needs_build
@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="VmRSS is read from /proc (Linux)")
def test_freed_chunk_memory_goes_back_to_the_system(tmp_path):
    """The chunks' columns, freed once joined, stay in glibc's thread arenas unless given back
    (``limits.give_back_freed_memory``): then the model and link stages would allocate on top
    of them. Each way in a fresh process, its resident size after the read."""
    import subprocess
    import sys

    from traceview import limits

    if limits._malloc_trim() is None:
        pytest.skip("this C library has no malloc_trim: nothing to give back with")
    text = json.dumps({"traceEvents": _events(400_000)})
    plain = _write(tmp_path, text)
    env = {**os.environ, "TRACEVIEW_WORKERS": "2", compiled.ENV: compiled.COMPILED}

    def rss_kib(mode: str) -> int:
        res = subprocess.run(
            [sys.executable, "-c", TRIM_PROBE, str(plain), mode], capture_output=True, text=True, env=env
        )
        assert res.returncode == 0, res.stderr
        return int(res.stdout)

    given, kept = rss_kib("given"), rss_kib("kept")
    # here 112 MB against 130 MB (the chunks' columns are narrower since issue 35: int32 codes,
    # no memory for a chunk's int column that holds no int; chunks of 1 MiB or more of columns
    # live in mappings of their own, given back when freed, trimmed or not)
    assert kept - given > 0.25 * len(text) / 1024, (given, kept, len(text) // 1024)


def test_flow_columns_are_joined_only_when_looked_up(tmp_path):
    """The flow events' columns (a million distinct ids at 1 GB) wait until link asks for them:
    read leaves them pending, and looking one up joins it as an eager join would."""
    events = [
        {"ph": "s", "id": i, "pid": 1, "tid": 1, "ts": i, "cat": "ac2g", "name": "ac2g"} for i in range(50)
    ] + [{"ph": "f", "id": i, "pid": 0, "tid": 7, "ts": i + 5, "cat": "ac2g", "bp": "e"} for i in range(50)]
    path = tmp_path / "flows.json"
    path.write_text(json.dumps({"traceEvents": events}))
    flows = read(str(path)).columns["flows"]
    assert set(flows._pending) == {"ph", "cat", "id", "pid", "tid"}
    ids = flows["id"]
    assert "id" not in flows._pending and ids.uniques == list(range(50))
    assert ids.codes.tolist() == list(range(50)) * 2 and list(flows) == [
        "ph",
        "cat",
        "id",
        "pid",
        "tid",
        "ts_ns",
    ]
