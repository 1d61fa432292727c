"""Events msgspec refuses on their own, blanked so that they cost only themselves.

Two things in one event make msgspec refuse a whole document that is otherwise valid
JSON: a lone UTF-16 surrogate escape in a string (``"\\ud800"``, which Python's json
module accepts), and nesting deeper than its recursion limit (an args value nested a
thousand levels). When a decode fails and the text may hold either, ``without_unfit_events``
finds the events array's items with the numpy structure scan (``scan``), and overwrites
each such item with ``0`` and spaces: the text keeps its length (every offset stays
valid), and the reader then drops that item as "not an event object", counted in the
"malformed event(s)" warning like any other. Nothing else changes: a document with no such
item, or one where no event would be left, comes back as it was, and the caller reports
the original problem.
"""

from __future__ import annotations

import re

import msgspec
import numpy as np

from .scan import Text, array_items, events_array, structure

#: Nesting (levels inside one event) beyond which an event of a document msgspec refused is
#: blanked. Real events nest 4-5 levels (args, "Input Dims", lists of shapes); msgspec's own
#: limit is Python's recursion limit (about 1,000 levels, less the caller's stack).
MAX_DEPTH = 64
_SURROGATE = re.compile(rb"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")  # a pair's half, or a lone one
_VALIDATOR = msgspec.json.Decoder(msgspec.Raw)


def may_hold_unfit(data, exc: BaseException | None = None) -> bool:
    """Whether the failed decode of ``data`` (raising ``exc``) may come from an unfit event (cheap:
    one regex search)."""
    return isinstance(exc, RecursionError) or _SURROGATE.search(data) is not None


def without_unfit_events(data: Text) -> tuple[Text, int]:
    """``data`` with its unfit events blanked, and how many; ``(data, 0)`` when there are none
    or when every event is unfit (then the document's own error is the better answer)."""
    buf = np.frombuffer(data, dtype=np.uint8)
    quotes, brackets, depth = structure(buf)
    found = events_array(data, quotes, brackets, depth)
    if found is None:
        return data, 0
    items = array_items(buf, quotes, brackets, depth, *found)
    bad = _too_deep(items, brackets, depth, found[1]) | _refused(data, items)
    if not bad.any() or bad.sum() >= _n_present(data, items):
        return data, 0
    out = bytearray(data)
    for lo, hi in items[bad].tolist():
        out[lo:hi] = b"0" + b" " * (hi - lo - 1)
    return bytes(out), int(bad.sum())


def _item_of(items: np.ndarray, pos: np.ndarray) -> np.ndarray:
    """Index of the item holding each position, -1 for positions outside every item."""
    at = np.searchsorted(items[:, 0], pos, side="right") - 1
    inside = (at >= 0) & (pos < items[np.clip(at, 0, None), 1])
    return np.where(inside, at, -1)


def _too_deep(items: np.ndarray, brackets: np.ndarray, depth: np.ndarray, level: int) -> np.ndarray:
    bad = np.zeros(len(items), dtype=bool)
    deep = _item_of(items, brackets[depth > level + MAX_DEPTH])
    bad[deep[deep >= 0]] = True
    return bad


def _refused(data: Text, items: np.ndarray) -> np.ndarray:
    """Items with a surrogate escape that msgspec will not decode on their own (a valid pair decodes)."""
    bad = np.zeros(len(items), dtype=bool)
    lo, hi = int(items[0, 0]), int(items[-1, 1])
    found = np.fromiter((m.start() for m in _SURROGATE.finditer(data, lo, hi)), dtype=np.int64)
    at = _item_of(items, found)
    for i in np.unique(at[at >= 0]).tolist():
        a, b = items[i].tolist()
        try:
            _VALIDATOR.decode(memoryview(data)[a:b])
        except (msgspec.DecodeError, RecursionError):
            bad[i] = True
    return bad


def _n_present(data: Text, items: np.ndarray) -> int:
    """Items that hold more than spaces (``[]`` has one empty slot, which is no item)."""
    return sum(1 for lo, hi in items.tolist() if data[lo:hi].strip()) if len(items) < 2 else len(items)
