"""Recover the complete part of a damaged trace (``load(..., salvage=True)``).

The usual damage is a cut: the profiler or the job died, or the disk filled,
while the writer was in the middle of the ``traceEvents`` array. Kineto writes

    {"schemaVersion": 1, "deviceProperties": [...], ..., "traceEvents": [ {...}, {...}, ...
     ], "traceName": "...", "baseTimeNanoseconds": ...}

so a cut usually lands inside the array, sometimes in the metadata after it.
``salvage_prefix`` finds where the valid text ends (msgspec says where it
stopped), scans that prefix for its JSON structure with numpy (strings and
escapes tracked, no recursion, linear in the size), and closes the document
after the last complete event, or, when the array itself was complete, after
the last complete metadata member. Whatever it drops is reported in a
warning; it never invents or alters an event.
"""

from __future__ import annotations

import re

import msgspec
import numpy as np

from ..errors import TraceReadError
from .scan import COMMA as _COMMA
from .scan import KEY as _KEY
from .scan import Text, find_key, skip_ws, structure
from .source import StreamCut
from .unfit import may_hold_unfit, without_unfit_events

_BYTE_RE = re.compile(r"\(byte (\d+)\)")
_DEEP = "nested too deeply"
_VALIDATOR = msgspec.json.Decoder(msgspec.Raw)


def salvage_prefix(data: Text, path: str, cut: StreamCut | None = None) -> tuple[Text, str | None]:
    """A decodable document made of the complete part of ``data``, and a warning.

    ``cut``: where the gzip stream ``data`` came from stopped early, if it did.
    Intact input comes back unchanged with no warning (unless its gzip stream
    was cut after the JSON text was complete). Raises ``TraceReadError`` when
    nothing can be recovered.
    """
    gz = cut.describe(path, len(data)) if cut is not None else None
    stop, problem = _valid_extent(data)
    probe = data
    if problem == _DEEP or (stop is not None and may_hold_unfit(data)):  # one event's problem is no cut:
        probe = without_unfit_events(data)[0]  # look for the cut with such events blanked (same length)
        stop, problem = _valid_extent(probe) if probe is not data else (stop, problem)
    if stop is None:  # whole (or too deep outside any one event: the reader says so)
        return data, gz
    raw = probe if stop == len(probe) else probe[:stop]
    fixed, kept, kept_bytes, avg, kind = _close(raw, path, problem)
    if probe is not data:  # the kept text as written: the reader blanks those events again
        fixed = data[:kept_bytes] + fixed[kept_bytes:]
    note = _note(path, problem, kind, kept, len(data) - kept_bytes, avg)
    return fixed, f"{gz}; {note[len(path) + 2 :]}" if gz else note


def _note(path: str, problem: str, kind: str, kept: int, lost: int, avg: float | None) -> str:
    """The warning for what ``_close`` kept and dropped (``lost`` bytes)."""
    if kind == "junk":
        return (
            f"{path}: salvaged a damaged trace ({problem}): the JSON document is complete; "
            f"dropped the last {lost} bytes (junk after its end)"
        )
    if kind == "metadata":
        return (
            f"{path}: salvaged a damaged trace ({problem}): all {kept} events are complete; "
            f"dropped the last {lost} bytes (trailing metadata after the traceEvents array)"
        )
    est = max(1, round(lost / avg)) if lost and avg else 0  # "events" always has its average
    return (
        f"{path}: salvaged a damaged trace ({problem}): kept {kept} complete events; "
        f"dropped the last {lost} bytes (about {est} event{'s' if est != 1 else ''} "
        f"at {avg:.0f} bytes per event)"
    )


def _valid_extent(data) -> tuple[int | None, str]:
    """(end of the valid JSON prefix, what went wrong), or (None, "") if ``data`` decodes, or
    (None, _DEEP) if it is nested too deeply to tell."""
    try:
        _VALIDATOR.decode(data)
        return None, ""
    except msgspec.DecodeError as exc:
        text = str(exc)
        m = _BYTE_RE.search(text)
        if "truncated" in text.lower() or (m and "trailing" not in text and int(m.group(1)) >= len(data)):
            return len(data), f"the text ends at byte {len(data)} mid-document"
        at = min(int(m.group(1)), len(data)) if m else len(data)
        reason = text.split(" (byte")[0].removeprefix("JSON is malformed: ")
        return at, f"invalid JSON at byte {at}: {reason}"
    except RecursionError:
        return None, _DEEP  # too deep to decode: salvage cannot help, unless one event is (unfit)


