"""A cache hit's events and ops tables are read, checked and made only when first used
(``cache._DEFERRED``): a warm summary, diff or compare reads neither. What must hold for that: the
table, when read, is the one the entry had when it was looked up (whatever a store does meanwhile);
a damaged one is rebuilt from the trace and said, never served; a trace changed since is an error,
not a mix of two files; a pickle, a copy and threads see one table; and a process holding hundreds
of traces does not run out of file descriptors."""

from __future__ import annotations

import dataclasses
import gc
import json
import pickle
import shutil
import subprocess
import sys
import threading
import zlib
from pathlib import Path

import pandas as pd
import pytest
from corpus import SKIP_REASON, corpus_files
from test_cache import NOTE, _cache_env, _entries, _events, _write_trace, assert_same  # noqa: F401

import traceview as tv
from traceview import cache as cache_mod
from traceview import replay
from traceview.analyses.runs.rank_work import rank_work
from traceview.deferred import unmade
from traceview.errors import LateNote, TraceReadError

DEFERRED = ("events", "ops", "kernels")
SAMPLE_MATH = Path(__file__).resolve().parents[1] / "sample_traces" / "sdpa_math.json.gz"


def _deferred(t, name: str = "events") -> bool:
    return unmade(t, name)


def _stored(tmp_path: Path, name="t.json", n=40):
    """A trace, its load without the cache, and a cache hit of it."""
    trace = _write_trace(tmp_path / name, _events(n))
    uncached = tv.load(trace, cache=False)
    tv.load(trace)
    hit = tv.load(trace)
    assert hit.cached and _deferred(hit)
    return trace, uncached, hit


def _flip_in_place(path: Path, at: int) -> None:
    """One bit of the file changed where it lies (the same file, as a disk error would)."""
    with open(path, "r+b") as fh:
        fh.seek(at)
        byte = fh.read(1)[0]
        fh.seek(at)
        fh.write(bytes([byte ^ 0x04]))


def test_a_hit_holds_its_events_until_they_are_used(tmp_path):
    _, uncached, hit = _stored(tmp_path)
    assert len(hit.kernels) == 40  # another table read leaves the events unread
    assert _deferred(hit) and not _deferred(hit, "kernels")
    assert_same(uncached, hit)
    assert not _deferred(hit)
    assert hit.start_ns == uncached.start_ns == int(uncached.events["ts_ns"].min())


CORPUS_PAIR = corpus_files("hta/trace_diff__*.json.gz")[:2]
CORPUS_RANK = corpus_files("param/*worker0*.json.gz")[:1]


@pytest.mark.skipif(len(CORPUS_PAIR) < 2 or not CORPUS_RANK, reason=SKIP_REASON)
def test_a_warm_summary_diff_compare_and_rank_read_no_events_and_no_ops(tmp_path):
    """The GPU traces of the corpus (the samples hold no GPU activity): what the analyses of a warm
    run ask of the events (start, annotation names, launch times) and of the ops (their figures,
    shapes, stacks, the SDPA ops) is kept in the entry beside them; a warm summary reads no
    kernels table either (its tables and metrics are kept)."""
    a, b, rank = (Path(shutil.copyfile(p, tmp_path / p.name)) for p in [*CORPUS_PAIR, *CORPUS_RANK])
    cold = tv.diff(a, b, cache=False)
    cold_ranks = rank_work(tv.load(rank, cache=False))
    tv.summary(tv.load(a)), tv.diff(tv.load(a), tv.load(b)), rank_work(tv.load(rank))  # stored, then kept
    tv.compare([tv.load(a), tv.load(b)])
    ta, tb, tr = tv.load(a), tv.load(b), tv.load(rank)
    assert all(_deferred(t, name) for t in (ta, tb, tr) for name in DEFERRED)
    warm_summary = tv.summary(ta)
    assert all(_deferred(ta, name) for name in DEFERRED)  # a warm summary reads none of them
    warm = tv.diff(ta, tb)
    warm_compare = tv.compare([ta, tb])
    warm_ranks = rank_work(tr)
    assert all(_deferred(t, name) for t in (ta, tb, tr) for name in ("events", "ops"))
    cold_summary = tv.summary(a, cache=False)
    assert warm_summary.findings == cold_summary.findings and warm_summary.info == cold_summary.info
    for name, table in cold_summary.tables.items():
        pd.testing.assert_frame_equal(warm_summary.tables[name], table, check_exact=True, obj=name)
    cold_compare = tv.compare([a, b], cache=False)
    assert warm_compare.findings == cold_compare.findings
    for name, table in cold_compare.tables.items():
        pd.testing.assert_frame_equal(warm_compare.tables[name], table, check_exact=True, obj=name)
    assert warm.findings == cold.findings
    for name, table in cold.tables.items():
        pd.testing.assert_frame_equal(warm.tables[name], table, check_exact=True, obj=name)
    pd.testing.assert_frame_equal(warm_ranks.streams, cold_ranks.streams, check_exact=True)


