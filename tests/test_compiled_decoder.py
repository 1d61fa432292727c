"""The compiled decoder (src/cscan, traceview/read/compiled.py) reads exactly what msgspec reads.

Differential: every corpus trace and sample trace, generated events that aim at each rule of
the scanner (types per field, number limits, escapes, UTF-8, duplicate and escaped keys,
whitespace), many small chunks on several threads: the same columns, counts, warnings and
errors as the msgspec decoder, which shares no code with the scanner. Real traces must not
fall back to msgspec at all (else the speed is lost without a test noticing). Also: the
package builds and works without a C compiler, ``--version`` names the decoder, the fuzz
regression cases replay, and a bounded libFuzzer run under ASan and UBSan finds nothing.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import threading
import zipfile
from pathlib import Path

import decoders
import pandas as pd
import pytest
from click.testing import CliRunner
from corpus import CORPUS, corpus_params
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import traceview as tv
from traceview.cli import main
from traceview.read import chunks, compiled

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = sorted((ROOT / "sample_traces").glob("*.json.gz"))
REQUIRED = os.environ.get("TRACEVIEW_REQUIRE_COMPILED") == "1"  # CI: a missing build is a failure

needs_build = pytest.mark.skipif(
    not decoders.BUILT and not REQUIRED, reason="the compiled decoder is not built in this install"
)


def test_built_where_required():
    assert decoders.BUILT or not REQUIRED, "TRACEVIEW_REQUIRE_COMPILED=1 but traceview.read._cscan is missing"


@needs_build
@pytest.mark.parametrize("path", [*SAMPLES, *(p.values[0] for p in corpus_params("*/*.json*"))])
def test_real_traces_read_the_same_without_fallback(path):
    if path is None:
        pytest.skip(f"corpus not found at {CORPUS}")
    raw = decoders.same_read(path)
    assert raw.decoder == compiled.COMPILED  # no chunk left to msgspec


FUZZ_CASE_INPUTS = sorted(p for p in (ROOT / "tests" / "fuzz_cases").glob("*/[ab].*"))


@needs_build
@pytest.mark.parametrize("path", FUZZ_CASE_INPUTS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_saved_fuzz_cases_read_the_same(path):
    """Every input the CLI fuzzer ever failed on (tests/fuzz_cases/): both decoders agree."""
    decoders.same_read(path)
    decoders.same_read(path, salvage=True)


@needs_build
@pytest.mark.parametrize(
    "name",
    [
        "hta/trace_diff__control__control.json.gz",
        "tokenomics/trace0.json.gz",
        "tracelens/b200__eager_trace.json.gz",
    ],
)
def test_small_chunks_on_threads(name, monkeypatch, tmp_path):
    """Many chunks (64 KiB each) on 3 threads: the msgspec serial result, chunk for chunk."""
    path = CORPUS / name
    if not path.exists():
        pytest.skip(f"corpus trace missing: {path}")
    monkeypatch.setattr(chunks, "CHUNK_BYTES", 1 << 16)
    monkeypatch.setenv("TRACEVIEW_WORKERS", "3")
    raw = decoders.same_read(path)
    assert raw.decoder == compiled.COMPILED


def _serial_only(monkeypatch) -> None:
    """Plain files read whole, as where the direct path declines (tests/test_direct_read.py):
    the paths below are its fallback."""
    from traceview.read import strategies

    without = tuple(s for s in strategies.STRATEGIES if s is not strategies.from_file)
    monkeypatch.setattr(strategies, "STRATEGIES", without)


def _count_calls(monkeypatch, module, name: str) -> list:
    calls: list = []
    real = getattr(module, name)

    def counted(*args, **kw):
        calls.append(1)
        return real(*args, **kw)

    monkeypatch.setattr(module, name, counted)
    return calls


@needs_build
@pytest.mark.parametrize(
    "name", ["tracelens/b200__eager_trace.json.gz", "param/et_replay__linear_kineto.json.gz"]
)
def test_chunks_read_again_from_a_plain_file(name, monkeypatch, tmp_path):
    """A plain file's chunks are read again from the file once the text is cut (the text is let
    go): the same columns as msgspec's, and as the same trace read from gzip (held whole)."""
    import gzip

    path = CORPUS / name
    if not path.exists():
        pytest.skip(f"corpus trace missing: {path}")
    plain = tmp_path / "plain.json"
    plain.write_bytes(gzip.decompress(path.read_bytes()))
    monkeypatch.setattr(chunks, "CHUNK_BYTES", 1 << 16)
    monkeypatch.setenv("TRACEVIEW_WORKERS", "3")
    _serial_only(monkeypatch)
    calls = _count_calls(monkeypatch, compiled, "_scan_region")
    got = decoders.same_read(plain)
    assert calls and got.decoder == compiled.COMPILED
    with decoders.decoder(compiled.COMPILED):
        held_whole = decoders.outcome(path)
    assert len(calls) == 1  # the gzip file's text has no region to read again
    decoders.same_columns(held_whole.columns, got.columns, "columns")


