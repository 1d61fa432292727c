"""The columnar cache: hits, invalidation, bypass, folders, failures, exact round trip."""
from __future__ import annotations

import gzip
import json
import os
import shutil
import sys
from pathlib import Path

import pandas as pd
import pytest

import traceview as tv
from traceview import cache as cache_mod

from corpus import corpus_files

pytest.importorskip("pyarrow")

SAMPLES = sorted((Path(__file__).resolve().parents[1] / "sample_traces").glob("*.json.gz"))
CORPUS_PICK = [f for f in corpus_files() if f.name.startswith(("trace_diff__control", "ns_resolution",
                                                                "tb_plugin_test__gpu_metrics"))][:3]


@pytest.fixture(autouse=True)
def _cache_env(tmp_path, monkeypatch):
    """Every test here caches under tmp_path, never in the user's home."""
    monkeypatch.setenv("TRACEVIEW_CACHE_DIR", str(tmp_path / "default-cache"))
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)


def _events(n=3, cat="kernel"):
    return [{"ph": "X", "cat": cat, "name": f"k{i}", "pid": 0, "tid": 7, "ts": 1000 + 10 * i, "dur": 5,
             "args": {"correlation": i, "stream": 7, "device": 0}} for i in range(n)]


def _write_trace(path: Path, events) -> Path:
    path.write_text(json.dumps({"traceEvents": events}))
    return path


def _entries(folder: Path) -> list[Path]:
    return [p for p in folder.iterdir() if p.is_dir()] if folder.exists() else []


def assert_same(a, b):
    for name in ("events", "kernels", "ops", "steps"):
        pd.testing.assert_frame_equal(getattr(a, name), getattr(b, name), check_exact=True, obj=name)
    assert a.meta == b.meta
    assert a.warnings == b.warnings
    assert a.stats == b.stats
    assert a.path == b.path


def test_second_load_is_a_hit(tmp_path, monkeypatch):
    trace = _write_trace(tmp_path / "t.json", _events())
    first = tv.load(trace)
    assert len(_entries(tmp_path / "default-cache")) == 1
    calls = []
    load_mod = sys.modules["traceview.load"]
    monkeypatch.setattr(load_mod, "_load_uncached", lambda *a, **k: calls.append(1))
    again = tv.load(trace)
    assert calls == []  # served from the cache, not parsed
    assert_same(first, again)


