"""Resource limits by default (issue 22, item 6): a gzip bomb is refused early and in bounded
memory, and a hostile kernel name costs bounded work.

The CLI runs in a real subprocess under an address-space limit (``RLIMIT_AS``), so "bounded
memory" is enforced by the kernel, not estimated; times are only loose hang guards (speed
itself belongs in the benchmarks).
"""

from __future__ import annotations

import gzip
import json
import resource
import struct
import subprocess
import sys
import time
import zlib

import pytest
from click.testing import CliRunner
from corpus import SKIP_REASON, corpus_files

import traceview as tv
from traceview import limits
from traceview.analyses.wording.names import normalise_kernel_name, readable_kernel_name
from traceview.cli import main
from traceview.read.source import DEFAULT_MAX_RATIO, RATIO_FLOOR, read_bytes, read_source

MEMORY = 3 << 29  # 1.5 GiB of address space: a fresh `python -m traceview` needs ~0.4 GiB of it
HANG = 60  # seconds: a subprocess past this is killed and the test fails
BOMB_TEXT = 2 << 30  # what the bomb expands to


def _cli(*args, timeout: float = HANG) -> tuple[subprocess.CompletedProcess, float]:
    """``python -m traceview ARGS`` under the memory cap; (result, wall seconds)."""

    def cap():
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY, MEMORY))

    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "traceview", *map(str, args)],
        capture_output=True,
        text=True,
        preexec_fn=cap,
        timeout=timeout,
    )
    return proc, time.perf_counter() - start


def _one_line_error(proc, path, words: str) -> str:
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert lines[0].startswith(f"traceview: error: {path}: ") and words in lines[0], lines[0]
    return lines[0]


