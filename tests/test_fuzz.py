"""Fuzz the loader with damaged traces (issue #8).

Every case must end in a loaded ``Trace`` or a ``traceview.TraceviewError``
whose message is one line naming the file: never another exception, a hang or
runaway memory. Inputs: a hand-made trace, the project's sample traces and a
few small real corpus traces, damaged by truncation, byte flips/deletions,
non-UTF-8 bytes, structural edits (dropped keys, wrong types, huge/NaN/Infinity
numbers, string timestamps, duplicates, reordering, orphan kernels/launches),
deep nesting, and hostile text in names (control, bidi, formula and markup
characters: a name that loads keeps its exact text). The command line is fuzzed
in ``test_fuzz_cli.py``.

Sized to run in well under two minutes on two cores. Set
``TRACEVIEW_FUZZ_EXAMPLES`` (default 25 per test) to fuzz longer, e.g. 500 in
a nightly job.
"""

from __future__ import annotations

import atexit
import copy
import functools
import gzip
import json
import math
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path

import decoders
import pytest
from corpus import CORPUS
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import traceview as tv

SAMPLES = Path(__file__).resolve().parents[1] / "sample_traces"
# A few small real traces (< 500 KB of JSON), from different writers.
SMALL_CORPUS = (
    "hta/critical_path__alexnet__benchmark_result_2869224_1695835535_trace.json.gz",
    "kineto/tb_plugin_test__gpu_metrics_input.json.gz",
    "rocm/hta__mi250_minitoy_train_ROCm6_2_kineto.json.gz",
    "tokenomics/trace0.json.gz",
    "kineto/docs_traces__before_fix_trace.json.gz",
)
EXAMPLES = int(os.environ.get("TRACEVIEW_FUZZ_EXAMPLES", "25"))
CASE_SECONDS = 30  # hard per-case guard (SIGALRM); the hypothesis deadline is the soft one
MEMORY_GROWTH = 1 << 30  # peak RSS may not grow by more than this across the fuzz cases

FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=timedelta(seconds=10),
    derandomize=False,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.function_scoped_fixture,
    ],
)


# ---------------------------------------------------------------- the inputs


def _event(**kw) -> dict:
    ev = {
        "ph": "X",
        "cat": "cpu_op",
        "name": "aten::mm",
        "pid": 1,
        "tid": 1,
        "ts": 1000,
        "dur": 50,
        "args": {"External id": 1, "Input Dims": [[2, 3], [3, 4]]},
    }
    ev.update(kw)
    return ev


