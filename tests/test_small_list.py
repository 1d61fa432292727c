"""Issue 21, item 9: the smaller list a new user found, one regression test (or more) each.

Real files and real subprocesses; corpus traces where the finding was about real traces.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

import traceview as tv

from corpus import CORPUS, SKIP_REASON

KINETO = CORPUS / "kineto"
SMALL = ["docs_traces__after_fix_trace.json.gz", "docs_traces__before_fix_trace.json.gz"]


def _cli(*args, cwd=None, cache=None):
    env = {**os.environ, "TRACEVIEW_CACHE_DIR": str(cache)} if cache else dict(os.environ)
    return subprocess.run([sys.executable, "-m", "traceview", *map(str, args)],
                          capture_output=True, text=True, cwd=cwd, env=env)


def _small_traces(folder):
    if not all((KINETO / n).is_file() for n in SMALL):
        pytest.skip(SKIP_REASON)
    folder.mkdir(parents=True, exist_ok=True)
    for n in SMALL:
        shutil.copy(KINETO / n, folder / n)
    return folder


# ---------------------------------------------------------------- 1. an empty capture

def test_empty_trace_events_is_an_error_with_one_line(tmp_path):
    path = tmp_path / "empty.json"
    path.write_text('{"traceEvents": []}')
    proc = _cli("summary", path, "--no-cache")
    assert proc.returncode == 1 and proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and str(path) in lines[0] and "no trace events" in lines[0], proc.stderr


def test_empty_trace_in_a_folder_is_skipped_with_a_warning(tmp_path):
    folder = _small_traces(tmp_path / "d")
    (folder / "empty.json").write_text('{"traceEvents": []}')
    proc = _cli("compare", folder, "--no-cache")
    assert proc.returncode == 0, proc.stderr
    assert "skipped" in proc.stderr and "empty.json" in proc.stderr and "no trace events" in proc.stderr
    with pytest.raises(tv.NotATraceError):
        tv.load(folder / "empty.json", cache=False)