def _many_events(n: int, name=lambda i: f"aten::op{i % 50}") -> bytes:
    events = [
        {"ph": "X", "cat": "cpu_op", "name": name(i), "pid": 1, "tid": 1, "ts": 1000 + 10 * i, "dur": 5}
        for i in range(n)
    ]
    return json.dumps({"traceEvents": events}).encode()


@needs_build
def test_a_cut_inside_a_string_reads_the_whole_region_again(monkeypatch, tmp_path):
    """Names holding ``},{`` make the fast cut land inside strings: msgspec refuses such a chunk,
    and the checked path needs the whole events text, read again from the file."""
    plain = tmp_path / "t.json"
    plain.write_bytes(_many_events(3000, lambda i: 'x"},{"y' * (i % 7)))
    monkeypatch.setattr(chunks, "CHUNK_BYTES", 1 << 12)
    monkeypatch.setenv("TRACEVIEW_WORKERS", "2")
    _serial_only(monkeypatch)
    calls = _count_calls(monkeypatch, compiled, "_scan_region")
    got = decoders.same_read(plain)
    assert calls and got.n_events == 3000


@needs_build
@pytest.mark.parametrize("change", ["written", "cut short"])
def test_a_file_that_changes_while_read_is_an_error(change, monkeypatch, tmp_path):
    """Chunks read again from a file that was written to meanwhile (its modification time
    moves), or cut short (a chunk's read meets the end), would mix two texts: the load stops
    with one line naming the file instead."""
    plain = tmp_path / "t.json"
    plain.write_bytes(_many_events(20_000))
    monkeypatch.setattr(chunks, "CHUNK_BYTES", 1 << 14)
    monkeypatch.setenv("TRACEVIEW_WORKERS", "1")
    real = compiled._chunk
    size = plain.stat().st_size

    def touch_then_scan(*args):
        if change == "written":
            os.utime(plain, ns=(1, 1))
        else:  # its time set back: the next chunk's read meets the end before the last look
            stat = plain.stat()
            os.truncate(plain, size // 2)
            os.utime(plain, ns=(stat.st_atime_ns, stat.st_mtime_ns))
        return real(*args)

    _serial_only(monkeypatch)
    monkeypatch.setattr(compiled, "_chunk", touch_then_scan)
    with decoders.decoder(compiled.COMPILED), pytest.raises(tv.TraceReadError) as err:
        decoders.read(plain)
    assert str(err.value) == f"{plain}: {compiled.CHANGED}"


@needs_build
def test_a_plain_file_is_not_held_with_its_columns(monkeypatch, tmp_path):
    """The text is let go once it is cut into chunks: the read's peak is the text or the
    columns, not the text and the chunks' columns together (as it is where the text has no
    region in a file to read chunks again from)."""
    plain = tmp_path / "t.json"
    text = _many_events(200_000)
    plain.write_bytes(text)
    monkeypatch.setattr(chunks, "CHUNK_BYTES", 1 << 20)
    _serial_only(monkeypatch)
    monkeypatch.setenv("TRACEVIEW_WORKERS", "1")

    def peak() -> int:
        return decoders.read_peak(plain, 200_000)

    with decoders.decoder(compiled.COMPILED):
        let_go = peak()
        monkeypatch.setattr(compiled, "region_of", lambda *args: None)
        held = peak()
    # here the columns' join is the peak (1.26x the text, against 1.74x with the text held: the
    # text and the chunks' columns, 0.74x); holding the text too would make it 2x or more
    assert let_go < held - 0.3 * len(text), (let_go / len(text), held / len(text))


@needs_build
def test_whole_trace_frames_identical():
    """Past the reader too: every frame of the loaded Trace, for a sample and a memory/stack trace."""
    corpus = [
        "tracelens/h100__gaunernst_bert-small-uncased__1016001.json.gz",
        "param/et_replay__linear_kineto.json.gz",
    ]
    paths = [
        ROOT / "sample_traces" / "naive.json.gz",
        *(CORPUS / name for name in corpus if (CORPUS / name).exists()),
    ]
    for path in paths:
        with decoders.decoder(compiled.PYTHON):
            a = tv.load(path, cache=False)
        with decoders.decoder(compiled.COMPILED):
            b = tv.load(path, cache=False)
        assert (a.stats["decoder"], b.stats["decoder"]) == (compiled.PYTHON, compiled.COMPILED)
        assert (a.info["decoder"], b.info["decoder"]) == (compiled.PYTHON, compiled.COMPILED)
        assert a.info["n_events"] == b.info["n_events"] == a.stats["n_events"] > 0
        for name in ("events", "kernels", "ops", "steps", "memory"):
            pd.testing.assert_frame_equal(getattr(a, name), getattr(b, name), obj=f"{path.name}: {name}")


@needs_build
def test_threads_of_a_notebook(tmp_path):
    """Loads from several Python threads at once (a notebook, a web server): no fork, same result."""
    path = ROOT / "sample_traces" / "sdpa_math.json.gz"
    want = tv.load(path, cache=False).events
    got: list = []
    threads = [threading.Thread(target=lambda: got.append(tv.load(path, cache=False))) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(got) == 3
    for trace in got:
        assert trace.stats["decoder"] == compiled.COMPILED
        pd.testing.assert_frame_equal(trace.events, want)


# ---------------------------------------------------------------- generated events

NUMBERS = st.one_of(
    st.from_regex(r"-?(0|[1-9][0-9]{0,19})(\.[0-9]{1,6})?([eE][+-]?[0-9]{1,3})?", fullmatch=True),
    st.sampled_from(
        [
            "4611686018427386",
            "4611686018427386.999",
            "4611686018427387",
            "-4611686018427387",
            "999999999999999999",
            "1000000000000000000",
            "9223372036854775808",
            "-0",
            "-0.0",
            "1e400",
            "0.0005",
            "1661203462598738.5",
            "4398046511104.001",
        ]
    ),
)
STRINGS = st.one_of(
    st.text(max_size=12).map(lambda s: json.dumps(s, ensure_ascii=False)),
    st.text(max_size=12).map(json.dumps),
    st.sampled_from(
        [
            '"[memory]"',
            '"\\u005bmemory]"',
            '"X"',
            '"\\ud83d\\ude00"',
            '"\\ud800"',
            '"\\udc00x"',
            '"\\u0000"',
            '"a\\/b\\"\\\\"',
            '"\\x"',
            '"\udcff"',  # raw bytes written with surrogateescape: 0xff, invalid UTF-8
            '"\udced\udca0\udc80"',  # a surrogate encoded in UTF-8
            '"\udcc0\udcaf"',  # an overlong '/'
            '"\udcf4\udc90\udc80\udc80"',  # past U+10FFFF
            '"\udce2\udc82"',  # cut short
            '"\xff\u20ac"',
            '"tab\there"',
            '"' + "k" * 40 + '"',
        ]
    ),
)
SCALARS = st.one_of(NUMBERS, STRINGS, st.sampled_from(["null", "true", "false"]))
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3).map(lambda xs: "[" + ",".join(xs) + "]"),
        st.lists(st.tuples(STRINGS, inner), max_size=3).map(
            lambda kv: "{" + ",".join(f"{k}:{v}" for k, v in kv) + "}"
        ),
    ),
    max_leaves=6,
)
PHASES = st.sampled_from(['"X"', '"s"', '"f"', '"t"', '"i"', '"I"', '"M"', '"B"', '""', "null", "1"])
ARG_KEYS = [
    "correlation", "External id", "external id", "device", "stream", "bytes", "Python id",
    "Python parent id", "Input Dims", "Input type", "Concrete Inputs", "Call stack", "Addr", "Bytes",
    "Total Allocated", "Total Reserved", "Device Type", "Device Id", "name", "Sequence number",
]  # fmt: skip
EVENT_KEYS = ["cat", "name", "pid", "tid", "ts", "dur", "id", "bp", "s", "cname"]
SPACE = st.sampled_from(["", "", " ", "\n  ", "\t"])


