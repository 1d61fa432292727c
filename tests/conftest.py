"""Test session setup.

* ``TRACEVIEW_CACHE_DIR`` points at a fresh temporary folder for the whole session (set in
  ``os.environ``, so subprocesses the tests start inherit it): the suite never writes to the
  user's ``~/.cache/traceview`` nor reads entries from it. So do ``MPLCONFIGDIR`` (matplotlib's
  font cache) and ``XDG_CACHE_HOME``/``XDG_CONFIG_HOME`` (headless chromium's profile bits):
  the test command leaves ``~/.cache`` and ``~/.config`` alone. Removed at the end of the session.
* At the end of the run, one line says how many corpus tests were skipped and why.
* The tests of the reader (``READER_TESTS``) are marked ``reader``: CI runs them a second time
  with the compiled code turned off (``TRACEVIEW_DECODER=python -m reader``, issue 23): the
  msgspec decoder and link's numpy tree walks.
* ``walks``: a test taking it runs twice, with the compiled tree walks and with numpy's.
"""

from __future__ import annotations

import os
import shutil
import tempfile

import corpus
import pytest

_saved: dict = {}

READER_TESTS = {
    "test_load_quirks.py",
    "test_bad_input.py",
    "test_salvage.py",
    "test_exact_ints.py",
    "test_corpus_exact.py",
    "test_not_a_trace.py",
    "test_limits.py",
    "test_plausible_input.py",
    "test_link_serial.py",
}  # not test_fuzz.py: each of its cases is read by both decoders already (tests/decoders.py)


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.path.name in READER_TESTS:
            item.add_marker("reader")


def pytest_configure(config):
    if hasattr(config, "workerinput"):  # an xdist worker: the controller set it up already
        return
    folder = tempfile.mkdtemp(prefix="traceview-test-cache-")
    _saved["folder"] = folder
    _saved["env"] = {name: os.environ.get(name) for name in _SESSION_DIRS}
    for name, sub in _SESSION_DIRS.items():
        os.environ[name] = os.path.join(folder, sub) if sub else folder


_SESSION_DIRS = {
    "TRACEVIEW_CACHE_DIR": "traceview",
    "MPLCONFIGDIR": "matplotlib",
    "XDG_CACHE_HOME": "xdg-cache",
    "XDG_CONFIG_HOME": "xdg-config",
}


def pytest_unconfigure(config):
    folder = _saved.pop("folder", None)
    if folder is None:
        return
    for name, old in _saved.pop("env", {}).items():
        if old is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = old
    shutil.rmtree(folder, ignore_errors=True)


def _skip_reason(report) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2])
    return str(longrepr or "")


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if corpus.CORPUS.is_dir():
        return
    skipped = [r for r in terminalreporter.stats.get("skipped", []) if "corpus" in _skip_reason(r).lower()]
    if skipped:
        terminalreporter.write_line(f"{len(skipped)} corpus tests skipped: {corpus.SKIP_REASON}")


REQUIRE_COMPILED = os.environ.get("TRACEVIEW_REQUIRE_COMPILED") == "1"  # CI: a missing build fails


@pytest.fixture(params=["compiled", "numpy"])
def walks(request, monkeypatch):
    """Which tree walks ``traceview.trees`` uses in this test: compiled (skipped where not built,
    failed where CI requires the build) or numpy's (compiled code turned off)."""
    from traceview import trees

    if request.param == "compiled":
        if not trees.BUILT:
            assert not REQUIRE_COMPILED, "TRACEVIEW_REQUIRE_COMPILED=1 but traceview._ctree is missing"
            pytest.skip("the compiled tree walks are not built in this install")
        monkeypatch.delenv("TRACEVIEW_DECODER", raising=False)
    else:
        monkeypatch.setenv("TRACEVIEW_DECODER", "python")
    return request.param