def handmade() -> dict:
    """A tiny but complete trace: step, op, launch, kernel, flow, memcpy, metadata on both sides."""
    return {
        "schemaVersion": 1,
        "deviceProperties": [{"id": 0, "name": "Fake GPU", "totalGlobalMem": 1 << 34}],
        "traceEvents": [
            _event(cat="user_annotation", name="ProfilerStep#3", ts=900, dur=400, args={}),
            _event(),
            _event(cat="cuda_runtime", name="cudaLaunchKernel", ts=1010, dur=5, args={"correlation": 7}),
            _event(
                cat="kernel",
                name="sgemm_128x64",
                pid=0,
                tid=7,
                ts=1100,
                dur=20,
                args={"correlation": 7, "device": 0, "stream": 7, "External id": 1},
            ),
            _event(
                cat="gpu_memcpy",
                name="Memcpy HtoD",
                pid=0,
                tid=7,
                ts=1130,
                dur=3,
                args={"correlation": 8, "bytes": 4096},
            ),
            {"ph": "s", "cat": "ac2g", "id": 7, "pid": 1, "tid": 1, "ts": 1010, "name": "ac2g"},
            {"ph": "f", "bp": "e", "cat": "ac2g", "id": 7, "pid": 0, "tid": 7, "ts": 1100, "name": "ac2g"},
            {"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "args": {"name": "main"}},
            {"ph": "i", "s": "g", "name": "Record Window End", "pid": "", "tid": "", "ts": 5000},
        ],
        "traceName": "handmade.json",
        "baseTimeNanoseconds": 1_700_000_000_000_000_000,
    }


@functools.cache
def seeds() -> tuple[tuple[str, bytes], ...]:
    """(name, JSON text) of every base trace available here."""
    out = [("handmade", json.dumps(handmade(), indent=1).encode())]
    for path in sorted(SAMPLES.glob("*.json.gz"))[:3] if SAMPLES.is_dir() else []:
        out.append((path.name, gzip.decompress(path.read_bytes())))
    for rel in SMALL_CORPUS:
        path = CORPUS / rel
        if path.is_file():
            text = gzip.decompress(path.read_bytes())
            if len(text) < 500_000:
                out.append((path.name, text))
    return tuple(out)


@functools.cache
def seed_docs() -> tuple[tuple[str, dict], ...]:
    """Decoded seeds, trimmed to 300 events so that structural edits stay fast."""
    docs = []
    for name, text in seeds():
        doc = json.loads(text)
        if isinstance(doc, dict) and isinstance(doc.get("traceEvents"), list):
            doc["traceEvents"] = doc["traceEvents"][:300]
            docs.append((name, doc))
    return tuple(docs)


# ---------------------------------------------------------------- the oracle


class CaseTimeout(BaseException):
    """Raised by the alarm; a BaseException so that no ``except Exception`` in the loader hides it."""


@contextmanager
def time_limit(seconds: float):
    if not hasattr(signal, "setitimer") or signal.getsignal(signal.SIGALRM) not in (signal.SIG_DFL, None):
        yield
        return

    def expire(signum, frame):
        raise CaseTimeout(f"case ran longer than {seconds}s")

    try:
        old = signal.signal(signal.SIGALRM, expire)
    except ValueError:  # not the main thread: no guard, the hypothesis deadline still reports
        yield
        return
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


_WORK = Path(tempfile.mkdtemp(prefix="traceview-fuzz-"))
atexit.register(shutil.rmtree, _WORK, True)
_BASE_RSS = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def write_case(data: bytes, name: str = "case.json") -> Path:
    path = _WORK / name
    path.write_bytes(data)
    return path


def outcome(path: Path, **kw):
    """Load; return the Trace or the TraceviewError. Anything else fails the test. The
    compiled decoder, where built, must read the case exactly as msgspec does (issue 23)."""
    if decoders.BUILT:
        decoders.same_read(path, salvage=kw.get("salvage", False))
    try:
        with time_limit(CASE_SECONDS):
            result = tv.load(path, cache=False, **kw)
    except tv.TraceviewError as exc:
        message = str(exc)
        assert "\n" not in message and "\r" not in message, f"multi-line message: {message!r}"
        assert str(path) in message, f"message does not name the file: {message!r}"
        result = exc
    else:
        assert isinstance(result, tv.Trace)
        for warning in result.warnings:
            assert isinstance(warning, str) and "\n" not in warning
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    assert rss - _BASE_RSS < MEMORY_GROWTH, f"peak memory grew by {(rss - _BASE_RSS) >> 20} MiB"
    return result


def both_modes(path: Path):
    return outcome(path), outcome(path, salvage=True)


@functools.cache
def _full(name: str) -> tv.Trace:
    text = dict(seeds())[name]
    return tv.load(write_case(text, f"full-{abs(hash(name))}.json"), cache=False)


seed_names = st.sampled_from([name for name, _ in seeds()])
doc_index = st.integers(min_value=0, max_value=max(len(seed_docs()) - 1, 0))


# ---------------------------------------------------------------- byte-level damage


@FUZZ
@given(name=seed_names, frac=st.floats(min_value=0.0, max_value=1.0), compress=st.booleans())
def test_truncated_json(name, frac, compress):
    """The usual crash: the text stops mid-file. Without salvage: a 'truncated' error;
    with salvage: a prefix of the real events and a warning, or a clear error."""
    text = dict(seeds())[name]
    cut = text[: int(len(text) * frac)]
    data = gzip.compress(cut, compresslevel=1) if compress else cut
    path = write_case(data, "cut.json.gz" if compress else "cut.json")
    plain, salvaged = both_modes(path)
    if not cut.strip():
        assert isinstance(plain, tv.TraceviewError) and "empty" in str(plain)
        return
    if cut.rstrip() != text.rstrip():
        assert isinstance(plain, tv.TraceReadError) and "truncated" in str(plain)
        if isinstance(salvaged, tv.Trace):
            assert salvaged.warnings and any("salvaged" in w for w in salvaged.warnings)
            _assert_prefix(salvaged, _full(name))
        else:
            assert "cannot salvage" in str(salvaged)


def _assert_prefix(part: tv.Trace, full: tv.Trace) -> None:
    """The salvaged events are the first events of the intact trace, unchanged."""
    n = len(part.events)
    assert n <= len(full.events)
    for col in ("name", "cat", "dur_ns", "pid", "tid", "correlation"):
        got = part.events[col].astype(object).tolist()
        want = full.events[col].iloc[:n].astype(object).tolist()
        assert got == want, col


@FUZZ
@given(name=seed_names, frac=st.floats(min_value=0.05, max_value=0.999))
def test_truncated_gzip_stream(name, frac):
    """The gzip stream itself is cut (the writer died mid-compression)."""
    blob = gzip.compress(dict(seeds())[name])
    path = write_case(blob[: max(3, int(len(blob) * frac))], "cut-stream.json.gz")
    plain, salvaged = both_modes(path)
    assert isinstance(plain, tv.TraceReadError) and "truncated" in str(plain)
    if isinstance(salvaged, tv.Trace):
        assert any("gzip stream was cut" in w for w in salvaged.warnings)
        _assert_prefix(salvaged, _full(name))


@FUZZ
@given(name=seed_names, data=st.data(), gz=st.booleans())
def test_flipped_deleted_inserted_bytes(name, data, gz):
    text = bytearray(dict(seeds())[name])
    if gz:
        text = bytearray(gzip.compress(bytes(text), compresslevel=1))
    for _ in range(data.draw(st.integers(1, 6), label="edits")):
        if not text:
            break
        at = data.draw(st.integers(0, len(text) - 1), label="at")
        kind = data.draw(st.sampled_from(["flip", "delete", "insert", "set"]), label="kind")
        if kind == "flip":
            text[at] ^= 1 << data.draw(st.integers(0, 7), label="bit")
        elif kind == "delete":
            del text[at : at + data.draw(st.integers(1, 64), label="n")]
        elif kind == "insert":
            text[at:at] = data.draw(st.binary(min_size=1, max_size=8), label="bytes")
        else:
            text[at] = data.draw(st.sampled_from(b'{}[]",:\\\x00\xff\xc3'), label="byte")
    both_modes(write_case(bytes(text), "flipped.json.gz" if gz else "flipped.json"))


@FUZZ
@given(name=seed_names, data=st.data())
def test_non_utf8_inside_strings(name, data):
    """Invalid UTF-8 inside a string value: the event is dropped and counted, not the trace lost."""
    text = dict(seeds())[name]
    quotes = [i for i in range(min(len(text), 200_000)) if text[i] == 0x22][:5000]
    at = data.draw(st.sampled_from(quotes), label="quote") + 1
    junk = data.draw(
        st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\xf8\x88\x80\x80\x80", b"\xe2\x82"]),
        label="junk",
    )
    both_modes(write_case(text[:at] + junk + text[at:], "utf8.json"))


# ---------------------------------------------------------------- structural damage

JUNK = st.one_of(
    st.none(),
    st.booleans(),
    st.text(max_size=12),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from(
        [
            0,
            -1,
            2**62,
            2**63 - 1,
            2**63,
            2**64,
            -(2**63),
            10**30,
            1e300,
            -1e300,
            1e-300,
            math.nan,
            math.inf,
            -math.inf,
            0.1,
            1.5e15 + 0.001,
        ]
    ),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)
FIELDS = ["ph", "cat", "name", "pid", "tid", "ts", "dur", "id", "bp", "args", "s"]
ARG_FIELDS = ["correlation", "External id", "external id", "device", "stream", "bytes", "name", "Input Dims"]


def _mutate(doc: dict, data) -> None:
    events = doc["traceEvents"]
    for _ in range(data.draw(st.integers(1, 8), label="edits")):
        kind = data.draw(
            st.sampled_from(
                [
                    "drop_key",
                    "wrong_type",
                    "arg_wrong_type",
                    "ts_string",
                    "duplicate",
                    "shuffle",
                    "reverse",
                    "orphan_kernels",
                    "orphan_launches",
                    "empty",
                    "meta",
                    "not_object",
                    "drop_top",
                ]
            ),
            label="kind",
        )
        if not events and kind not in ("meta", "empty", "drop_top"):
            continue
        i = data.draw(st.integers(0, max(len(events) - 1, 0)), label="i")
        ev = events[i] if events else None
        if kind == "drop_key" and isinstance(ev, dict) and ev:
            ev.pop(data.draw(st.sampled_from(sorted(ev)), label="key"))
        elif kind == "wrong_type" and isinstance(ev, dict):
            ev[data.draw(st.sampled_from(FIELDS), label="field")] = data.draw(JUNK, label="value")
        elif kind == "arg_wrong_type" and isinstance(ev, dict):
            args = ev.setdefault("args", {})
            if isinstance(args, dict):
                args[data.draw(st.sampled_from(ARG_FIELDS), label="arg")] = data.draw(JUNK, label="value")
        elif kind == "ts_string" and isinstance(ev, dict) and "ts" in ev:
            ev["ts"] = str(ev["ts"])
        elif kind == "duplicate":
            events.extend(copy.deepcopy(events[i : i + data.draw(st.integers(1, 50), label="n")]))
        elif kind == "shuffle":
            seed = data.draw(st.integers(0, 2**32 - 1), label="seed")
            import random

            random.Random(seed).shuffle(events)
        elif kind == "reverse":
            events.reverse()
        elif kind in ("orphan_kernels", "orphan_launches"):
            drop = ("cuda_runtime", "cuda_driver") if kind == "orphan_kernels" else ("kernel", "gpu_memcpy")
            events[:] = [e for e in events if not (isinstance(e, dict) and e.get("cat") in drop)]
        elif kind == "empty":
            events.clear()
        elif kind == "meta":
            doc[
                data.draw(
                    st.sampled_from(
                        ["baseTimeNanoseconds", "deviceProperties", "traceview", "schemaVersion", "traceName"]
                    ),
                    label="key",
                )
            ] = data.draw(JUNK)
        elif kind == "not_object":
            events[i] = data.draw(JUNK, label="value")
        elif kind == "drop_top":
            doc.pop(data.draw(st.sampled_from(sorted(doc)), label="key"), None)


@FUZZ
@given(i=doc_index, data=st.data())
def test_structural_damage(i, data):
    if not seed_docs():
        pytest.skip("no seeds")
    _name, doc = seed_docs()[i]
    doc = copy.deepcopy(doc)
    _mutate(doc, data)
    text = json.dumps(doc, allow_nan=True).encode()  # NaN / Infinity tokens on purpose
    both_modes(write_case(text, "structural.json"))


JSON_VALUES = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(2**70), max_value=2**70),
        st.floats(allow_nan=True, allow_infinity=True),
        st.text(max_size=8),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=12,
)
EVENT = st.fixed_dictionaries(
    {},
    optional={
        "ph": st.one_of(st.sampled_from(["X", "B", "E", "i", "s", "f", "t", "M", "C", ""]), JSON_VALUES),
        "cat": st.one_of(
            st.sampled_from(
                [
                    "cpu_op",
                    "kernel",
                    "cuda_runtime",
                    "user_annotation",
                    "ac2g",
                    "gpu_memcpy",
                    "python_function",
                ]
            ),
            JSON_VALUES,
        ),
        "name": st.one_of(
            st.sampled_from(
                ["ProfilerStep#1", "ProfilerStep#99999999999999999999", "aten::add", "cudaLaunchKernel", "k"]
            ),
            JSON_VALUES,
        ),
        "pid": st.one_of(
            st.integers(-3, 3), st.sampled_from(["stream 7", "99999999999999999999999"]), JSON_VALUES
        ),
        "tid": st.one_of(
            st.integers(-3, 3), st.sampled_from(["stream 99999999999999999999", ""]), JSON_VALUES
        ),
        "ts": st.one_of(st.integers(-(2**64), 2**64), st.floats(), st.text(max_size=20), JSON_VALUES),
        "dur": st.one_of(st.integers(-(2**64), 2**64), st.floats(), JSON_VALUES),
        "id": JSON_VALUES,
        "args": st.one_of(st.dictionaries(st.sampled_from(ARG_FIELDS), JSON_VALUES, max_size=4), JSON_VALUES),
    },
)


