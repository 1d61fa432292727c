"""The JSON structure of a text that msgspec will not decode, found with numpy.

Damaged or hostile text (cut short, nested too deeply, a string msgspec refuses) cannot be
parsed, yet its structure is still plain to see: ``structure`` finds the real (unescaped)
quotes and the brackets outside strings with the nesting depth after each, in linear time
and without recursion. ``salvage`` closes a cut document with it; ``unfit`` finds the one
event that made msgspec refuse a whole trace.
"""

from __future__ import annotations

import re

import numpy as np

#: JSON text as the reader holds it: a plain file's bytes, or the bytearray a gzip stream was inflated into
Text = bytes | bytearray
QUOTE, BACKSLASH, COMMA = 34, 92, 44
SKIP_WS = re.compile(rb"[ \t\r\n]*")


def skip_ws(raw: Text | memoryview, at: int = 0) -> int:
    """The first position at or after ``at`` that is not JSON whitespace (SKIP_WS matches anywhere,
    possibly empty: the fallback is never taken)."""
    m = SKIP_WS.match(raw, at)
    return m.end() if m else at


KEY = b'"traceEvents"'


def structure(buf: np.ndarray):
    """Positions of real (unescaped) quotes, and of brackets outside strings with the depth after each."""
    quotes = np.flatnonzero(buf == QUOTE)
    if len(quotes):
        prev = quotes - 1
        maybe = (prev >= 0) & (buf[np.clip(prev, 0, None)] == BACKSLASH)
        if maybe.any():  # escaped iff preceded by an odd run of backslashes
            cand = np.flatnonzero(maybe)
            run = np.ones(len(cand), dtype=np.int64)
            pos = quotes[cand] - 2
            active = np.ones(len(cand), dtype=bool)
            while active.any():
                more = active & (pos >= 0) & (buf[np.clip(pos, 0, None)] == BACKSLASH)
                run += more
                pos -= 1
                active = more
            escaped = np.zeros(len(quotes), dtype=bool)
            escaped[cand] = run % 2 == 1
            quotes = quotes[~escaped]
    brackets = np.flatnonzero((buf == 123) | (buf == 125) | (buf == 91) | (buf == 93))
    outside = np.searchsorted(quotes, brackets) % 2 == 0
    brackets = brackets[outside]
    kind = buf[brackets]
    delta = np.where((kind == 123) | (kind == 91), 1, -1).astype(np.int64)
    depth = np.cumsum(delta)
    return quotes, brackets, depth


def depth_at(pos: int, brackets: np.ndarray, depth: np.ndarray) -> int:
    i = int(np.searchsorted(brackets, pos)) - 1
    return int(depth[i]) if i >= 0 else 0


def find_key(raw: Text, quotes, brackets, depth) -> int | None:
    """Where the top-level ``"traceEvents"`` key starts (a real key: a string at depth 1 followed by ':')."""
    at = raw.find(KEY)
    for _ in range(10_000):
        if at < 0:
            return None
        i = int(np.searchsorted(quotes, at))
        after = skip_ws(raw, at + len(KEY))
        if (
            i < len(quotes)
            and quotes[i] == at
            and i % 2 == 0
            and depth_at(at, brackets, depth) == 1
            and raw[after : after + 1] == b":"
        ):
            return at
        at = raw.find(KEY, at + 1)
    return None


def events_array(raw: Text, quotes, brackets, depth) -> tuple[int, int] | None:
    """(position of the ``[`` that opens the events array, its depth after opening): a bare
    array is the document itself, else the array under the top-level ``traceEvents`` key."""
    start = skip_ws(raw)
    first = raw[start : start + 1]
    if first == b"[":
        return start, 1
    key = find_key(raw, quotes, brackets, depth) if first == b"{" else None
    if key is None:
        return None
    open_at = skip_ws(raw, raw.index(b":", key + len(KEY)) + 1)
    return (open_at, 2) if raw[open_at : open_at + 1] == b"[" else None


def array_items(buf: np.ndarray, quotes, brackets, depth, open_at: int, level: int) -> np.ndarray:
    """The items of the array opened at ``open_at`` (depth ``level`` inside it) as rows of
    (start, stop): the text between its separators, spaces included. An array cut short
    ends at the end of the text."""
    i_open = int(np.searchsorted(brackets, open_at))
    closes = np.flatnonzero(depth[i_open + 1 :] < level)
    close_at = int(brackets[i_open + 1 + closes[0]]) if len(closes) else len(buf)
    commas = open_at + 1 + np.flatnonzero(buf[open_at + 1 : close_at] == COMMA)
    commas = commas[np.searchsorted(quotes, commas) % 2 == 0]  # outside strings
    at = np.searchsorted(brackets, commas) - 1
    commas = commas[depth[np.clip(at, 0, None)] == level]  # between this array's own items
    seps = np.concatenate([[open_at], commas, [close_at]])
    return np.stack([seps[:-1] + 1, seps[1:]], axis=1)
