"""Tables worked out once per loaded trace and selection, held for that Trace object.

diff, summary, compare and advise each start from the same per-trace tables (the exposed
split, the op work, the per-kernel groups); computed once and held by the Trace object they
come from, they live and die with it (held on the trace, never keyed by its path), and a
second analysis of one loaded trace (or the second use inside one diff) reads them back.
A derived table is never changed by its readers: each is handed out as it was made.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from ... import cache
from ...deferred import held

if TYPE_CHECKING:  # for the annotations only
    from ..select.region import Region


def of_trace(trace, what: str, make: Callable[[Any], Any]) -> Any:
    """``make(trace)`` once per loaded trace, held in its ``derived`` field so that it lives and dies
    with it (a Trace made from another with other data starts with an empty one)."""
    held = trace.derived
    if what not in held:
        held[what] = make(trace)
    return held[what]


def kept_for_trace(trace, what: str, make: Callable[[Any], Any], *, value: bool = False) -> Any:
    """``of_trace``, and kept in the trace's cache entry as well (``cache.derived_frame``; ``value``:
    a small value of plain data, ``cache.derived_value``), so a warm run reads it back."""
    keep = cache.derived_value if value else cache.derived_frame
    return of_trace(trace, what, lambda t: keep(t, what, make))


def of_region(r: Region, what: str | tuple, make: Callable[[Region], Any]) -> Any:
    """``make(r)`` once per trace and selection. Kept with the region's frames and used only for a
    region that holds those very frames (``region`` hands every caller the same ones): a Region
    built by hand with other activities (annotate's whole trace, a test's) gets its own."""
    # the frames as held, not made: a Deferred (``region``) is the same object in every copy
    kept, key, acts, ops = r.trace.derived, (what, r.selection), held(r, "activities"), held(r, "ops")
    got = kept.get(key)
    if got is None or got[0] is not acts or got[1] is not ops:
        got = kept[key] = (acts, ops, make(r))
    return got[2]


def kept_for_region(
    r: Region, what: str, make: Callable[[Region], Any], *, value: bool = False, reads_devices: bool = False
) -> Any:
    """``of_region``, and for the trace's own region of the whole trace (the one ``region`` cut
    without a selection) also kept in the trace's cache entry (``cache.derived_frame``; ``value``:
    a small value of plain data, ``cache.derived_value``), so a warm run reads it back. A region
    built by hand is never served a kept table; a narrower selection's is held in memory only
    (``check`` asks for every step: a file per step would be hundreds of small files written and
    read on its path, in an entry only a store evicts). ``reads_devices``: ``make`` reads the
    device table, so a trace loaded with a user's (``devices=``, a file the entry's key does not
    cover) has it held in memory only."""
    own = r.trace.derived.get(("region", r.selection))
    if own is None or any(held(own, f) is not held(r, f) for f in ("activities", "ops")):
        return of_region(r, what, make)
    if r.selection != type(r.selection)():
        return of_region(r, what, make)
    if reads_devices and getattr(r.trace, "devices", None) is not None:
        return of_region(r, what, make)
    name = f"{what}-{hashlib.sha256(repr(r.selection).encode()).hexdigest()[:16]}"
    keep = cache.derived_value if value else cache.derived_frame
    return of_region(r, what, lambda r: keep(r.trace, name, lambda _: make(r)))


# ------------------------------------------------------------------ text columns by their codes


def texts(col) -> tuple[np.ndarray, np.ndarray]:
    """``(codes, values)`` of a text column with ``values[codes]`` equal, row by row, to
    ``col.astype(str)`` (a missing value is the last of ``values``, NaN): compare and group on
    the codes, look up the few distinct texts, never turn every row into a Python string."""
    if isinstance(col.dtype, pd.CategoricalDtype):
        codes = col.cat.codes.to_numpy().astype(np.int64)
        cats = col.cat.categories.to_numpy(dtype=object)
    else:
        codes, uniq = pd.factorize(col.to_numpy(dtype=object), use_na_sentinel=True)
        cats = np.asarray(uniq, dtype=object)
    values = np.empty(len(cats) + 1, dtype=object)
    values[:-1] = [v if isinstance(v, str) else str(v) for v in cats]
    values[-1] = np.nan
    return np.where(codes < 0, len(cats), codes), values


def as_text(col) -> np.ndarray:
    """``col.astype(str).to_numpy()``, row by row (a missing value NaN), each distinct text made once."""
    codes, values = texts(col)
    return values[codes]


def text_counts(codes: np.ndarray, values: np.ndarray) -> list[tuple[str, int]]:
    """``(text, rows)`` of the codes ``texts`` gave, commonest first, a tie going to the text met
    first, a missing value left out: ``pd.Series(values[codes]).value_counts().items()``,
    counted on the codes."""
    uniq, first, counts = np.unique(codes, return_index=True, return_counts=True)
    uniq, first, counts = (a[uniq != len(values) - 1] for a in (uniq, first, counts))
    order = np.lexsort((first, -counts))
    return [(values[uniq[i]], int(counts[i])) for i in order]


def is_text(col, value: str) -> np.ndarray:
    """Rows whose text is ``value`` (a missing value never is)."""
    return (col == value).to_numpy(dtype=bool, na_value=False)