@FUZZ
@given(
    events=st.lists(st.one_of(EVENT, JSON_VALUES), max_size=30),
    meta=st.dictionaries(
        st.sampled_from(["baseTimeNanoseconds", "deviceProperties", "traceview", "schemaVersion"]),
        JSON_VALUES,
        max_size=3,
    ),
    bare=st.booleans(),
)
def test_generated_events(events, meta, bare):
    """Events made of arbitrary JSON values in every field traceview reads."""
    doc = events if bare else {**meta, "traceEvents": events}
    both_modes(write_case(json.dumps(doc, allow_nan=True).encode(), "generated.json"))


# ---------------------------------------------------------------- whole-file cases


@pytest.mark.parametrize(
    "text",
    [
        b"",
        b"   \n",
        b"\x00" * 64,
        b"null",
        b"true",
        b"0",
        b'"str"',
        b"[1,2,3]",
        b"[]",
        b"{}",
        b'{"foo": 1}',
        b'{"traceEvents": {}}',
        b'{"traceEvents": null}',
        b'{"traceEvents": []}',
        b'{"traceEvents": [], "traceEvents": [{"ph": "X"}]}',
        b'\xef\xbb\xbf{"traceEvents": []}',
        '{"traceEvents": []}'.encode("utf-16"),
        b'{"traceEvents": [{"ph": "X", "ts": NaN}]}',
        b'{"traceEvents": [], "x": 1e400}',
        b'{"traceEvents": [], "x": "\xff"}',
        b'{"traceEvents": [{"ph": "X", "ts": 1e400, "dur": -1e400}]}',
    ],
    ids=repr,
)
def test_small_whole_files(text):
    both_modes(write_case(text, "whole.json"))
    both_modes(write_case(gzip.compress(text), "whole.json.gz"))


