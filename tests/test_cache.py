"""The columnar cache: hits, invalidation, bypass, folders, failures, exact round trip."""
from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
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
    monkeypatch.setenv("TRACEVIEW_CACHE_MIN_MB", "0")  # the tests' traces are tiny
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


# --------------------------------------------------------------------------
# size cap, eviction, info, clear

SESSION_CACHE = os.environ.get("TRACEVIEW_CACHE_DIR")  # as conftest.py set it, before any fixture
SESSION_DIRS = {n: os.environ.get(n) for n in ("MPLCONFIGDIR", "XDG_CACHE_HOME", "XDG_CONFIG_HOME")}
REPO = Path(__file__).resolve().parents[1]


def _entry_of(folder: Path, trace: Path) -> Path:
    return cache_mod._entry(folder, str(trace))


def _age(entry: Path, seconds: float) -> None:
    """Make ``entry`` look last used ``seconds`` ago."""
    t = int((time.time() - seconds) * 1e9)
    os.utime(entry / "stamp", ns=(t, t))


def test_version_comes_from_its_own_module():
    from traceview import _version

    assert tv.__version__ == _version.__version__
    src = Path(cache_mod.__file__).read_text()
    assert "from . import" not in src  # no upward import of the package's __init__
    assert "from ._version import __version__" in src


def test_info_and_clear_return_data(tmp_path):
    folder = tmp_path / "default-cache"
    empty = cache_mod.info()
    assert empty["folder"] == str(folder) and not empty["exists"]
    assert (empty["entries"], empty["bytes"]) == (0, 0)
    assert empty["max_bytes"] == cache_mod.DEFAULT_MAX_MB * 2**20 and empty["max_mib"] == 2048
    assert empty["writable"] and empty["enabled"]
    for i in range(2):
        tv.load(_write_trace(tmp_path / f"t{i}.json", _events()))
    (folder / "notes").mkdir()  # not ours: never counted, never removed
    (folder / "README").write_text("mine")
    d = cache_mod.info()
    on_disk = sum(f.stat().st_size for e in _entries(folder) if e.name != "notes" for f in e.iterdir())
    assert (d["entries"], d["other_versions"], d["bytes"]) == (2, 0, on_disk)
    assert d["size_mib"] == round(on_disk / 2**20, 1)
    out = cache_mod.clear()
    assert out == {"folder": str(folder), "removed": 2, "bytes": on_disk}
    assert sorted(p.name for p in folder.iterdir()) == ["README", "notes"]
    assert cache_mod.info()["entries"] == 0
    assert cache_mod.clear(tmp_path / "nowhere") == {"folder": str(tmp_path / "nowhere"), "removed": 0, "bytes": 0}


def test_least_recently_used_goes_first(tmp_path, monkeypatch):
    folder = tmp_path / "default-cache"
    traces = [_write_trace(tmp_path / f"t{i}.json", _events()) for i in range(3)]
    tv.load(traces[0])
    one = cache_mod.info()["bytes"]
    monkeypatch.setenv("TRACEVIEW_CACHE_MAX_MB", str(2.5 * one / 2**20))  # room for two entries
    tv.load(traces[1])
    _age(_entry_of(folder, traces[0]), 20)
    _age(_entry_of(folder, traces[1]), 10)
    assert cache_mod.lookup(str(traces[0]), None) is not None  # a hit: t0 is now the most recent
    tv.load(traces[2])  # the store evicts t1, the least recently used
    assert sorted(_entries(folder)) == sorted(_entry_of(folder, t) for t in (traces[0], traces[2]))
    assert cache_mod.info()["bytes"] <= cache_mod.max_bytes()


def test_other_code_versions_are_removed_first(tmp_path, monkeypatch):
    folder = tmp_path / "default-cache"
    old, new = (_write_trace(tmp_path / f"{n}.json", _events()) for n in ("old", "new"))
    real = cache_mod._code_digest
    monkeypatch.setattr(cache_mod, "_code_digest", lambda: "an older traceview")
    tv.load(old)
    monkeypatch.setattr(cache_mod, "_code_digest", real)
    pre_stamp = folder / ("0" * 32)  # an entry written before entries carried a stamp
    pre_stamp.mkdir()
    (pre_stamp / "entry.json").write_text("{}")
    d = cache_mod.info()
    assert (d["entries"], d["other_versions"]) == (2, 2)
    tv.load(new)  # plenty of room under the cap, still the stale entries go
    assert _entries(folder) == [_entry_of(folder, new)]
    assert cache_mod.info()["other_versions"] == 0


