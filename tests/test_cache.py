"""The columnar cache: hits, invalidation, bypass, folders, failures, exact round trip."""

from __future__ import annotations

import dataclasses
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
from corpus import corpus_files

import traceview as tv
from traceview import cache as cache_mod

pytest.importorskip("pyarrow")

SAMPLES = sorted((Path(__file__).resolve().parents[1] / "sample_traces").glob("*.json.gz"))
CORPUS_PICK = [
    f
    for f in corpus_files()
    if f.name.startswith(("trace_diff__control", "ns_resolution", "tb_plugin_test__gpu_metrics"))
][:3]


@pytest.fixture(autouse=True)
def _cache_env(tmp_path, monkeypatch):
    """Every test here caches under tmp_path, never in the user's home."""
    monkeypatch.setenv("TRACEVIEW_CACHE_DIR", str(tmp_path / "default-cache"))
    monkeypatch.setenv("TRACEVIEW_CACHE_MIN_MB", "0")  # the tests' traces are tiny
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)


def _events(n=3, cat="kernel"):
    return [
        {
            "ph": "X",
            "cat": cat,
            "name": f"k{i}",
            "pid": 0,
            "tid": 7,
            "ts": 1000 + 10 * i,
            "dur": 5,
            "args": {"correlation": i, "stream": 7, "device": 0},
        }
        for i in range(n)
    ]


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
    # info says which load was served from the cache, and the decoder that made the entry
    assert (first.info["cached"], again.info["cached"]) == (False, True)
    assert first.info["decoder"] == again.info["decoder"] == first.stats["decoder"]
    assert again.info["n_events"] == len(_events())


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


def test_a_blank_xdg_cache_home_is_unset(tmp_path, monkeypatch):
    # XDG: an empty value means unset; taken as a path, " " made a relative folder in the cwd
    monkeypatch.delenv("TRACEVIEW_CACHE_DIR")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CACHE_HOME", " ")
    assert cache_mod.cache_dir(None) == tmp_path / "home" / ".cache" / "traceview"


def test_default_folder_is_the_platforms_cache_folder(tmp_path):
    """platformdirs picks the folder: on macOS ~/Library/Caches/traceview. A real interpreter whose
    platformdirs was imported as on macOS (it chooses its platform on import); the rest runs as is."""
    script = (
        "import sys; real = sys.platform; sys.platform = 'darwin'; import platformdirs; "
        "sys.platform = real; from traceview import cache; print(cache.cache_dir(None))"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRACEVIEW_", "XDG_"))}
    env["HOME"] = str(tmp_path / "home")
    res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=60)
    assert res.returncode == 0, res.stderr
    assert Path(res.stdout.strip()) == tmp_path / "home" / "Library" / "Caches" / "traceview"
    env["TRACEVIEW_CACHE_DIR"] = str(tmp_path / "mine")  # still wins
    res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=60)
    assert Path(res.stdout.strip()) == tmp_path / "mine"


def test_never_writes_next_to_the_trace(tmp_path):
    folder = tmp_path / "traces"
    folder.mkdir()
    trace = _write_trace(folder / "t.json", _events())
    tv.load(trace)
    assert sorted(p.name for p in folder.iterdir()) == ["t.json"]


@pytest.mark.skipif(
    os.geteuid() == 0 if hasattr(os, "geteuid") else False, reason="root ignores directory permissions"
)
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


def test_corrupt_entry_is_rebuilt(tmp_path):
    trace = _write_trace(tmp_path / "t.json", _events())
    first = tv.load(trace)
    (entry,) = _entries(tmp_path / "default-cache")
    (entry / "events.arrow").write_bytes(b"garbage")
    _assert_rebuilt(trace, first)


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
    assert out == {"folder": str(folder), "removed": 2, "replays": 0, "bytes": on_disk}
    assert sorted(p.name for p in folder.iterdir()) == ["README", "notes"]
    assert cache_mod.info()["entries"] == 0
    assert cache_mod.clear(tmp_path / "nowhere") == {
        "folder": str(tmp_path / "nowhere"),
        "removed": 0,
        "replays": 0,
        "bytes": 0,
    }


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


