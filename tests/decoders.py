"""Read one file with each decoder and require the same result (issue 23's differential check).

``same_read(path)`` reads the file with the msgspec decoder (``TRACEVIEW_DECODER=python``)
and with the compiled one, and compares everything the reader hands on: every column
(codes, distinct values with their types, int64 arrays, masks), the event and dropped
counts, the metadata, the warnings, or the error's type and message. Shared by the
fuzz tests (every fuzz case goes through both) and ``test_compiled_decoder.py``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from contextlib import contextmanager

import numpy as np

from traceview.errors import TraceviewError
from traceview.read import compiled, read
from traceview.read.codes import Codes, IntColumn

BUILT = compiled.built()


@contextmanager
def decoder(name: str):
    old = os.environ.get(compiled.ENV)
    os.environ[compiled.ENV] = name
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(compiled.ENV, None)
        else:
            os.environ[compiled.ENV] = old


def outcome(path, **kw):
    """What ``read`` gives: the RawTrace, or the TraceviewError it raised."""
    try:
        return read(path, **kw)
    except TraceviewError as exc:
        return exc


def same_read(path, **kw):
    """The compiled decoder's RawTrace (or error), after checking it equals msgspec's."""
    with decoder(compiled.PYTHON):
        want = outcome(path, **kw)
    with decoder(compiled.COMPILED):
        got = outcome(path, **kw)
    assert_same(want, got)
    return got


def assert_same(want, got) -> None:
    if isinstance(want, Exception) or isinstance(got, Exception):
        assert (type(want), str(want)) == (type(got), str(got))
        return
    assert (want.n_events, want.json_bytes, want.warnings) == (got.n_events, got.json_bytes, got.warnings)
    assert repr(want.meta) == repr(got.meta)
    same_columns(want.columns, got.columns, "columns")


def same_columns(a, b, where: str) -> None:
    """Deep equality; NaN equals NaN and 1 never equals 1.0 or True (types are compared)."""
    if isinstance(a, Mapping):  # a dict, or the lazily joined flow columns
        assert isinstance(b, Mapping) and list(a) == list(b), (where, list(a), b)
        for key in a:
            same_columns(a[key], b[key], f"{where}.{key}")
    elif isinstance(a, Codes):
        assert _typed(a.uniques) == _typed(b.uniques), where
        assert np.array_equal(a.codes.astype(np.int64), b.codes.astype(np.int64)), where
    elif isinstance(a, IntColumn):
        assert np.array_equal(a.mask, b.mask), where
        assert np.array_equal(a.values, b.values), where
    elif isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and np.array_equal(a, b), where
    else:
        assert _typed([a]) == _typed([b]), where


def _typed(values: list) -> list:
    return [(type(v).__name__, repr(v)) for v in values]


def read_peak(path, n_events: int) -> int:
    """The most memory (tracemalloc) one ``read`` of ``path`` held, which must find ``n_events``."""
    import tracemalloc

    tracemalloc.start()
    try:
        assert read(path).n_events == n_events
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