def test_half_written_entries_go_when_old(tmp_path):
    folder = tmp_path / "default-cache"
    trace = _write_trace(tmp_path / "t.json", _events())
    folder.mkdir()
    fresh = folder / ("a" * 32 + ".tmp-fresh1")  # another process is writing it right now
    stale = folder / ("b" * 32 + ".tmp-stale1")  # left by a crash
    for d in (fresh, stale):
        d.mkdir()
        (d / "events.arrow").write_bytes(b"x" * 100)
    t = int((time.time() - 2 * 3600) * 1e9)
    os.utime(stale / "events.arrow", ns=(t, t))
    os.utime(stale, ns=(t, t))
    tv.load(trace)
    assert fresh.exists() and not stale.exists()
    assert cache_mod.clear()["removed"] == 1  # the entry; the half-written folder goes too
    assert not any(folder.iterdir())


def test_cap_zero_turns_caching_off(tmp_path, monkeypatch):
    monkeypatch.setenv("TRACEVIEW_CACHE_MAX_MB", "0")
    assert len(tv.load(_write_trace(tmp_path / "t.json", _events())).kernels) == 3
    assert _entries(tmp_path / "default-cache") == []
    d = cache_mod.info()
    assert d["max_bytes"] == 0 and not d["enabled"]


@pytest.mark.parametrize("bad", ["abc", "-1", "nan", "inf", "2GB"])
def test_bad_cap_is_one_line_and_never_breaks_a_load(tmp_path, monkeypatch, bad):
    monkeypatch.setenv("TRACEVIEW_CACHE_MAX_MB", bad)
    with pytest.raises(tv.TraceviewError, match="TRACEVIEW_CACHE_MAX_MB") as err:
        cache_mod.info()
    assert "\n" not in str(err.value)
    assert len(tv.load(_write_trace(tmp_path / "t.json", _events())).kernels) == 3  # the default cap applies
    assert len(_entries(tmp_path / "default-cache")) == 1