DEEP_SCRIPT = textwrap.dedent("""
    import resource, sys, pathlib, gzip
    resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))
    import traceview as tv
    d = pathlib.Path(sys.argv[1])
    n = 100_000
    cases = {
        "arrays": b"[" * n + b"]" * n,
        "objects": b'{"a":' * n + b"1" + b"}" * n,
        "in_event": b'{"traceEvents":[{"ph":"X","args":' + b"[" * n + b"]" * n + b"}]}",
        "in_meta": b'{"x":' + b"[" * n + b"]" * n + b',"traceEvents":[]}',
        "unclosed": b'{"traceEvents":[' + b"[" * n,
        "deep_then_cut": b'{"traceEvents":[{"ph":"X"},{"a":' + b"[" * n,
    }
    for name, text in cases.items():
        for gz in (False, True):
            path = d / (name + (".json.gz" if gz else ".json"))
            path.write_bytes(gzip.compress(text) if gz else text)
            for salvage in (False, True):
                try:
                    t = tv.load(path, salvage=salvage, cache=False)
                    res = "trace %d" % len(t.events)
                except tv.TraceviewError as exc:
                    msg = str(exc)
                    assert "\\n" not in msg and str(path) in msg, msg
                    res = "error"
                print(name, gz, salvage, res)
    print("OK")
""")


