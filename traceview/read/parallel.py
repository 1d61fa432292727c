"""Decode the chunks of a large traceEvents array on several cores.

For a large text (``MIN_BYTES``) on a machine with more than one core and the
``fork`` start method, the fast-cut chunks (``chunks.chunk_bounds``) go to worker
processes: forked workers share the parent's memory, so they receive only each
chunk's bounds and cut the text themselves; each decodes its chunk with
``columns.decode_chunk`` and sends back the compact ``ChunkPart``. The parent
appends the parts in chunk order with a ``ColumnBuilder``, exactly as the serial
decoder does, so the result is identical.

``TRACEVIEW_WORKERS=1`` turns this off; ``TRACEVIEW_WORKERS=N`` asks for N workers.
A chunk that does not decode raises ``RefusedChunk``, as on the serial path (the checked
decoder runs next); any failure of the pool itself (no fork, a worker killed) gives
``None``: declined, the serial path runs.
"""

from __future__ import annotations

import os
from dataclasses import replace

import numpy as np

from ..errors import TraceReadError
from .chunks import chunk_bounds, cut
from .codes import Codes
from .columns import ChunkPart, ColumnBuilder, EventColumns, RefusedChunk, decode_chunk

MIN_BYTES = 64 * 2**20  # below this the pool's start-up and transfers cost more than they save
MAX_WORKERS = 8

_TEXT = None  # in a worker: the events text, inherited from the parent at fork (never copied)
_PATH = ""


def workers(nbytes: int) -> int:
    """How many worker processes to use for ``nbytes`` of event text (0 or 1: none)."""
    wanted = wanted_workers()
    if (wanted is not None and wanted <= 1) or nbytes < MIN_BYTES or not _can_fork():
        return 0
    if wanted is not None:
        return wanted
    import threading

    if threading.active_count() > 1:
        # Forking a process that runs other Python threads (a notebook kernel, a web
        # server) can deadlock the child; only an explicit TRACEVIEW_WORKERS=N risks it.
        return 0
    cores = usable_cores()
    return min(cores, MAX_WORKERS) if cores > 1 else 0


def usable_cores() -> int:
    """The cores this process may run on (its affinity, where the platform tells it)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def wanted_workers() -> int | None:
    """TRACEVIEW_WORKERS as a number, or None when unset or not a number."""
    try:
        return int(os.environ.get("TRACEVIEW_WORKERS", "").strip())
    except ValueError:
        return None


def _can_fork() -> bool:
    try:
        import multiprocessing

        return "fork" in multiprocessing.get_all_start_methods()
    except Exception:  # pragma: no cover - exotic platforms
        return False


def event_columns(events_raw, path: str) -> EventColumns | None:
    """The serial decoder's result computed by worker processes; ``None`` when that does not
    pay or the pool fails. Raises ``RefusedChunk`` where a chunk is not valid JSON."""
    n = workers(len(events_raw))
    bounds = chunk_bounds(events_raw) if n >= 2 else []
    if len(bounds) < 2:
        return None
    try:
        got = _run_pool(events_raw, path, bounds, min(n, len(bounds)))
    except Exception:  # the pool could not start or a worker died: the serial path will do
        return None
    if got is None:
        raise RefusedChunk
    return got


def _run_pool(events_raw, path: str, bounds: list, n: int):
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    builder = ColumnBuilder()
    # with fork, initargs reach the workers through the forked memory, not a pipe
    with ProcessPoolExecutor(
        max_workers=n,
        mp_context=multiprocessing.get_context("fork"),
        initializer=_init,
        initargs=(events_raw, path),
    ) as pool:
        for part in pool.map(decode_bound, bounds):
            if part is None:  # a chunk msgspec refused
                pool.shutdown(wait=True, cancel_futures=True)
                return None
            builder.add(part)
            del part  # free each part once merged: they arrive faster than they are used
    return builder.finish()


def _init(text, path: str) -> None:
    global _TEXT, _PATH
    _TEXT, _PATH = text, path


def decode_bound(bound: tuple) -> ChunkPart | None:
    """In a forked worker: one chunk's columns, or None if the chunk is not valid JSON."""
    try:
        part = decode_chunk(cut(_TEXT, bound), _PATH)
    except TraceReadError:
        return None
    return replace(part, x_codes=_narrow(part.x_codes), flow_codes=_narrow(part.flow_codes))


def _narrow(codes: dict) -> dict:
    """int32 codes where they fit: half the bytes to send back to the parent."""
    return {
        name: Codes(c.codes.astype(np.int32), c.uniques) if len(c.uniques) < 2**31 - 1 else c
        for name, c in codes.items()
    }