def _member(key: st.SearchStrategy, value: st.SearchStrategy) -> st.SearchStrategy:
    return st.tuples(SPACE, key, value).map(lambda t: f'{t[0]}"{t[1]}"{t[0]}:{t[0]}{t[2]}')


ARGS = st.lists(
    _member(st.sampled_from([*ARG_KEYS, "p\\u0068"]), st.one_of(SCALARS, VALUES)), max_size=5
).map(lambda ms: "{" + ",".join(ms) + "}")
EVENT = st.tuples(
    SPACE,
    PHASES,
    st.lists(
        _member(st.sampled_from([*EVENT_KEYS, "ph", "p\\u0068"]), st.one_of(SCALARS, VALUES)), max_size=6
    ),
    st.one_of(st.none(), ARGS, st.sampled_from(["null", "[]", '"x"'])),
    st.sampled_from(["", "", "", '"name":"[memory]",']),
).map(
    lambda t: (
        t[0]
        + "{"
        + t[4]
        + ",".join([f'"ph":{t[1]}', *t[2], *([f'"args":{t[3]}'] if t[3] is not None else [])])
        + "}"
    )
)
# what real traces hold: the scanner must take these itself
PLAIN = st.tuples(
    st.sampled_from(["X", "s", "f", "i", "M"]),
    st.text(st.characters(codec="utf-8"), max_size=10),
    st.integers(0, 2**40),
    st.integers(0, 4611686018427386),
    st.integers(0, 999),
).map(
    lambda t: json.dumps(
        {
            "ph": t[0],
            "name": t[1],
            "pid": t[2],
            "tid": str(t[2]),
            "ts": float(f"{t[3] % 2**42}.{t[4]:03d}") if t[4] % 2 else t[3],
            "dur": t[4],
            "args": {"External id": t[2], "Input Dims": [[t[4]]], "device": 0},
        },
        ensure_ascii=t[4] % 3 == 0,
    )
)
FUZZ = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def _write(tmp_path: Path, events: list[str], bare: bool) -> Path:
    body = "[" + ",".join(events) + "]"
    text = body if bare else '{"traceEvents":' + body + ',"schemaVersion":1}'
    path = tmp_path / "case.json"
    path.write_bytes(text.encode("utf-8", "surrogateescape"))
    return path


