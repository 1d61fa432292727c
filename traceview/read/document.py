"""JSON text -> (trace metadata, undecoded ``traceEvents`` array), with the JSON problems.

Only the top level is decoded here; the events stay ``msgspec.Raw`` text so that
the column builder can decode them in chunks. Valid JSON that is not a trace
(no ``traceEvents``, a scalar document) raises ``NotATraceError``, so that
callers can tell it apart from a damaged trace (``TraceReadError``). An event that
msgspec refuses on its own (a lone surrogate escape, nesting a thousand deep) is blanked
(``unfit``) so that it is dropped and counted, not the whole trace.
"""

from __future__ import annotations

import msgspec

from ..errors import NotATraceError, TraceReadError
from .source import SPACES
from .unfit import may_hold_unfit, without_unfit_events

TOO_DEEP = "JSON nested too deeply to decode (thousands of levels; not a trace)"
NOT_A_TRACE = "not a profiler trace"
_META_DECODER = msgspec.json.Decoder(float_hook=float)  # 1e400 -> inf rather than an error
_VALIDATOR = msgspec.json.Decoder(msgspec.Raw)


def _head(data: bytes | bytearray, n: int) -> bytes:
    """``data.lstrip()[:n]`` without the copy of the whole text ``lstrip`` makes."""
    m = SPACES.match(data)  # matches anywhere (possibly empty): never None
    at = m.end() if m else 0
    return bytes(data[at : at + n])


def split_document(data: bytes | bytearray, path: str) -> tuple[dict, msgspec.Raw]:
    """Top-level metadata (decoded) and the raw ``traceEvents`` array. The array may lie in a
    blanked copy of ``data`` (see ``fit_events``), not in ``data`` itself."""
    start = _head(data, 1)
    if start == b"[":  # legacy Chrome format: a bare array of events
        return {}, msgspec.Raw(fit_events(data))
    if start != b"{":
        raise _not_an_object(data, path)
    top = _decode_top(data, path)
    if "traceEvents" not in top:
        keys = ", ".join(list(top)[:6]) or "none"
        raise NotATraceError(path, f"{NOT_A_TRACE}: no traceEvents key (top-level keys: {keys})")
    events_raw = top.pop("traceEvents")
    meta = meta_of(top, path)
    if bytes(memoryview(events_raw)[:1]) != b"[":  # msgspec's Raw holds the value without spaces
        raise NotATraceError(path, f"{NOT_A_TRACE}: traceEvents is not a list")
    return meta, events_raw


def _not_an_object(data: bytes | bytearray, path: str) -> TraceReadError:
    """A document that does not start with { or [: valid JSON (a number, a string,
    null) is not a trace; anything else is not JSON at all."""
    try:
        msgspec.json.decode(data, type=msgspec.Raw)  # validates without building values
    except msgspec.DecodeError:
        return TraceReadError(path, f"not JSON: starts with {_head(data, 12)!r}")
    return NotATraceError(
        path, f"{NOT_A_TRACE}: the JSON document is {_head(data, 12)!r}, not an object or a list"
    )


def fit_events(data: bytes | bytearray) -> bytes | bytearray:
    """``data``, or a copy of the same length (every offset the same) with the events msgspec
    refuses on their own blanked (``unfit``): the text ``split_document`` decodes. For a caller
    that decodes the events but writes back the original bytes (``annotate``). Other problems
    are left for the decode to report."""
    try:
        _VALIDATOR.decode(data)
    except (msgspec.DecodeError, RecursionError) as exc:
        if may_hold_unfit(data, exc):
            return without_unfit_events(data)[0]
    return data


def _decode_top(data: bytes | bytearray, path: str) -> dict:
    """The top-level members as raw values (they keep the text they point into alive). When
    msgspec refuses the text, try again with its unfit events blanked, once."""
    try:
        return msgspec.json.decode(data, type=dict[str, msgspec.Raw])
    except msgspec.ValidationError as exc:  # defensive: an object always decodes to this type
        raise NotATraceError(path, f"{NOT_A_TRACE}: {exc}") from None
    except (msgspec.DecodeError, RecursionError) as exc:
        fixed, n = without_unfit_events(data) if may_hold_unfit(data, exc) else (data, 0)
        if not n:
            raise _decode_problem(exc, data, path) from None
    try:
        return msgspec.json.decode(fixed, type=dict[str, msgspec.Raw])
    except (msgspec.DecodeError, RecursionError) as exc:
        raise _decode_problem(exc, fixed, path) from None


def _decode_problem(exc: Exception, data, path: str) -> TraceReadError:
    if isinstance(exc, RecursionError):
        return TraceReadError(path, TOO_DEEP)
    return TraceReadError(path, json_problem(exc, len(data)))


def meta_of(top: dict, path: str) -> dict:
    """The top-level members other than traceEvents, decoded."""
    return {key: _decode_meta(key, raw, path) for key, raw in top.items()}


def _decode_meta(key: str, raw: msgspec.Raw, path: str):
    try:
        return _META_DECODER.decode(raw)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError) as exc:
        problem = TOO_DEEP if isinstance(exc, RecursionError) else str(exc).replace("\n", " ")
        raise TraceReadError(path, f"metadata key {key[:60]!r}: {problem}") from None


def raw_items(events_raw, path: str) -> list:
    """The events array as a list of undecoded items; a JSON problem is a TraceReadError."""
    try:
        return msgspec.json.decode(events_raw, type=list[msgspec.Raw])
    except msgspec.ValidationError:
        raise NotATraceError(path, f"{NOT_A_TRACE}: traceEvents is not a list") from None
    except msgspec.DecodeError as exc:
        raise TraceReadError(path, json_problem(exc, len(events_raw))) from None
    except RecursionError:
        raise TraceReadError(path, TOO_DEEP) from None


def json_problem(exc: Exception, size: int) -> str:
    """One line for a msgspec decode error: a cut document says so (and how to recover)."""
    text = str(exc)
    if "truncated" in text.lower() or _ends_mid_token(text, size):
        return f"truncated JSON: the text ends at byte {size} in the middle of the document (try --salvage)"
    return f"not valid JSON: {text}"


def _ends_mid_token(text: str, size: int) -> bool:
    """msgspec calls a cut inside a number ("12.", "1e", "-") invalid, at the byte where the text ends."""
    at = text.rfind("(byte ")
    tail = text[at + 6 :].rstrip(")")
    return at >= 0 and "trailing" not in text and tail.isdigit() and int(tail) >= size
