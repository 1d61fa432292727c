"""``load(path) -> Trace``: decode (read) -> events (model) -> link -> annotate (sources, classify) -> Trace,
each stage once, with the cache in front; and nothing else."""

from __future__ import annotations

import functools
import os
import warnings as py_warnings
from dataclasses import replace

from .classify import annotate
from .deferred import replaced
from .devices import load_devices
from .errors import LateNote, NotATraceError, TraceReadError
from .launches import completeness
from .limits import give_back_freed_memory
from .link import Linked, link
from .model import Trace, build_events
from .read import DEFAULT_MAX_BYTES, DEFAULT_MAX_RATIO, read
from .read.columns import gc_paused
from .read.source import RATIO_FLOOR, over_cap, over_ratio
from .sources import op_stacks, user_frames


def load(
    path,
    *,
    salvage: bool = False,
    max_bytes: int = DEFAULT_MAX_BYTES,
    max_ratio: float | None = DEFAULT_MAX_RATIO,
    rules=None,
    cache=None,
    devices=None,
) -> Trace:
    """Load one saved PyTorch profiler trace (.json, .json.gz, any gzip) into a Trace.

    ``salvage=True`` loads a truncated trace up to the cut and warns what was lost.
    ``max_bytes`` caps the decompressed text; ``max_ratio`` refuses a gzip file whose text is more
    than that many times its compressed size (past 64 MiB of text: a gzip bomb; None: no limit).
    ``rules`` adds or overrides kernel classification rules (see traceview.classify).
    ``cache`` (True, False, or a folder) controls the columnar cache, where available.
    ``devices`` (a TOML file like ``traceview/rules/devices.toml``) adds or replaces GPUs in the
    peak table the efficiency columns use; it is checked here, before the trace is read.
    The Trace holds ``rules``, ``devices`` and ``salvage`` as given (its ``loaded_with``).
    """
    path = os.fspath(path)
    if devices is not None:
        devices = os.fspath(devices)
        load_devices(devices)  # a bad file fails now, in one line
    held = {
        "rules": os.fspath(rules) if isinstance(rules, (str, os.PathLike)) else rules,
        "devices": devices,
        "salvage": salvage,
    }
    return _load(path, held, max_bytes=max_bytes, max_ratio=max_ratio, cache=cache)


def _load(path: str, held: dict, *, max_bytes: int, max_ratio, cache) -> Trace:
    """The cached Trace, else a new one; ``held``: the options the Trace is built with."""
    from . import cache as cache_mod

    cached = cache is not False and not held["salvage"] and held["rules"] is None
    # The entry is keyed on the file as it was before reading it, and stored only if it is still
    # that file after: a trace replaced or rewritten meanwhile is never cached under either identity.
    seen = cache_mod.identity(path) if cached else None
    notes: list = []
    if seen is not None:
        warnings: list = []  # the Trace's own list: a table rebuilt later says so there
        limits = {"max_bytes": max_bytes, "max_ratio": max_ratio}
        rebuild = functools.partial(_rebuilt, path, held, seen, warnings, **limits)
        hit = cache_mod.lookup(path, cache, seen, notes=notes, rebuild=rebuild)
        if hit is not None:
            _check_size(hit, max_bytes, max_ratio)  # the limits hold whether or not the trace was cached
            # the entry holds what the trace is; this load's options and notes make this Trace
            # no derived table worked out under other options (devices) follows; the entry's mark does
            derived = cache_mod.entry_mark(hit)
            warnings += hit.warnings + notes
            return replaced(hit, warnings=warnings, cached=True, derived=derived, **held)
    try:
        trace = _load_uncached(path, held, max_bytes=max_bytes, max_ratio=max_ratio)
    except MemoryError:  # the up-front memory check is an estimate; never crash with a bare MemoryError
        from .limits import available_memory

        avail = available_memory()
        left = f" ({avail / 2**30:.1f} GiB available now)" if avail is not None else ""
        raise TraceReadError(path, f"ran out of memory while loading{left}") from None
    if seen is not None:
        if cache_mod.identity(path) == seen:
            cache_mod.store(trace, cache, seen)
        else:
            notes.append(
                f"{path}: the file changed while it was read, so this result may mix its old and "
                "new contents; not cached (load it again once nothing is writing it)"
            )
    # after the store: these notes are about this load, never cached
    return replace(trace, warnings=trace.warnings + notes) if notes else trace