@pytest.mark.parametrize("name", DEFERRED)
def test_a_table_damaged_after_the_lookup_is_rebuilt_and_said(tmp_path, name):
    trace, uncached, hit = _stored(tmp_path)
    (entry,) = _entries(tmp_path / "default-cache")
    replay._SPOILED.clear()
    _flip_in_place(entry / f"{name}.arrow", (entry / f"{name}.arrow").stat().st_size // 2)
    pd.testing.assert_frame_equal(getattr(hit, name), getattr(uncached, name), check_exact=True)
    notes = [w for w in hit.warnings if NOTE in w]
    assert len(notes) == 1 and notes[0].startswith(f"{trace}: ") and f"{name}.arrow" in notes[0]
    assert replay._SPOILED, "a run that rebuilt a table must not be replayed"
    assert cache_mod.lookup(str(trace), None) is None  # the damaged entry went
    replay._SPOILED.clear()


def test_a_late_rebuild_is_said_where_the_load_warnings_were(tmp_path):
    """The load's warnings are said when the trace is loaded; a deferred table found damaged later
    is said then: a ``LateNote`` from the API, a ``warning:`` line on stderr from the command."""
    trace, _, hit = _stored(tmp_path)
    (entry,) = _entries(tmp_path / "default-cache")
    _flip_in_place(entry / "events.arrow", 200)
    with pytest.warns(LateNote, match="failed verification") as said:
        hit.events  # noqa: B018
    assert len(said) == 1 and str(said[0].message).startswith(f"{trace}: ")
    tv.load(trace)  # a new entry
    (entry,) = _entries(tmp_path / "default-cache")
    _flip_in_place(entry / "events.arrow", 200)
    cmd = [sys.executable, "-m", "traceview", "annotate", str(trace), "-o"]
    got = subprocess.run([*cmd, str(tmp_path / "a.json")], capture_output=True, text=True, timeout=120)
    assert got.returncode == 0, got.stderr
    lines = [x for x in got.stderr.splitlines() if NOTE in x]
    assert len(lines) == 1 and lines[0].startswith(f"warning: {trace}: "), got.stderr
    plain = subprocess.run([*cmd, str(tmp_path / "b.json"), "--no-cache"], capture_output=True, timeout=120)
    assert plain.returncode == 0
    assert (tmp_path / "a.json").read_bytes() == (tmp_path / "b.json").read_bytes()


def _rewritten_entry(entry: Path, change) -> None:
    """``entry.json`` with ``change(info)`` applied, its checksum line written to match."""
    info = json.loads((entry / "entry.json").read_bytes().partition(b"\n")[2])
    change(info)
    body = json.dumps(info).encode()
    (entry / "entry.json").write_bytes(b"crc32:%08x\n" % zlib.crc32(body) + body)


@pytest.mark.parametrize(
    "path",
    [SAMPLE_MATH, *corpus_files("hta/trace_diff*")],
    ids=lambda p: p.name[:40],
)
def test_a_hit_shows_as_the_trace_does_and_reads_no_table_for_it(tmp_path, path):
    """A notebook shows a cached Trace (its repr) with the counts a load without the cache gives,
    read from the entry: its three tables stay unread. An entry stored before the rows were kept
    (or with rows that are not a count) shows the same, reading the tables."""
    want = repr(tv.load(path, cache=False))
    tv.load(path)
    hit = tv.load(path)
    assert hit.cached and repr(hit) == want
    assert all(_deferred(hit, name) for name in DEFERRED)
    (entry,) = _entries(tmp_path / "default-cache")
    for rows in (None, -1, "12", 1.5):

        def change(info, rows=rows):
            for name in DEFERRED:
                if rows is None:
                    del info["files"][name]["rows"]
                else:
                    info["files"][name]["rows"] = rows

        _rewritten_entry(entry, change)
        old = tv.load(path)
        assert old.cached and repr(old) == want
        assert not any(_deferred(old, name) for name in DEFERRED)


@pytest.mark.parametrize("name", DEFERRED)
def test_a_forged_table_file_that_passes_its_checksum_is_rebuilt(tmp_path, name):
    """An entry written by something else: another table's bytes as the events (or the ops, or the
    kernels), with a size and a checksum to match (a CRC is no signature). The frame does not read
    back: rebuilt and said."""
    trace, uncached, _ = _stored(tmp_path)
    (entry,) = _entries(tmp_path / "default-cache")
    forged = (entry / ("steps.arrow" if name == "kernels" else "kernels.arrow")).read_bytes()
    (entry / f"{name}.arrow").write_bytes(forged)
    info = json.loads((entry / "entry.json").read_bytes().partition(b"\n")[2])
    info["files"][name] = {"size": len(forged), "crc32": zlib.crc32(forged)}
    body = json.dumps(info).encode()
    (entry / "entry.json").write_bytes(b"crc32:%08x\n" % zlib.crc32(body) + body)
    hit = tv.load(trace)
    assert hit.cached and _deferred(hit, name)
    pd.testing.assert_frame_equal(getattr(hit, name), getattr(uncached, name), check_exact=True)
    notes = [w for w in hit.warnings if NOTE in w]
    assert len(notes) == 1 and f"{name}.arrow" in notes[0], hit.warnings


@pytest.mark.parametrize("name", DEFERRED)
def test_a_table_reads_as_it_was_when_the_entry_is_replaced(tmp_path, name):
    trace, uncached, hit = _stored(tmp_path)
    other = tv.load(_write_trace(tmp_path / "other.json", _events(41)), cache=False)
    cache_mod.store(dataclasses.replace(other, path=str(trace)), None, cache_mod.identity(str(trace)))
    assert len(cache_mod.lookup(str(trace), None).kernels) == 41  # the entry is another one now
    pd.testing.assert_frame_equal(getattr(hit, name), getattr(uncached, name), check_exact=True)
    assert not [w for w in hit.warnings if NOTE in w]


@pytest.mark.parametrize("name", DEFERRED)
def test_a_table_of_a_trace_changed_since_is_an_error_not_a_mix(tmp_path, name):
    trace, _, hit = _stored(tmp_path)
    (entry,) = _entries(tmp_path / "default-cache")
    _flip_in_place(entry / f"{name}.arrow", 100)
    _write_trace(trace, _events(7))
    with pytest.raises(TraceReadError) as err:
        getattr(hit, name)
    assert str(err.value).startswith(f"{trace}: ") and "\n" not in str(err.value)


def test_a_pickle_of_a_hit_holds_its_events(tmp_path):
    _, uncached, hit = _stored(tmp_path)
    back = pickle.loads(pickle.dumps(hit))
    assert not _deferred(back)
    assert_same(uncached, back)


def test_threads_make_the_events_once(tmp_path):
    _, uncached, hit = _stored(tmp_path)
    got, start = [], threading.Barrier(8)

    def read():
        start.wait()
        got.append(hit.events)

    threads = [threading.Thread(target=read) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(got) == 8 and all(g is got[0] for g in got)
    pd.testing.assert_frame_equal(got[0], uncached.events, check_exact=True)


def test_past_the_files_held_open_a_hit_reads_its_events_at_once(tmp_path, monkeypatch):
    trace, uncached, first = _stored(tmp_path)
    del first
    gc.collect()
    monkeypatch.setattr(cache_mod, "_HELD_FILES", threading.BoundedSemaphore(2 * len(DEFERRED)))
    held = [tv.load(trace) for _ in range(4)]
    assert [_deferred(t, "ops") for t in held] == [True, True, False, False]
    assert [_deferred(t) for t in held] == [True, True, False, False]
    for t in held:
        assert_same(uncached, t)
    assert [_deferred(t) for t in held] == [False] * 4
    assert [_deferred(tv.load(trace)) for _ in range(2)] == [True, True]  # read: their files closed
    del held
    gc.collect()
    unread = tv.load(trace)
    del unread  # dropped unread: its file closes, its place is free again
    gc.collect()
    assert [_deferred(tv.load(trace)) for _ in range(2)] == [True, True]