@needs_build
@FUZZ
@given(events=st.lists(EVENT, min_size=1, max_size=8), bare=st.booleans())
def test_generated_events_read_the_same(tmp_path, events, bare):
    decoders.same_read(_write(tmp_path, events, bare))


@needs_build
@FUZZ
@given(events=st.lists(PLAIN, min_size=1, max_size=8))
def test_plain_events_are_the_scanners(tmp_path, events):
    raw = decoders.same_read(_write(tmp_path, events, False))
    assert raw.decoder == compiled.COMPILED


TAKEN = [  # the scanner reads these itself
    '{"ph":"X","name":"a\\u00e9\\ud83d\\ude00\\"","ts":1661203462598738.125,"dur":0}',
    '{"ph":"X","ts":4611686018427386.999,"args":{"Input Dims":null,"device":"cuda:0","bytes":"7"}}',
    '{"ph":"i","name":"[memory]","ts":null,"args":{"Bytes":-8,"Addr":999999999999999999}}',
    '{"ph":"f","id":"9","pid":-1,"tid":"t","bp":null,"cat":null}',
    '{"ph":"M","name":[1,{"a":[true]}],"args":{"name":1.5}}',
    '{"ph":"C","args":{"unknown":1e400,"x":"\xff"}}',  # U+00FF, valid
    "{}",
]
BAILED = [  # the scanner leaves these to msgspec, whose result (or error) stands
    '{"ph":"X","ts":4611686018427387}',  # past the times both int and text paths agree on
    '{"ph":"X","ts":1.0005}',  # a 4th fraction digit: float and text paths round differently
    '{"ph":"X","ts":1e3}',
    '{"ph":"X","ts":"12.5"}',
    '{"ph":"X","pid":1.0}',
    '{"ph":"X","args":{"correlation":"3"}}',
    '{"ph":"X","args":{"Bytes":true}}',
    '{"ph":"X","args":{"bytes":1.5}}',
    '{"ph":"X","name":7}',
    '{"ph":"X","ph":"f"}',
    '{"p\\u0068":"X"}',
    '{"ph":"X","name":"\udcff"}',  # invalid UTF-8 (written with surrogateescape)
    '{"ph":"C","args":{"x":"\udcff"}}',  # msgspec skips it unchecked; the scanner bails
    '{"ph":"X","name":"\\ud800"}',
    '{"ph":"X","args":{"name":1e400}}',
    "[]",
    '{"ph":"X"},',
]