def _close(raw: Text, path: str, problem: str):
    """(closed document, events kept, bytes of ``raw`` kept, bytes per event, kind): kind is
    "events" (cut inside the array), "metadata" (cut after it) or "junk" (a whole document, then junk)."""
    buf = np.frombuffer(raw, dtype=np.uint8)
    start = skip_ws(raw)
    first = raw[start : start + 1]
    quotes, brackets, depth = structure(buf)
    whole = np.flatnonzero(depth == 0)
    if len(whole):  # the top-level value closed: what follows it is junk
        end = int(brackets[whole[0]]) + 1
        if _decodes(raw[:end]):
            return raw[:end], 0, end, None, "junk"
    if first == b"[":
        return _close_array(raw, path, brackets, depth, array_at=start, level=1, suffix=b"]", problem=problem)
    if first != b"{":
        raise TraceReadError(path, f"cannot salvage: the text does not start a JSON object ({problem})")
    key = find_key(raw, quotes, brackets, depth)
    if key is None:
        raise TraceReadError(path, f"cannot salvage: {problem}, before the traceEvents array started")
    colon = raw.index(b":", key + len(_KEY))
    open_at = skip_ws(raw, colon + 1)
    if raw[open_at : open_at + 1] != b"[":
        raise TraceReadError(path, f"cannot salvage: traceEvents is not an array ({problem})")
    i_open = int(np.searchsorted(brackets, open_at))
    after = depth[i_open + 1 :]
    closed = np.flatnonzero(after == 1)
    if len(closed):  # the array is complete: the cut is in the metadata after it
        close_at = int(brackets[i_open + 1 + closed[0]])
        kept = int(np.count_nonzero(after[: closed[0]] == 2))
        doc = _close_metadata(raw, path, quotes, brackets, depth, close_at)
        return doc, kept, len(doc) - 1, None, "metadata"
    return _close_array(raw, path, brackets, depth, array_at=open_at, level=2, suffix=b"]}", problem=problem)


def _close_array(
    raw: Text, path: str, brackets, depth, *, array_at: int, level: int, suffix: bytes, problem: str
):
    """Close the events array after its last complete element."""
    i_open = int(np.searchsorted(brackets, array_at))
    ends = np.flatnonzero(depth[i_open + 1 :] == level)
    if not len(ends):
        raise TraceReadError(path, f"cannot salvage: {problem}, before the first complete event")
    # msgspec may report the damage a byte or two past where it is, so the scanned prefix can hold
    # one bad byte: check the closed document and step back an event at a time if it does not decode.
    for j in range(len(ends) - 1, max(len(ends) - 21, -1), -1):
        end = int(brackets[i_open + 1 + ends[j]]) + 1
        doc = raw[:end] + suffix
        if _decodes(doc):
            return doc, j + 1, end, (end - array_at) / (j + 1), "events"
    raise TraceReadError(
        path, f"cannot salvage: {problem}, and the text before it does not close into valid JSON"
    )


def _decodes(doc: Text) -> bool:
    try:
        _VALIDATOR.decode(doc)
        return True
    except (msgspec.DecodeError, RecursionError):
        return False


def _close_metadata(raw: Text, path: str, quotes, brackets, depth, close_at: int):
    """The document up to the last complete top-level member after the events array."""
    tail = np.frombuffer(raw, dtype=np.uint8)[close_at + 1 :]
    commas = close_at + 1 + np.flatnonzero(tail == _COMMA)
    if len(commas):
        commas = commas[np.searchsorted(quotes, commas) % 2 == 0]
        at_top = depth[np.clip(np.searchsorted(brackets, commas) - 1, 0, None)] == 1
        commas = commas[at_top]
    for cut in [int(c) for c in commas[::-1][:50]] + [close_at + 1]:
        doc = raw[:cut] + b"}"
        if _decodes(doc):
            return doc
    raise TraceReadError(path, "cannot salvage: the metadata after traceEvents is damaged")