def _rebuilt(path: str, held: dict, seen: dict, warnings: list, name: str, note: str, **limits):
    """The table ``name`` of a cache hit whose entry turned out damaged when the table was first read
    (``cache.lookup``'s ``rebuild``): read again from the trace, which must still be the file the
    entry was for (else the trace's other tables and this one would be of two files); the note
    goes to the trace's warnings and, as they were said already, out as a ``LateNote``."""
    from . import cache as cache_mod

    if cache_mod.identity(path) != seen:
        why = "changed while it was analysed, and its cache entry failed verification: run again"
        raise TraceReadError(path, why)
    table = getattr(_load_uncached(path, held, **limits), name)
    warnings.append(note)
    py_warnings.warn(note, LateNote, stacklevel=2)
    return table


def _load_uncached(path: str, held: dict, *, max_bytes: int, max_ratio) -> Trace:
    """decode -> events (model) -> link -> annotate (sources, classify) -> Trace, each stage once.
    The garbage collector waits meanwhile: the stages make few reference cycles, and its passes
    over every live object (a dozen at 1 GB) found nothing to free."""
    with gc_paused():
        return _stages(path, held, max_bytes=max_bytes, max_ratio=max_ratio)


def _stages(path: str, held: dict, *, max_bytes: int, max_ratio) -> Trace:
    raw = read(path, max_bytes=max_bytes, max_ratio=max_ratio, salvage=held["salvage"])
    if not raw.n_events:  # an all-zero summary would read as a measurement; there is nothing to analyse
        raise NotATraceError(path, "no trace events (an empty capture): nothing to analyse")
    built = build_events(raw.columns, raw.meta)
    raw.columns = {}  # the events frame holds what it needs: the raw columns go before linking (peak memory)
    linked = link(built)
    events, steps, counts, notes, start = built.events, built.steps, built.counts, built.notes, built.start_ns
    # the flow table's columns and the op arg texts (a tenth of the file at 1 GB) are link's alone:
    # they go, and what link freed goes back to the system, before annotate and the completeness check
    del built
    give_back_freed_memory()
    activities, ops, stack_notes = _annotate(linked, events, held["rules"])
    notes = [*notes, *linked.notes, *stack_notes]
    trace = Trace(
        path=path,
        events=events,
        kernels=activities,
        ops=ops,
        steps=steps,
        meta=raw.meta,
        warnings=[*raw.warnings, *_phase_warnings(path, counts), *(f"{path}: {n}" for n in notes)],
        stats={
            "n_events": raw.n_events,
            "json_bytes": raw.json_bytes,
            "decoder": raw.decoder,
            "phases": counts,
            "start_ns": start,
            **linked.shares,
        },
        memory=linked.memory,
        **held,
    )
    # first: a file that lost GPU work under-reports every figure, whatever is asked of it (issue 32)
    incomplete = completeness(trace)["warning"]
    return replace(trace, warnings=[incomplete, *trace.warnings]) if incomplete else trace


def _annotate(linked: Linked, events, rules) -> tuple:
    """The annotate stage: each op's Python stack and the user's line in it (``sources``), each GPU
    activity's category (``classify``); and notes on the stacks."""
    ops = linked.ops
    ops["stack"], notes = op_stacks(events, ops, ops.pop("call_stack").array)
    ops["source"], ops["call"] = user_frames(ops["stack"])
    return annotate(linked.activities, rules=rules), ops, notes


def _check_size(trace: Trace, max_bytes: int, max_ratio) -> None:
    text = trace.stats.get("json_bytes", 0)
    if text > max_bytes:
        raise TraceReadError(trace.path, over_cap("larger than", max_bytes))
    # the whole file's ratio (a plain file's is 1): the reader refuses a stream that passes it
    if max_ratio is None or text <= RATIO_FLOOR:
        return
    try:
        size = os.stat(trace.path).st_size
    except OSError:  # gone since the cache looked it up: nothing to compare with
        return
    if text > max_ratio * size:
        raise TraceReadError(trace.path, over_ratio(max_ratio, text, size))


def _phase_warnings(path: str, counts: dict) -> list[str]:
    be = counts.get("B", 0) + counts.get("E", 0)
    return [f"{path}: {be} begin/end (B/E) events are not supported and were skipped"] if be else []