@needs_build
@pytest.mark.parametrize("event", TAKEN)
def test_taken_by_the_scanner(tmp_path, event):
    got = decoders.same_read(_write(tmp_path, ['{"ph":"X","name":"ok"}', event], False))
    assert got.decoder == compiled.COMPILED


@needs_build
@pytest.mark.parametrize("digits", range(1, 21))
def test_numbers_of_every_length_at_every_alignment(tmp_path, digits):
    """The scanner reads a number's digits 8 at a time, then its last 1-7 in one step where 8
    bytes are left: every length, shifted across an 8-byte word by the name before it, with
    every byte that can end it, the last one just before the end of the text."""
    rng = random.Random(digits)
    values = [int("9" * digits), 10 ** (digits - 1), rng.randrange(10 ** (digits - 1), 10**digits)]
    events = []
    for shift in range(8):
        for v in values:
            events += [
                f'{{"ph":"X","name":"{"n" * shift}","ts":{v % 10**16},"dur":{v % 10**7},"pid":{v}}}',
                f'{{"ph":"X","name":"{"n" * shift}","tid":-{v},"args":{{"External id":{v},"bytes":{v}}}}}',
                f'{{"ph":"f","id":{v} ,"pid":{v}\n}}',
                f'{{"ph":"X","ts":{v % 10**16}.5,"dur":{v % 10**12}.25,"args":{{"x":[{v}]}}}}',
            ]
    events.append(f'{{"ph":"X","pid":{values[0]}}}')  # the last digits are the text's last bytes but one
    got = decoders.same_read(_write(tmp_path, events, False))
    # past 15 digits a time can exceed what both time paths agree on, past 18 an int int64: bails
    assert got.decoder == compiled.COMPILED or digits > 15


@needs_build
@pytest.mark.parametrize("event", BAILED)
def test_left_to_msgspec_reads_the_same(tmp_path, event):
    got = decoders.same_read(_write(tmp_path, ['{"ph":"X","name":"ok"}', event], False))
    assert isinstance(got, Exception) or got.decoder != compiled.COMPILED


# ---------------------------------------------------------------- the build, the CLI, the fuzzer


def test_version_names_the_decoder(monkeypatch):
    out = subprocess.run(
        [sys.executable, "-m", "traceview", "--version"], capture_output=True, text=True, check=True
    ).stdout
    assert ("decoder: compiled" if decoders.BUILT else "decoder: python") in out
    env = {**os.environ, compiled.ENV: compiled.PYTHON}
    out = subprocess.run(
        [sys.executable, "-m", "traceview", "--version"], capture_output=True, text=True, check=True, env=env
    ).stdout
    assert "decoder: python (msgspec; " in out


def test_trace_stats_say_which_decoder_ran():
    with decoders.decoder(compiled.PYTHON):
        trace = tv.load(ROOT / "sample_traces" / "naive.json.gz", cache=False)
    assert trace.stats["decoder"] == compiled.PYTHON
    result = CliRunner().invoke(main, ["--version"])
    assert result.exit_code == 0 and "decoder:" in result.output


