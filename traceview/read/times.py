"""Decoded ``ts`` / ``dur`` values -> exact int64 nanoseconds.

Most traces hold small numbers that a float64 rounds exactly, which the fast
path converts with numpy. Epoch timestamps as floats (19 significant digits)
would lose nanoseconds, so for those the chunk's JSON text is re-read and the
number tokens converted exactly (``numbers.us_to_ns``).
"""

from __future__ import annotations

from dataclasses import dataclass
from operator import attrgetter
from typing import Any

import msgspec
import numpy as np

from ..numbers import FLOAT_EXACT_LIMIT_US, MISSING, float_us_to_ns, us_to_ns

_DECODE_ERRORS = (msgspec.ValidationError, msgspec.DecodeError, RecursionError)


class _TsText(msgspec.Struct):
    ts: msgspec.Raw = msgspec.Raw(b"")


class _DurText(msgspec.Struct):
    dur: msgspec.Raw = msgspec.Raw(b"")


@dataclass
class NumberTexts:
    """Where to re-read a chunk's number texts: its JSON array, which items were kept
    as events (``kept``; None: all), and which of those rows are wanted (None: all)."""

    events_raw: Any
    kept: np.ndarray | None
    rows: np.ndarray | None = None

    def subset(self, rows: np.ndarray) -> NumberTexts:
        return NumberTexts(self.events_raw, self.kept, rows)

    def tokens(self, key: str) -> list:
        """The raw JSON text of field ``key`` ("ts" or "dur") of each wanted row."""
        struct: type[_TsText] | type[_DurText] = _TsText if key == "ts" else _DurText
        try:
            items = msgspec.json.decode(self.events_raw, type=list[struct])  # type: ignore[valid-type]
        except _DECODE_ERRORS:
            one = msgspec.json.Decoder(struct)  # some item was dropped as malformed: one by one
            items = [
                _text_item(one, r, struct)
                for r in msgspec.json.decode(self.events_raw, type=list[msgspec.Raw])
            ]
        if self.kept is not None:
            items = [item for item, keep in zip(items, self.kept, strict=True) if keep]
        if self.rows is not None:
            items = [items[i] for i in self.rows]
        return list(map(attrgetter(key), items))


def _text_item(decoder, raw, struct):
    try:
        return decoder.decode(raw)
    except _DECODE_ERRORS:
        return struct()  # not an object: this event was dropped, its slot only keeps the rows aligned


def times_ns(values: list, texts: NumberTexts, key: str) -> np.ndarray:
    """int64 ns from the decoded numbers; re-read the text where floats would lose digits."""
    arr = np.array(values) if values else np.empty(0, dtype=np.int64)
    if arr.dtype == object:
        kinds = set(map(type, values))
        if kinds <= {int, type(None)}:
            arr = np.array([_MISSING_US if v is None else v for v in values])
        elif kinds <= {int, float, type(None)}:
            arr = np.array([np.nan if v is None else v for v in values], dtype=np.float64)
    if arr.dtype == np.int64:
        return _checked_mul(arr)
    if arr.dtype == np.float64 and np.nanmax(np.abs(arr), initial=0.0) < FLOAT_EXACT_LIMIT_US:
        return float_us_to_ns(arr)[0]
    return _bounded(us_to_ns(texts.tokens(key)))


def _bounded(ns: np.ndarray) -> np.ndarray:
    """Values beyond +-2**62 ns (146 years) as MISSING, as ``_checked_mul`` does: the text
    conversion takes 16 integer digits, and 10**16 us is past int64 in ns (it wraps negative),
    while the model adds a base time and a duration to what is left."""
    ns[(ns <= -(2**62)) | (ns >= 2**62)] = MISSING
    return ns


_MISSING_US = MISSING // 1000 - 1  # a None among ints: lands in _checked_mul's "bad" range


def _checked_mul(arr: np.ndarray) -> np.ndarray:
    """Microseconds * 1000, with values that would overflow (or stood for None) as MISSING."""
    bad = (arr <= _MISSING_US) | (arr >= 2**62 // 1000)
    ns = np.where(bad, 0, arr) * 1000
    ns[bad] = MISSING
    return ns