@pytest.mark.skipif(
    os.geteuid() == 0 if hasattr(os, "geteuid") else False, reason="root ignores directory permissions"
)
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
    return subprocess.run(
        [sys.executable, "-m", "traceview", "cache", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=120,
    )


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
    assert json.loads(r.stdout) == cache_mod.info()
    r = runner.invoke(main, ["cache", "clear"])
    assert r.exit_code == 0 and r.output.startswith("removed 1 entries (") and str(folder) in r.output
    assert _entries(folder) == []
    other = tmp_path / "other"
    tv.load(tmp_path / "t.json", cache=str(other))
    r = runner.invoke(main, ["cache", "clear", "--dir", str(other), "--format", "json"])
    assert json.loads(r.stdout)["removed"] == 1


def test_cli_failures_are_one_line(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    for args, env in (
        (["info"], {"TRACEVIEW_CACHE_DIR": str(blocker)}),
        (["clear"], {"TRACEVIEW_CACHE_DIR": str(blocker)}),
        (["info"], {"TRACEVIEW_CACHE_MAX_MB": "lots"}),
    ):
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
    r = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_corpus_exact.py"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
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
    res = subprocess.run(
        [sys.executable, "-m", "traceview", "compare", str(root / "sample_traces")],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert res.returncode == 0, res.stderr
    assert not (tmp_path / "home" / ".cache").exists()


# --------------------------------------------------------------------------
# issue 22: an entry is keyed on what was read, and verified before it is served

NOTE = "cache entry failed verification"


def _same_size_new_content(trace: Path, events) -> None:
    """Rewrite ``trace`` in place (same inode) with ``events``, same size, mtime and atime put back
    as ``touch -r`` would; waits (at most ~2 s) until the change time has moved on."""
    st = os.stat(trace)
    text = json.dumps({"traceEvents": events}).encode()
    assert len(text) == st.st_size
    for _ in range(200):
        with open(trace, "r+b") as fh:
            fh.write(text)
        os.utime(trace, ns=(st.st_atime_ns, st.st_mtime_ns))
        if os.stat(trace).st_ctime_ns != st.st_ctime_ns:
            break
        time.sleep(0.01)
    now = os.stat(trace)
    assert (now.st_size, now.st_mtime_ns, now.st_ino) == (st.st_size, st.st_mtime_ns, st.st_ino)
    assert now.st_ctime_ns != st.st_ctime_ns


def test_touch_r_same_size_edit_is_not_served(tmp_path):
    """Edited in place, same size, mtime restored: only the change time (and the sampled bytes) differ."""
    trace = _write_trace(tmp_path / "t.json", _events(3, cat="kernel"))
    assert len(tv.load(trace).kernels) == 3
    _same_size_new_content(trace, _events(3, cat="cpu_op"))
    assert len(tv.load(trace).kernels) == 0


def test_touch_r_edit_in_the_middle_of_a_large_trace(tmp_path):
    """The edit lies outside the sampled head and tail: the change time alone must catch it."""
    events = _events(4000)
    trace = _write_trace(tmp_path / "t.json", events)
    assert os.stat(trace).st_size > 4 * cache_mod._SAMPLE
    assert len(tv.load(trace).kernels) == 4000
    events[2000] = {**events[2000], "cat": "cpu_op"}  # the same length of text
    _same_size_new_content(trace, events)
    assert len(tv.load(trace).kernels) == 3999
    assert len(tv.load(trace).kernels) == 3999  # and the rebuilt entry is the new one


def test_replaced_with_same_size_and_mtime_is_not_served(tmp_path):
    """``mv`` of a file with the same size and mtime over the trace: another inode and change time."""
    trace = _write_trace(tmp_path / "t.json", _events(3, cat="kernel"))
    assert len(tv.load(trace).kernels) == 3
    st = os.stat(trace)
    new = _write_trace(tmp_path / "new.json", _events(3, cat="cpu_op"))
    os.utime(new, ns=(st.st_atime_ns, st.st_mtime_ns))
    os.replace(new, trace)
    assert (os.stat(trace).st_size, os.stat(trace).st_mtime_ns) == (st.st_size, st.st_mtime_ns)
    assert len(tv.load(trace).kernels) == 0


@pytest.mark.parametrize("when", ["before the read", "after the read"])
def test_replaced_during_a_load_is_never_cached(tmp_path, monkeypatch, when):
    """The trace is swapped for another (same size and mtime) while a load is under way: the result
    is not stored under either file's identity, one warning says so, the next load reads the new file."""
    trace = _write_trace(tmp_path / "t.json", _events(3, cat="kernel"))
    st = os.stat(trace)
    load_mod = sys.modules["traceview.load"]
    real = load_mod._load_uncached

    def swap():
        new = _write_trace(tmp_path / "new.json", _events(3, cat="cpu_op"))
        os.utime(new, ns=(st.st_atime_ns, st.st_mtime_ns))
        os.replace(new, trace)

    def load_and_swap(*a, **k):  # the real read, with a real swap of the file at a fixed point
        if when == "before the read":
            swap()
        out = real(*a, **k)
        if when == "after the read":
            swap()
        return out

    monkeypatch.setattr(load_mod, "_load_uncached", load_and_swap)
    first = tv.load(trace)
    changed = [w for w in first.warnings if "changed while it was read" in w]
    assert len(changed) == 1 and changed[0].startswith(f"{trace}: ")
    assert _entries(tmp_path / "default-cache") == []  # nothing stored
    monkeypatch.setattr(load_mod, "_load_uncached", real)
    again = tv.load(trace)
    assert len(again.kernels) == 0 and not any("changed while" in w for w in again.warnings)
    assert len(tv.load(trace).kernels) == 0  # the entry now written is the new file's


def _warm(tmp_path, src=None):
    """A trace in tmp_path, its uncached load, and its cache entry (a hit verified)."""
    trace = tmp_path / (src.name if src else "t.json")
    if src:
        shutil.copyfile(src, trace)
    else:
        _write_trace(trace, _events(40))
    uncached = tv.load(trace, cache=False)
    tv.load(trace)
    (entry,) = _entries(tmp_path / "default-cache")
    assert_same(uncached, tv.load(trace))
    return trace, uncached, entry


def _assert_rebuilt(trace, uncached, noted=True):
    again = tv.load(trace)
    _use_every_table(again)
    notes = [w for w in again.warnings if NOTE in w]
    assert len(notes) == int(noted), again.warnings
    if noted:
        assert notes[0].startswith(f"{trace}: ") and notes[0].endswith("; rebuilt from the trace")
        again = dataclasses.replace(again, warnings=[w for w in again.warnings if NOTE not in w])
    assert_same(uncached, again)
    clean = tv.load(trace)  # the entry was rebuilt: a plain hit, no note
    assert_same(uncached, clean)
    assert cache_mod.lookup(str(trace), None) is not None


def _use_every_table(t) -> None:
    """Read each table of ``t`` as an analysis would: a deferred one (``cache._DEFERRED``) is read
    from the entry, and checked, only then."""
    for f in dataclasses.fields(t):
        getattr(t, f.name)


STORED = ["events.arrow", "kernels.arrow", "ops.arrow", "steps.arrow", "memory.arrow", "entry.json"]


@pytest.mark.parametrize("name", STORED)
def test_bit_flips_are_rebuilt_never_served(tmp_path, name):
    src = SAMPLES[0] if SAMPLES else None
    trace, uncached, entry = _warm(tmp_path, src)
    size = (entry / name).stat().st_size
    for frac in (0.0, 0.13, 0.5, 0.77, 0.999):
        data = bytearray((entry / name).read_bytes())
        at = min(int(frac * size), size - 1)
        data[at] ^= 1 << (at % 8)
        (entry / name).write_bytes(bytes(data))
        _assert_rebuilt(trace, uncached)


def test_bit_flips_through_the_cli_never_exit_3(tmp_path):
    """What the issue measured: the CLI's output after a flip in kernels.arrow is the right one."""
    from click.testing import CliRunner

    from traceview.cli import main

    src = SAMPLES[0] if SAMPLES else None
    trace, _, entry = _warm(tmp_path, src)
    runner = CliRunner()
    want = runner.invoke(main, ["kernels", str(trace), "--format", "json", "--no-cache"])
    assert want.exit_code == 0, want.output
    size = (entry / "kernels.arrow").stat().st_size
    for at in range(7, size, max(1, size // 12)):
        if not entry.exists():  # a table found damaged when first used takes its entry with it
            tv.load(trace)  # the next load stores it again
        data = bytearray((entry / "kernels.arrow").read_bytes())
        data[at] ^= 0x10
        (entry / "kernels.arrow").write_bytes(bytes(data))
        r = runner.invoke(main, ["kernels", str(trace), "--format", "json"])
        assert r.exit_code == 0, (at, r.output)
        got = json.loads(r.stdout)
        notes = [n for n in got["notes"] if NOTE in n]
        assert len(notes) == 1, (at, got["notes"])
        got["notes"].remove(notes[0])
        assert got == json.loads(want.stdout), at


@pytest.mark.parametrize("name", STORED)
@pytest.mark.parametrize("keep", [0, 0.5, -1])
def test_truncated_entry_files_are_rebuilt(tmp_path, name, keep):
    trace, uncached, entry = _warm(tmp_path)
    data = (entry / name).read_bytes()
    cut = len(data) - 1 if keep == -1 else int(keep * len(data))
    (entry / name).write_bytes(data[:cut])
    _assert_rebuilt(trace, uncached)


@pytest.mark.parametrize("damage", ["{}", "not json", '{"key": 1}', "\x00" * 64, "missing", "folder"])
def test_damaged_entry_json_is_rebuilt(tmp_path, damage):
    trace, uncached, entry = _warm(tmp_path)
    info = entry / "entry.json"
    info.unlink()
    if damage == "folder":
        info.mkdir()
    elif damage != "missing":
        info.write_text(damage)
    _assert_rebuilt(trace, uncached, noted=damage not in ("missing", "folder"))  # an unfinished entry: a miss


@pytest.mark.parametrize("damage", [b"", b"0.0.1 x 1 2 3", None])
def test_damaged_stamp_is_a_silent_rebuild(tmp_path, damage):
    """The stamp names the traceview that wrote the entry: damaged, the entry reads as another
    version's, a miss that the next store replaces."""
    trace, uncached, entry = _warm(tmp_path)
    stamp = entry / "stamp"
    if damage is None:
        data = bytearray(stamp.read_bytes())
        data[len(data) // 2] ^= 4
        damage = bytes(data)
    stamp.write_bytes(damage)
    _assert_rebuilt(trace, uncached, noted=False)


def test_missing_table_is_an_unfinished_entry(tmp_path):
    trace, uncached, entry = _warm(tmp_path)
    (entry / "ops.arrow").unlink()
    _assert_rebuilt(trace, uncached, noted=False)


def test_entry_of_another_traceview_is_a_silent_miss(tmp_path):
    trace, uncached, entry = _warm(tmp_path)
    (entry / "stamp").write_text("0.0.1 other-code 1 1.0 1.0")
    (entry / "events.arrow").write_bytes(b"written by something else")
    _assert_rebuilt(trace, uncached, noted=False)


def test_half_written_entry_is_never_served(tmp_path):
    """Only a complete entry is renamed into place; a writer's temporary folder is never read."""
    trace, uncached, entry = _warm(tmp_path)
    half = entry.with_name(entry.name + ".tmp-writer")
    os.replace(entry, half)
    (half / "kernels.arrow").write_bytes(b"")
    assert cache_mod.lookup(str(trace), None) is None
    _assert_rebuilt(trace, uncached, noted=False)
    assert half.exists()  # another writer's folder is left alone until it is old


def test_concurrent_cold_loads_agree(tmp_path):
    """Three processes load one trace into one empty cache at once: same output, no note."""
    trace = _write_trace(tmp_path / "t.json", _events(200))
    cmd = [sys.executable, "-m", "traceview", "kernels", str(trace), "--format", "json"]
    procs = [
        subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(3)
    ]
    outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], outs
    assert len({o for o, _ in outs}) == 1 and not any(NOTE in e for _, e in outs)
    again = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert again.stdout == outs[0][0] and NOTE not in again.stderr


def test_reader_of_a_replaced_entry_sees_no_damage(tmp_path):
    """Stores replace the entry of one trace, alternately with two different contents, while
    lookups read it: a reader gets one whole entry or a miss, never a mix (a mix would fail
    verification and be reported as damage)."""
    import dataclasses
    import threading

    trace, uncached, _entry = _warm(tmp_path)
    other = tv.load(_write_trace(tmp_path / "other.json", _events(41)), cache=False)
    versions = [uncached, dataclasses.replace(other, path=str(trace))]
    seen = cache_mod.identity(str(trace))
    stop, results = threading.Event(), []

    def writer():
        i = 0
        while not stop.is_set():
            cache_mod.store(versions[i % 2], None, seen)
            i += 1

    t = threading.Thread(target=writer)
    t.start()
    try:
        for _ in range(80):
            notes = []
            hit = cache_mod.lookup(str(trace), None, seen, notes=notes)
            results.append((hit, notes))
    finally:
        stop.set()
        t.join()
    assert [notes for _, notes in results if notes] == []
    hits = [hit for hit, _ in results if hit is not None]
    assert hits
    for hit in hits:
        assert_same(versions[len(hit.kernels) == 41], hit)
