"""Decode the chunks of a large traceEvents array on several cores.

``read.event_columns`` cuts the events text into ~32 MB chunks and turns each into
columns. For a large text (``MIN_BYTES``) on a machine with more than one core and
the ``fork`` start method, the chunks go to worker processes instead: forked
workers share the parent's memory, so they receive only each chunk's bounds and
cut the text themselves; each decodes its chunk and sends back compact columns
(numpy arrays, and per-chunk factorized codes plus their few distinct values). The
parent merges them in chunk order, mapping each chunk's codes onto one table of
distinct values in order of first appearance, so the result is identical to the
serial path's.

``TRACEVIEW_WORKERS=1`` turns this off; ``TRACEVIEW_WORKERS=N`` asks for N workers.
A chunk that does not decode makes the caller start over on the serial, checked
path (``RECHECK``), as the serial path does; any failure of the pool itself (no
fork, a worker killed) gives ``None`` and the caller runs the serial path.
"""
from __future__ import annotations

import os

import numpy as np

MIN_BYTES = 64 * 2**20  # below this the pool's start-up and transfers cost more than they save
MAX_WORKERS = 8
RECHECK = object()  # a chunk did not decode: re-run everything on the checked path

_TEXT = None  # in a worker: the events text, inherited from the parent at fork (never copied)
_PATH = ""


def workers(nbytes: int) -> int:
    """How many worker processes to use for ``nbytes`` of event text (0 or 1: none)."""
    env = os.environ.get("TRACEVIEW_WORKERS", "").strip()
    wanted = None
    if env:
        try:
            wanted = int(env)
        except ValueError:
            wanted = None
    if wanted is not None and wanted <= 1:
        return 0
    if nbytes < MIN_BYTES:
        return 0
    try:
        import multiprocessing

        if "fork" not in multiprocessing.get_all_start_methods():
            return 0
    except Exception:  # pragma: no cover - exotic platforms
        return 0
    if wanted is not None:
        return wanted
    import threading

    if threading.active_count() > 1:
        # Forking a process that runs other Python threads (a notebook kernel, a web
        # server) can deadlock the child; only an explicit TRACEVIEW_WORKERS=N risks it.
        return 0
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return min(cores, MAX_WORKERS) if cores > 1 else 0


def event_columns(events_raw, path: str):
    """``read.event_columns``'s result computed by worker processes; ``None`` when that
    does not pay or the pool fails, ``RECHECK`` when some chunk is not valid JSON."""
    from . import read

    n = workers(len(events_raw))
    if n < 2:
        return None
    bounds = read.chunk_bounds(events_raw, read._CHUNK_BYTES)
    if len(bounds) < 2:
        return None
    n = min(n, len(bounds))
    counts, fx, ff, parts = read._accumulators()
    n_events = dropped = 0
    try:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        # with fork, initargs reach the workers through the forked memory, not a pipe
        with ProcessPoolExecutor(max_workers=n, mp_context=multiprocessing.get_context("fork"),
                                 initializer=_init, initargs=(events_raw, path)) as pool:
            for got in pool.map(_worker, bounds):
                if got is None:
                    pool.shutdown(wait=True, cancel_futures=True)
                    return RECHECK
                n_chunk, lost, chunk_counts, fcodes, fflows, chunk_parts = got
                n_events += n_chunk
                dropped += lost
                counts.update(chunk_counts)
                for name, (codes, uniques) in fcodes.items():
                    fx[name].add_codes(codes, uniques)
                for name, (codes, uniques) in fflows.items():
                    ff[name].add_codes(codes, uniques)
                for key, value in chunk_parts.items():
                    parts[key].append(value)
                del got
    except Exception:  # the pool could not start or a worker died: the serial path will do
        return None
    return read._finish(counts, fx, ff, parts), n_events, dropped


def _init(text, path: str) -> None:
    global _TEXT, _PATH
    _TEXT, _PATH = text, path


def _worker(bound):
    """One chunk's columns, in a forked worker: see ``event_columns``."""
    from . import read

    lo, hi, head, tail = bound
    chunk = b"".join((head, memoryview(_TEXT)[lo:hi], tail))
    try:
        events, lost, kept = read.decode_events(chunk, _PATH)
    except read.TraceReadError:
        return None
    counts, fx, ff, parts = read._accumulators()
    read._chunk_columns(events, read._Exact(chunk, kept), counts, fx, ff, parts)
    n_chunk = len(events)
    del events, chunk
    return n_chunk, lost, dict(counts), _codes(fx), _codes(ff), read.join_parts(parts)


def _codes(factorizers: dict) -> dict:
    """Each factorizer's codes (int32 when they fit: half the bytes to send) and uniques."""
    out = {}
    for name, f in factorizers.items():
        done = f.finish()
        codes = done.codes.astype(np.int32) if len(done.uniques) < 2**31 - 1 else done.codes
        out[name] = (codes, done.uniques)
    return out