def _gzip_of_zeros(path, prefix: bytes, zeros: int) -> None:
    """A valid one-member gzip file of ``prefix`` then ``zeros`` zero bytes, made in seconds:
    after a full flush deflate forgets its history, so every 16 MiB block of zeros compresses
    to the same bytes, written once and repeated; the trailer's CRC is computed honestly."""
    block = 16 << 20
    assert zeros % block == 0
    c = zlib.compressobj(9, zlib.DEFLATED, 31)
    head = c.compress(prefix) + c.flush(zlib.Z_FULL_FLUSH)
    body = c.compress(bytes(block)) + c.flush(zlib.Z_FULL_FLUSH)
    crc, zero = zlib.crc32(prefix), bytes(block)
    with open(path, "wb") as fh:
        fh.write(head)
        for _ in range(zeros // block):
            fh.write(body)
            crc = zlib.crc32(zero, crc)
        fh.write(b"\x03\x00")  # a final, empty, fixed-Huffman block
        fh.write(struct.pack("<II", crc, (len(prefix) + zeros) & 0xFFFFFFFF))


@pytest.fixture(scope="module")
def bomb(tmp_path_factory):
    """2 GiB of zeros after the start of a trace, ~2 MB of gzip (~1000x, as deflate allows)."""
    path = tmp_path_factory.mktemp("bomb") / "bomb.json.gz"
    _gzip_of_zeros(path, b'{"traceEvents": [', BOMB_TEXT)
    return path


def test_the_bomb_is_a_real_gzip_file(bomb):
    d = zlib.decompressobj(wbits=31)
    first = d.decompress(bomb.read_bytes()[:4096], 1 << 20)
    assert first.startswith(b'{"traceEvents": [\0\0') and bomb.stat().st_size < 2_200_000


def _short_of_memory() -> bool:
    avail = limits.available_memory()
    return avail is not None and avail < 2 << 30


# ---------------------------------------------------------------- the gzip bomb


def test_gzip_bomb_refused_by_default_early_and_in_bounded_memory(bomb):
    """Found: a .gz expanding to 20 GiB was inflated up to the memory guard (5.9-8.1 GiB,
    23-43 s) before it was refused. Now the ratio stops it after ~64 MiB of text."""
    if _short_of_memory():
        pytest.skip("this machine has under 2 GiB available now: the memory guard would answer first")
    proc, wall = _cli("summary", "--no-cache", bomb)
    line = _one_line_error(proc, bomb, f"expands more than {DEFAULT_MAX_RATIO}x")
    assert "gzip bomb" in line and "--max-ratio N raises the limit" in line
    assert wall < 30  # a couple of seconds on a quiet machine: here only a hang guard


def test_gzip_bomb_stops_at_max_size_in_bounded_memory(bomb):
    proc, _ = _cli("summary", "--no-cache", "--max-ratio", "100000", "--max-size", "100", bomb)
    _one_line_error(proc, bomb, "decompresses to more than the 100.0 MiB size limit")


def test_gzip_bomb_stops_at_the_memory_guard_while_inflating(bomb):
    """With the ratio raised and no --max-size, the memory guard (which sees the address-space
    limit) stops the stream while it inflates: a one-line refusal, not a MemoryError."""
    proc, _ = _cli("summary", "--no-cache", "--max-ratio", "100000", bomb)
    _one_line_error(proc, bomb, "too large for this machine: needs at least about")


def test_endless_special_file_stops_at_the_memory_guard():
    """/dev/zero has no size: it is read in chunks until the memory guard, not to 16 GiB."""
    proc, _ = _cli("summary", "--no-cache", "/dev/zero")
    _one_line_error(proc, "/dev/zero", "too large for this machine")


def test_max_ratio_is_a_usage_error_below_one(bomb):
    result = CliRunner().invoke(main, ["summary", "--max-ratio", "0", str(bomb)])
    assert result.exit_code == 2 and "--max-ratio" in result.output


# ---------------------------------------------------------------- a legitimate high ratio


def _event(**kw) -> dict:
    ev = {
        "ph": "X",
        "cat": "cpu_op",
        "name": "aten::mm",
        "pid": 1,
        "tid": 1,
        "ts": 1000,
        "dur": 50,
        "args": {},
    }
    ev.update(kw)
    return ev


@pytest.fixture(scope="module")
def padded(tmp_path_factory):
    """A valid trace whose text is mostly whitespace (legal JSON): 68 MiB that gzip packs
    ~1000x, so it passes RATIO_FLOOR and the default ratio. Returns (path, text)."""
    events = [json.dumps(_event(ts=1000 * i)).encode() for i in range(3)]
    text = b'{"traceEvents": [' + (b"," + b" " * (34 << 20)).join(events) + b"]}"
    path = tmp_path_factory.mktemp("padded") / "padded.json.gz"
    path.write_bytes(gzip.compress(text, compresslevel=9))
    assert len(text) > RATIO_FLOOR and len(text) > DEFAULT_MAX_RATIO * path.stat().st_size
    return path, text


def test_high_ratio_trace_loads_when_the_user_raises_the_ratio(padded, tmp_path):
    path, text = padded
    with pytest.raises(tv.TraceReadError, match=r"expands more than 200x .*--max-ratio N raises the limit"):
        tv.load(path, cache=False)
    assert read_source(str(path), max_ratio=2000).data == text  # inflated in many steps, byte for byte
    trace = tv.load(path, cache=False, max_ratio=2000)
    assert trace.stats["n_events"] == 3
    result = CliRunner().invoke(
        main, ["summary", "--no-cache", "--max-ratio", "2000", "--format", "json", str(path)]
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["kind"] == "summary"


def test_ratio_limit_holds_for_a_cached_trace(padded, tmp_path):
    """Loaded once with the ratio raised (and cached), the same file is still refused at the
    default ratio: a limit does not depend on what happens to be in the cache."""
    path, _ = padded
    cache = tmp_path / "cache"
    tv.load(path, cache=cache, max_ratio=2000)
    assert tv.load(path, cache=cache, max_ratio=2000).stats["n_events"] == 3
    with pytest.raises(tv.TraceReadError, match="expands more than 200x"):
        tv.load(path, cache=cache)


def test_small_files_are_never_refused_for_their_ratio(tmp_path):
    """Under RATIO_FLOOR of text the ratio is not checked: a tiny, very compressible trace loads."""
    text = b'{"traceEvents": [' + json.dumps(_event()).encode() + b" " * (4 << 20) + b"]}"
    path = tmp_path / "small.json.gz"
    path.write_bytes(gzip.compress(text, compresslevel=9))
    assert len(text) > DEFAULT_MAX_RATIO * path.stat().st_size
    assert tv.load(path, cache=False).stats["n_events"] == 1


def _events_through_a_pipe(tmp_path, write) -> int:
    """The events count of a trace loaded from a FIFO that ``write(fifo)`` fills on a thread."""
    import os
    import threading

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    writer = threading.Thread(target=write, args=(fifo,))
    writer.start()
    try:
        return tv.load(fifo, cache=False).stats["n_events"]
    finally:
        writer.join(timeout=10)


def test_gzip_through_a_pipe(tmp_path):
    """A gzip trace on a pipe (``<(cat t.json.gz)``): its magic bytes are read once, not sought back to."""
    data = gzip.compress(json.dumps({"traceEvents": [_event()]}).encode())
    assert _events_through_a_pipe(tmp_path, lambda fifo: fifo.write_bytes(data)) == 1


def test_gzip_magic_split_across_pipe_writes(tmp_path):
    """The two magic bytes written one at a time: a raw read of a pipe returns what is there,
    so the head is read until it has both (else the gzip file reads as plain text)."""
    import time

    data = gzip.compress(json.dumps({"traceEvents": [_event()]}).encode())

    def write(fifo):
        with open(fifo, "wb", buffering=0) as fh:
            fh.write(data[:1])
            time.sleep(0.2)  # the reader is blocked in its first read by now, and gets one byte
            fh.write(data[1:])

    assert _events_through_a_pipe(tmp_path, write) == 1


def test_a_plain_file_is_held_once(tmp_path):
    """Reading a plain trace holds its text once: a buffered reader's read() joined its buffer
    to the rest, and ``strip()`` (is it empty?) and ``lstrip()`` (does it start with "{"?)
    copied all of a text with whitespace around it (real traces end in a newline): each a
    second copy of the whole file at the peak of memory."""
    import tracemalloc

    from traceview.read import compiled, read

    text = b' {"traceEvents": [' + json.dumps(_event()).encode() + b" " * (32 << 20) + b"]}\n"
    path = tmp_path / "t.json"
    path.write_bytes(text)
    tracemalloc.start()
    try:
        data = read_source(str(path)).data
        peak_source = tracemalloc.get_traced_memory()[1]
        del data
        tracemalloc.reset_peak()
        raw = read(str(path))
        peak_read = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert raw.n_events == 1
    assert peak_source < len(text) + (1 << 20), peak_source / len(text)
    if compiled.available():  # msgspec's chunks are copies of the text: the compiled decoder's are not
        # decoding adds bounded working memory (blocks of the whitespace run), never a copy
        assert peak_read < len(text) + (16 << 20), peak_read / len(text)


def test_a_gzip_file_is_held_once(tmp_path):
    """A gzip trace's text is the bytearray it was inflated into, handed on as it is: ``bytes()``
    of it was a second copy of the whole text at the peak of memory. What remains is the
    bytearray's headroom as it grows and one inflate step (INFLATE_STEP) of output."""
    import tracemalloc

    from traceview.read.source import INFLATE_STEP

    text = b'{"traceEvents": [' + json.dumps(_event()).encode() + b" " * (48 << 20) + b"]}\n"
    path = tmp_path / "t.json.gz"
    path.write_bytes(gzip.compress(text, compresslevel=1))
    tracemalloc.start()
    try:
        data = read_source(str(path), max_ratio=None).data
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert data == text
    assert peak < 1.15 * len(text) + INFLATE_STEP, peak / len(text)
    again = read_bytes(str(path), max_ratio=None)  # the public function still gives bytes
    assert type(again) is bytes and again == text


@pytest.mark.skipif(not corpus_files(), reason=SKIP_REASON)
def test_corpus_ratios_are_far_below_the_default():
    """The default's justification, checked: every real trace expands less than a quarter of
    DEFAULT_MAX_RATIO (the highest of the 48 is ~35x)."""
    ratios = {f.name: len(read_source(str(f)).data) / f.stat().st_size for f in corpus_files("**/*.json.gz")}
    assert len(ratios) >= 40
    worst = max(ratios, key=ratios.get)
    assert ratios[worst] < DEFAULT_MAX_RATIO / 4, (worst, ratios[worst])


# ---------------------------------------------------------------- a 10 MB kernel name

ELEMENTWISE = (
    "void at::native::vectorized_elementwise_kernel<4, at::native::BinaryFunctor<float, float, float, "
    "at::native::MulFunctor<float> >, at::detail::Array<char*, 3> >(int, "
)
NESTED_DEPTH = 10_000_000 // 13


def _long_names() -> dict:
    """Two 10 MB names: a parameter list that never ends, and templates nested ~770,000 deep."""
    return {
        "elementwise": ELEMENTWISE + "float, " * (10_000_000 // 7) + "at::detail::Array<char*, 3>)",
        "gemm": "void gemm_kernel<"
        + "cutlass::Foo<" * NESTED_DEPTH
        + "float"
        + ">" * NESTED_DEPTH
        + ">(int)",
    }


def _gpu_trace(names: list) -> dict:
    """One CPU op launching one kernel per name (correlated), each kernel on stream 7."""
    events = [_event(name="aten::mul", ts=0, dur=10_000)]
    for i, name in enumerate(names, start=1):
        t = 100 * i
        events.append(
            _event(cat="cuda_runtime", name="cudaLaunchKernel", ts=t, dur=5, args={"correlation": i})
        )
        events.append(
            _event(
                cat="kernel",
                name=name,
                pid=0,
                tid=7,
                ts=t + 20,
                dur=30,
                args={"correlation": i, "device": 0, "stream": 7},
            )
        )
    return {"traceEvents": events}


@pytest.fixture(scope="module")
def long_name_trace(tmp_path_factory):
    names = _long_names()
    path = tmp_path_factory.mktemp("longname") / "long_names.json"
    path.write_text(json.dumps(_gpu_trace([*names.values(), "ampere_sgemm_128x64_tn"])))
    return path, names


def test_long_kernel_names_load_and_summarise_in_bounded_time(long_name_trace):
    """Found: a 10 MB kernel name cost 27-53 s per command (~5,000 regex searches over all of
    it); a deeply nested one never finished. The full names stay in the data."""
    path, _names = long_name_trace
    for command in ("summary", "kernels"):
        proc, wall = _cli(command, "--no-cache", "--format", "json", path)
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert wall < 20, (command, wall)  # seconds on a quiet machine: a hang guard only


def test_long_kernel_names_are_kept_whole_and_classified_sensibly(long_name_trace):
    path, names = long_name_trace
    start = time.perf_counter()
    trace = tv.load(path, cache=False)
    assert time.perf_counter() - start < 20
    k = trace.kernels.assign(name=trace.kernels["name"].astype(str))
    by_name = dict(zip(k["name"], k["category"].astype(str), strict=True))
    for category, name in names.items():
        assert by_name[name] == category  # full name in the data; its category from its head and tail
    assert by_name["ampere_sgemm_128x64_tn"] == "gemm"
    tv.summary(trace)


def test_deeply_nested_names_do_not_recurse_without_bound():
    """A 768-character name nested 250 deep ran out of Python stack (exit 3) in the readable name."""
    name = "void k<" + "A<" * 250 + "float" + ">" * 250 + ">(int)"
    assert readable_kernel_name(name).startswith("k<A")
    assert normalise_kernel_name(name).startswith("k<A")


def test_name_view_keeps_short_names_and_bounds_long_ones():
    assert limits.name_view("ampere_sgemm_128x64_tn") == "ampere_sgemm_128x64_tn"
    view = limits.name_view("a" * 100 + "b" * 10_000_000 + "c" * 100)
    assert len(view) <= limits.NAME_WORK + 3 and view.startswith("a" * 100) and view.endswith("c" * 100)