def test_deep_nesting_in_subprocess(tmp_path):
    """100k nested arrays/objects: no RecursionError, no segfault (run apart so a crash cannot take
    the test session down), under a 4 GiB address-space limit and a time limit."""
    proc = subprocess.run(
        [sys.executable, "-c", DEEP_SCRIPT, str(tmp_path)], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip().endswith("OK"), proc.stdout[-2000:]


# ---------------------------------------------------------------- hostile text (issue 22)

HOSTILE = st.one_of(
    st.sampled_from(
        [
            "\x1b]0;title\x07",
            "\x1b[2J",
            "ok\rEVIL",
            "abc\u202edcba",
            "\u2066x\u2069",
            "a\nb",
            '=HYPERLINK("http://x","y")',
            "+cmd|' /C calc'!A0",
            "@SUM(1)",
            "$\\frac{a}{b}$",
            "<script>alert(1)</script>",
            "a|b",
            "\x00",
            "\x85",
            "\ufeff",
            "x" * 5000,
            "",
            " ",
        ]
    ),
    st.text(alphabet=st.characters(categories=["Cc", "Cf", "Zl", "Zp", "Co", "So"]), max_size=12),
    st.text(max_size=12),
)


@FUZZ
@given(i=doc_index, data=st.data(), raw=st.booleans())
def test_hostile_names(i, data, raw):
    """Control, bidi, formula and markup text in names, categories and args: the trace loads (or
    fails with a one-line error), and a name that loads keeps its exact text (JSON is data)."""
    if not seed_docs():
        pytest.skip("no seeds")
    _, doc = seed_docs()[i]
    doc = copy.deepcopy(doc)
    named = [
        e
        for e in doc["traceEvents"]
        if isinstance(e, dict) and isinstance(e.get("name"), str) and e.get("ph") == "X"
    ]
    if not named:
        return
    changed = {}
    for _ in range(data.draw(st.integers(1, 5), label="edits")):
        ev = data.draw(st.sampled_from(named), label="event")
        text = data.draw(HOSTILE, label="text")
        field = data.draw(st.sampled_from(["name", "name", "cat", "arg"]), label="field")
        if field == "name":
            ev["name"] = text
            changed.setdefault(id(ev), text)
            changed[id(ev)] = text if changed[id(ev)] is not None else None
        else:  # the event may now be dropped (a category it does not have): its name proves nothing
            changed[id(ev)] = None
            if field == "arg" and isinstance(ev.get("args"), dict):
                ev["args"][data.draw(st.sampled_from(ARG_FIELDS), label="arg")] = text
            else:
                ev[field] = text
    blob = json.dumps(doc, ensure_ascii=not raw).encode()  # st.text draws no lone surrogate: valid UTF-8
    plain, _ = both_modes(write_case(blob, "hostile.json"))
    if isinstance(plain, tv.Trace):
        names = set(plain.events["name"].astype(object).tolist())
        lost = [t for t in changed.values() if t is not None and t not in names]
        assert not lost, f"names not kept exactly: {lost[:3]!r}"
