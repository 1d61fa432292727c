"""Test session setup.

* ``TRACEVIEW_CACHE_DIR`` points at a fresh temporary folder for the whole session (set in
  ``os.environ``, so subprocesses the tests start inherit it): the suite never writes to the
  user's ``~/.cache/traceview`` nor reads entries from it. Removed at the end of the session.
* At the end of the run, one line says how many corpus tests were skipped and why.
"""
from __future__ import annotations

import os
import shutil
import tempfile

import corpus

_saved: dict = {}


def pytest_configure(config):
    if hasattr(config, "workerinput"):  # an xdist worker: the controller set it up already
        return
    folder = tempfile.mkdtemp(prefix="traceview-test-cache-")
    _saved["env"] = os.environ.get("TRACEVIEW_CACHE_DIR")
    _saved["folder"] = folder
    os.environ["TRACEVIEW_CACHE_DIR"] = folder


def pytest_unconfigure(config):
    folder = _saved.pop("folder", None)
    if folder is None:
        return
    old = _saved.pop("env", None)
    if old is None:
        os.environ.pop("TRACEVIEW_CACHE_DIR", None)
    else:
        os.environ["TRACEVIEW_CACHE_DIR"] = old
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
