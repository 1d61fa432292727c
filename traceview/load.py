"""``load(path) -> Trace``: read -> model -> link -> classify -> cache, and nothing else."""

from __future__ import annotations

import os

from .classify import annotate
from .errors import NotATraceError, TraceReadError
from .launches import completeness
from .link import link, link_memory
from .model import Trace, build_events, gpu_activity_table, step_table
from .read import DEFAULT_MAX_BYTES, DEFAULT_MAX_RATIO, read
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
    """
    path = os.fspath(path)
    if devices is not None:
        from .devices import load_devices

        load_devices(os.fspath(devices))  # a bad file fails now, in one line
    trace = _load(path, salvage=salvage, max_bytes=max_bytes, max_ratio=max_ratio, rules=rules, cache=cache)
    trace.devices = os.fspath(devices) if devices is not None else None
    given_rules = os.fspath(rules) if isinstance(rules, (str, os.PathLike)) else rules
    trace.loaded_with = {"rules": given_rules, "devices": trace.devices, "salvage": salvage}
    return trace


def _load(path: str, *, salvage: bool, max_bytes: int, max_ratio, rules, cache) -> Trace:
    from . import cache as cache_mod

    cached = cache is not False and not salvage and rules is None
    # The entry is keyed on the file as it was before reading it, and stored only if it is still
    # that file after: a trace replaced or rewritten meanwhile is never cached under either identity.
    seen = cache_mod.identity(path) if cached else None
    notes: list = []
    if seen is not None:
        hit = cache_mod.lookup(path, cache, seen, notes=notes)
        if hit is not None:
            _check_size(hit, max_bytes, max_ratio)  # the limits hold whether or not the trace was cached
            hit.cached = True
            return hit
    try:
        trace = _load_uncached(path, salvage=salvage, max_bytes=max_bytes, max_ratio=max_ratio, rules=rules)
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
    trace.warnings.extend(notes)  # after the store: these notes are about this load, never cached
    return trace


def _load_uncached(path: str, *, salvage: bool, max_bytes: int, max_ratio, rules) -> Trace:
    raw = read(path, max_bytes=max_bytes, max_ratio=max_ratio, salvage=salvage)
    if not raw.n_events:  # an all-zero summary would read as a measurement; there is nothing to analyse
        raise NotATraceError(path, "no trace events (an empty capture): nothing to analyse")
    built = build_events(raw.columns, raw.meta)
    raw.columns = {}  # the events frame holds what it needs: the raw columns go before linking (peak memory)
    warnings = (
        list(raw.warnings) + _phase_warnings(path, built.counts) + [f"{path}: {n}" for n in built.notes]
    )
    steps = step_table(built.events)
    activities, ops, shares, link_notes = link(
        built.events, built.flows, steps, gpu_activity_table(built.events), built.op_args
    )
    warnings += [f"{path}: {n}" for n in link_notes]
    ops["stack"], stack_notes = op_stacks(built.events, ops, ops.pop("call_stack").array)
    warnings += [f"{path}: {n}" for n in stack_notes]
    ops["source"], ops["call"] = user_frames(ops["stack"])
    memory = link_memory(built.memory, ops, steps)
    activities = annotate(activities, rules=rules)
    stats = {
        "n_events": raw.n_events,
        "json_bytes": raw.json_bytes,
        "decoder": raw.decoder,
        "phases": built.counts,
        **shares,
    }
    trace = Trace(
        path=path,
        events=built.events,
        kernels=activities,
        ops=ops,
        steps=steps,
        meta=raw.meta,
        warnings=warnings,
        stats=stats,
        memory=memory,
    )
    # first: a file that lost GPU work under-reports every figure, whatever is asked of it (issue 32)
    incomplete = completeness(trace)["warning"]
    trace.warnings[:0] = [incomplete] * bool(incomplete)
    return trace


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