def test_changed_trace_invalidates(tmp_path):
    trace = _write_trace(tmp_path / "t.json", _events(3))
    assert len(tv.load(trace).kernels) == 3
    st = os.stat(trace)
    _write_trace(trace, _events(5))
    os.utime(trace, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    assert len(tv.load(trace).kernels) == 5
    assert len(_entries(tmp_path / "default-cache")) == 1  # one entry per trace, replaced


def test_same_size_new_mtime_invalidates(tmp_path):
    trace = _write_trace(tmp_path / "t.json", _events(3, cat="kernel"))
    assert len(tv.load(trace).kernels) == 3
    st = os.stat(trace)
    _write_trace(trace, _events(3, cat="cpu_op"))  # same length of text
    assert os.stat(trace).st_size == st.st_size
    os.utime(trace, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    assert len(tv.load(trace).kernels) == 0


def test_code_or_rules_change_invalidates(tmp_path, monkeypatch):
    trace = _write_trace(tmp_path / "t.json", _events())
    tv.load(trace)
    assert cache_mod.lookup(str(trace), None) is not None
    monkeypatch.setattr(cache_mod, "_code_digest", lambda: "other rules")
    assert cache_mod.lookup(str(trace), None) is None


def test_bypass_reads_and_writes_nothing(tmp_path, monkeypatch):
    trace = _write_trace(tmp_path / "t.json", _events())
    tv.load(trace, cache=False)
    assert _entries(tmp_path / "default-cache") == []
    tv.load(trace)  # fills the cache
    calls = []
    load_mod = sys.modules["traceview.load"]
    real = load_mod._load_uncached
    monkeypatch.setattr(load_mod, "_load_uncached", lambda *a, **k: calls.append(1) or real(*a, **k))
    tv.load(trace, cache=False)
    assert calls == [1]


def test_configurable_folder(tmp_path):
    trace = _write_trace(tmp_path / "t.json", _events())
    mine = tmp_path / "mine"
    tv.load(trace, cache=str(mine))
    assert len(_entries(mine)) == 1
    assert _entries(tmp_path / "default-cache") == []
    assert cache_mod.lookup(str(trace), mine) is not None


def test_default_folder_order(tmp_path, monkeypatch):
    assert cache_mod.cache_dir(None) == tmp_path / "default-cache"
    monkeypatch.delenv("TRACEVIEW_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_mod.cache_dir(None) == tmp_path / "xdg" / "traceview"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_mod.cache_dir(None) == tmp_path / "home" / ".cache" / "traceview"
    assert cache_mod.cache_dir(False) is None


def test_never_writes_next_to_the_trace(tmp_path):
    folder = tmp_path / "traces"
    folder.mkdir()
    trace = _write_trace(folder / "t.json", _events())
    tv.load(trace)
    assert sorted(p.name for p in folder.iterdir()) == ["t.json"]


@pytest.mark.skipif(os.geteuid() == 0 if hasattr(os, "geteuid") else False,
                    reason="root ignores directory permissions")
def test_unwritable_folder_does_not_fail(tmp_path):
    trace = _write_trace(tmp_path / "t.json", _events())
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        assert len(tv.load(trace, cache=str(locked)).kernels) == 3
        assert len(tv.load(trace, cache=str(locked / "sub")).kernels) == 3
    finally:
        locked.chmod(0o700)


def test_write_failure_does_not_fail(tmp_path, monkeypatch):
    trace = _write_trace(tmp_path / "t.json", _events())
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    assert len(tv.load(trace, cache=str(blocker)).kernels) == 3  # cache "folder" is a file

    def disk_full(*a, **k):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(cache_mod, "_write", disk_full)
    assert len(tv.load(trace).kernels) == 3
    assert _entries(tmp_path / "default-cache") == []  # no half-written entry left behind
    assert not any((tmp_path / "default-cache").iterdir())


def test_corrupt_entry_is_a_miss(tmp_path):
    trace = _write_trace(tmp_path / "t.json", _events())
    first = tv.load(trace)
    (entry,) = _entries(tmp_path / "default-cache")
    (entry / "events.arrow").write_bytes(b"garbage")
    again = tv.load(trace)
    assert_same(first, again)
    assert cache_mod.lookup(str(trace), None) is not None  # rewritten


def test_without_pyarrow_there_is_no_cache(tmp_path, monkeypatch):
    monkeypatch.setattr(cache_mod, "available", lambda: False)
    trace = _write_trace(tmp_path / "t.json", _events())
    assert len(tv.load(trace).kernels) == 3
    assert _entries(tmp_path / "default-cache") == []


def test_gzip_and_read_only_trace(tmp_path):
    trace = tmp_path / "t.json.gz"
    trace.write_bytes(gzip.compress(json.dumps({"traceEvents": _events()}).encode()))
    trace.chmod(0o444)
    first = tv.load(trace)
    assert_same(first, tv.load(trace))
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "default-cache") == ["t.json.gz"]


@pytest.mark.parametrize("src", SAMPLES + CORPUS_PICK, ids=lambda p: p.name[:40])
def test_round_trip_is_exact(tmp_path, src):
    trace = tmp_path / src.name
    shutil.copyfile(src, trace)  # a copy in tmp_path: the corpus is never written to
    uncached = tv.load(trace, cache=False)
    tv.load(trace)
    cached = cache_mod.lookup(str(trace), None)
    assert cached is not None
    assert_same(uncached, cached)
    assert_same(uncached, tv.load(trace))