def _wheel(tmp_path: Path, env: dict) -> Path:
    """A wheel built from a clean copy of the project's files (no build/ folder, no built
    extension lying in the tree: what a fresh clone holds)."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    src = tmp_path / "src"
    for name in listed:
        if (ROOT / name).is_file() and not name.startswith(("tests/", "sample_traces/", "docs/")):
            (src / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, src / name)
    out = tmp_path / "wheel"
    pip = [sys.executable, "-m", "pip", "wheel", str(src), "--no-deps", "--no-build-isolation", "-q"]
    subprocess.run([*pip, "-w", str(out)], check=True, env=env, capture_output=True, cwd=tmp_path)
    (wheel,) = out.glob("traceview-*.whl")
    return wheel


@pytest.mark.skipif(shutil.which("cc") is None and shutil.which("gcc") is None, reason="no C compiler here")
def test_builds_without_a_compiler_and_reads_with_msgspec(tmp_path):
    """``pip install .`` where no C compiler runs: the package builds, without the scanner, and
    loads traces with msgspec."""
    env = {
        **os.environ,
        "CC": str(tmp_path / "no-such-compiler"),
        "LDSHARED": str(tmp_path / "no-such-linker"),
    }
    wheel = _wheel(tmp_path, env)
    names = zipfile.ZipFile(wheel).namelist()
    assert not [n for n in names if n.endswith((".so", ".pyd"))], names
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    code = (
        # an editable install of the project in this venv (pip install -e) adds a finder that
        # would find the tree walks' extension built in the source tree: drop it
        "import sys; sys.meta_path[:] = [f for f in sys.meta_path if 'editable' not in repr(f)]; "
        "import traceview as tv, traceview.read.compiled as c, traceview.trees as w; "
        "assert not c.built() and not w.compiled(); "
        f"t = tv.load({str(SAMPLES[0])!r}, cache=False); print(t.stats['decoder'], len(t.events))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(site)},
        cwd=tmp_path,
        check=True,
    ).stdout.split()
    assert out[0] == compiled.PYTHON and int(out[1]) > 0


@pytest.mark.skipif(shutil.which("cc") is None and shutil.which("gcc") is None, reason="no C compiler here")
def test_builds_with_a_compiler(tmp_path):
    wheel = _wheel(tmp_path, dict(os.environ))
    built = [n for n in zipfile.ZipFile(wheel).namelist() if n.endswith(".so")]
    assert [n for n in built if "_cscan" in n] and [n for n in built if "_ctree" in n], built


def test_fuzz_regressions_replay(tmp_path):
    """Every input the fuzzer ever crashed on, through the scanner and through both decoders."""
    cases = sorted((ROOT / "fuzz" / "regressions").glob("*"))
    for case in cases:
        text = case.read_bytes()
        if decoders.BUILT:
            from traceview.read._cscan import scan

            scan(text, 0, len(text))
            path = tmp_path / "case.json"
            path.write_bytes(b'{"traceEvents":[' + text + b"]}")
            decoders.same_read(path)


@pytest.mark.skipif(
    shutil.which("clang") is None, reason="clang not installed: the scanner is not fuzzed here"
)
def test_fuzz_the_scanner_under_sanitizers(tmp_path):
    """A bounded libFuzzer run under ASan and UBSan (fuzz/run.sh): no crash, no leak, no UB."""
    seconds = os.environ.get("TRACEVIEW_SCAN_FUZZ_SECONDS", "30")
    proc = subprocess.run(
        ["bash", str(ROOT / "fuzz" / "run.sh"), seconds, str(tmp_path)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHON": sys.executable},
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "no crash" in proc.stdout


@needs_build
def test_bare_array_with_whitespace_around_it(tmp_path):
    """A bare array may sit in any amount of whitespace (skipped by C and numpy, not a Python loop)."""
    path = tmp_path / "bare.json"
    body = b'[{"ph":"X","name":"a","ts":1,"dur":1}]'
    path.write_bytes(b" \n\t\r" * 300_000 + body + b"\r\n \t" * 600_000)
    assert decoders.same_read(path).decoder == compiled.COMPILED