def test_cache_folder_that_is_a_file(tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("TRACEVIEW_CACHE_DIR", str(blocker))
    for fn in (cache_mod.info, cache_mod.clear):
        with pytest.raises(tv.TraceviewError, match="not a folder"):
            fn()
    d = cache_mod.info(blocker / "sub")  # below a file: can never be written
    assert not d["writable"] and not d["enabled"] and d["entries"] == 0


@pytest.mark.skipif(os.geteuid() == 0 if hasattr(os, "geteuid") else False,
                    reason="root ignores directory permissions")
def test_unremovable_entries_are_one_line(tmp_path):
    tv.load(_write_trace(tmp_path / "t.json", _events()))
    folder = tmp_path / "default-cache"
    folder.chmod(0o500)
    try:
        assert not cache_mod.info()["writable"]
        with pytest.raises(tv.TraceviewError, match="cannot remove") as err:
            cache_mod.clear()
        assert "\n" not in str(err.value)
    finally:
        folder.chmod(0o700)


def test_clear_that_is_refused_is_one_line(tmp_path, monkeypatch):
    """As the unwritable-folder case, but also as root: the removal itself is refused."""
    from click.testing import CliRunner

    from traceview.cli import main

    tv.load(_write_trace(tmp_path / "t.json", _events()))

    def refused(path, *a, **k):
        raise PermissionError(13, "Permission denied", str(path))
    monkeypatch.setattr(cache_mod.shutil, "rmtree", refused)
    with pytest.raises(tv.TraceviewError, match="cannot remove this cache entry: Permission denied") as err:
        cache_mod.clear()
    assert "\n" not in str(err.value)
    r = CliRunner().invoke(main, ["cache", "clear"])
    assert r.exit_code == 1 and r.stderr.startswith("traceview: error: ") and r.stderr.count("\n") == 1


def _cli(*args, env=None):
    return subprocess.run([sys.executable, "-m", "traceview", "cache", *args], cwd=REPO, capture_output=True,
                          text=True, env={**os.environ, **(env or {})}, timeout=120)


def test_cli_info_and_clear(tmp_path):
    from click.testing import CliRunner

    from traceview.cli import main

    folder = tmp_path / "default-cache"
    tv.load(_write_trace(tmp_path / "t.json", _events()))
    runner = CliRunner()
    r = runner.invoke(main, ["cache", "info"])
    assert r.exit_code == 0, r.output
    assert f"folder:  {folder}\n" in r.output
    assert "entries: 1\n" in r.output and " MiB\n" in r.output and "cap:     2048 MiB" in r.output
    r = runner.invoke(main, ["cache", "info", "--format", "json"])
    assert json.loads(r.output) == cache_mod.info()
    r = runner.invoke(main, ["cache", "clear"])
    assert r.exit_code == 0 and r.output.startswith(f"removed 1 entries (") and str(folder) in r.output
    assert _entries(folder) == []
    other = tmp_path / "other"
    tv.load(tmp_path / "t.json", cache=str(other))
    r = runner.invoke(main, ["cache", "clear", "--dir", str(other), "--format", "json"])
    assert json.loads(r.output)["removed"] == 1


def test_cli_failures_are_one_line(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    for args, env in ((["info"], {"TRACEVIEW_CACHE_DIR": str(blocker)}),
                      (["clear"], {"TRACEVIEW_CACHE_DIR": str(blocker)}),
                      (["info"], {"TRACEVIEW_CACHE_MAX_MB": "lots"})):
        r = _cli(*args, env=env)
        assert r.returncode == 1, (args, r.stderr)
        assert r.stdout == "" and r.stderr.startswith("traceview: error: ")
        assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr


# --------------------------------------------------------------------------
# the test session itself (tests/conftest.py)


def test_session_caches_in_a_temporary_folder():
    assert SESSION_CACHE, "conftest.py sets TRACEVIEW_CACHE_DIR for the session"
    folder = Path(SESSION_CACHE).resolve()
    assert folder.is_relative_to(Path(tempfile.gettempdir()).resolve())
    assert not folder.is_relative_to(Path.home() / ".cache")
    for name, value in SESSION_DIRS.items():  # matplotlib's and chromium's too
        assert value and Path(value).resolve().is_relative_to(folder.parent), name


def test_missing_corpus_is_reported_once(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("TRACEVIEW_CACHE_DIR", "XDG_CACHE_HOME")}
    env.update(TRACEVIEW_CORPUS="/nonexistent", HOME=str(tmp_path / "home"))
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_corpus_exact.py"],
                       cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    lines = [ln for ln in r.stdout.splitlines() if "corpus tests skipped" in ln]
    assert len(lines) == 1, r.stdout
    n = int(lines[0].split()[0])
    assert n > 0 and f"{n} skipped" in r.stdout
    assert lines[0] == f"{n} corpus tests skipped: corpus not found at /nonexistent; set TRACEVIEW_CORPUS"
    assert not (tmp_path / "home" / ".cache").exists()


def test_the_default_cache_leaves_small_traces_alone(tmp_path, monkeypatch):
    """The README's first command on the sample traces must not write to the user's cache."""
    monkeypatch.delenv("TRACEVIEW_CACHE_MIN_MB")
    small = _write_trace(tmp_path / "small.json", _events())
    tv.load(small)
    assert not (tmp_path / "default-cache").exists()
    tv.load(small, cache=str(tmp_path / "mine"))  # a folder given on purpose caches every trace
    assert any((tmp_path / "mine").iterdir())
    monkeypatch.setenv("TRACEVIEW_CACHE_MIN_MB", "0.000001")
    tv.load(small)
    assert any((tmp_path / "default-cache").iterdir())


def test_readme_first_command_does_not_touch_home_cache(tmp_path):
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRACEVIEW_", "XDG_"))}
    env["HOME"] = str(tmp_path / "home")
    root = Path(__file__).resolve().parents[1]
    res = subprocess.run([sys.executable, "-m", "traceview", "compare", str(root / "sample_traces")],
                         capture_output=True, text=True, env=env, timeout=120)
    assert res.returncode == 0, res.stderr
    assert not (tmp_path / "home" / ".cache").exists()
