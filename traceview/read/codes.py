"""Column types: factorized values (``Codes``) and masked integers (``IntColumn``).

Decoded fields arrive as Python lists of arbitrary JSON values (a name can be a
list, an id can exceed int64); these turn them into numpy arrays without a
Python-level loop over the values where the common case allows it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

CODE_DTYPE = np.int32  # a column's codes once joined: the scanner's tables hold fewer than 2**31 values


@dataclass
class Codes:
    """A factorized column: integer ``codes`` (-1 = missing) into ``uniques``, which are
    the distinct raw values in order of first appearance (what ``pd.factorize`` gives). The
    reader's joined columns hold the narrowest codes that fit (``_code_dtype``: int8, int16 or
    ``CODE_DTYPE``), as pandas keeps a categorical's."""

    codes: np.ndarray
    uniques: list

    def __len__(self) -> int:
        return len(self.codes)

    def take(self, rows) -> Codes:
        """The rows' values, uniques again in order of first appearance among them."""
        codes = self.codes[np.asarray(rows, dtype=np.int64)]
        present = codes[codes >= 0]
        if not len(present):
            return Codes(np.full(len(codes), -1, dtype=np.int64), [])
        import pandas as pd  # loaded with the model already; kept out of this module's import

        used = pd.unique(present)  # in order of first appearance, by hashing: no sort of the rows
        remap = np.full(len(self.uniques), -1, dtype=np.int64)
        remap[used] = np.arange(len(used))
        return Codes(
            np.where(codes >= 0, remap[np.clip(codes, 0, None)], -1), [self.uniques[i] for i in used]
        )


@dataclass
class IntColumn:
    """Integer values with a mask of the rows that held no int (None, strings, junk)."""

    values: np.ndarray
    mask: np.ndarray

    @staticmethod
    def concat(parts: list) -> IntColumn:
        if not parts:
            return IntColumn(np.empty(0, np.int64), np.empty(0, bool))
        return IntColumn(np.concatenate([p.values for p in parts]), np.concatenate([p.mask for p in parts]))


class Factorizer:
    """Factorizes a column part by part against one table of distinct values, so that the
    codes of every part index the same ``uniques``, in order of first appearance.

    The parts are kept until ``finish``, which merges their tables with one hash pass over
    all their distinct values (``pd.factorize``; its equality is Python's: 1, 1.0 and True
    are one value, as in a dict), instead of a Python loop per distinct value per part."""

    def __init__(self, empty_is_missing: bool = False):
        self.parts: list[tuple[np.ndarray, list]] = []
        self.empty_is_missing = empty_is_missing  # b"" (no Input Dims) is "missing", not a value

    def add(self, values: list) -> None:
        """Append a part given as raw values."""
        if not values:
            return
        codes, uniques = _factorize(values)
        if self.empty_is_missing and any(not len(u) for u in uniques):
            keep = np.array([len(u) > 0 for u in uniques] + [False])
            remap = np.where(keep, np.cumsum(keep) - 1, -1)  # index -1 (missing) picks the False
            codes, uniques = remap[codes], [u for u in uniques if len(u)]
        self.parts.append((codes, uniques))

    def add_codes(self, part: Codes, narrow: bool = False) -> None:
        """Append another factorizer's finished part: the same as having ``add``-ed its values here.
        ``narrow``: keep its codes in the narrowest type that holds them (for parts that wait long
        unjoined: the flows' wait through link, ``columns.LazyColumns``; a byte a row for a few
        distinct phases or threads)."""
        codes = part.codes
        if narrow and codes.dtype.itemsize > np.dtype(dtype := _code_dtype(len(part.uniques))).itemsize:
            codes = codes.astype(dtype)
        self.parts.append((codes, part.uniques))

    def finish(self) -> Codes:
        if not self.parts:
            return Codes(np.empty(0, dtype=CODE_DTYPE), [])
        if len(self.parts) == 1:
            codes, one = self.parts.pop()
            return Codes(codes.astype(_code_dtype(len(one))), list(one))
        import pandas as pd

        every = [u for _, part in self.parts for u in part]
        glob, uniques = pd.factorize(np.fromiter(every, dtype=object, count=len(every)), use_na_sentinel=True)
        dtype = _code_dtype(len(uniques))
        out = np.empty(sum(len(codes) for codes, _ in self.parts), dtype=dtype)
        at, base = 0, 0
        while self.parts:  # each part's codes freed once mapped: the peak is the result and one part
            codes, part = self.parts.pop(0)
            remap = np.append(glob[base : base + len(part)], -1).astype(dtype)  # code -1 picks the -1
            # no temporary the size of the part; "wrap" sends code -1 to the -1 (and unlike "raise" is
            # not buffered); every other code is in range
            np.take(remap, codes, out=out[at : at + len(codes)], mode="wrap")
            at, base = at + len(codes), base + len(part)
        return Codes(out, list(uniques))


def _code_dtype(n_uniques: int):
    """The narrowest of int8, int16 and ``CODE_DTYPE`` that holds every code and -1, or int64 for
    more distinct values than those hold (only msgspec's parts can have them). A column of a few
    distinct values (an op arg's types, the flows' phases) then takes a byte a row, not four:
    the op arg texts stay held through link, the stage of the load's peak."""
    for dtype, top in _CODE_TYPES:
        if n_uniques < top:
            return dtype
    return np.int64


_CODE_TYPES = [(t, int(np.iinfo(t).max)) for t in (np.int8, np.int16, CODE_DTYPE)]


def _factorize(values: list) -> tuple[np.ndarray, list]:
    """``pd.factorize`` of a list of JSON values: (codes, uniques in first-appearance order)."""
    import pandas as pd

    if type(values[0]) is int:  # pids, tids, flow ids: hash machine ints, not objects
        ints = _int64_array(values)
        if ints is not None:
            codes, uniques = pd.factorize(ints, use_na_sentinel=True)
            return codes, uniques.tolist()
    arr = np.fromiter(values, dtype=object, count=len(values))
    try:
        codes, uniques = pd.factorize(arr, use_na_sentinel=True)
    except TypeError:  # unhashable values (a list as a name): their text stands for them
        arr = np.fromiter(
            (v if v is None or isinstance(v, (str, int, float, bytes)) else str(v) for v in values),
            dtype=object,
            count=len(values),
        )
        codes, uniques = pd.factorize(arr, use_na_sentinel=True)
    return codes, list(uniques)


def _int64_array(values: list) -> np.ndarray | None:
    """The values as a 1-d int64 array, or None when they are not all machine ints."""
    try:
        ints = np.array(values)
    except (OverflowError, ValueError):
        return None
    return ints if ints.dtype == np.int64 and ints.ndim == 1 else None


def int_values(values: list, *, ints_or_none: bool = False) -> IntColumn:
    """Python ints (others -> masked) as int64 values + mask, without a Python-level loop.

    ``ints_or_none``: the decoder guarantees every value is an int or None (a field
    typed ``int | None``), which allows a faster path."""
    n = len(values)
    if not n:
        return IntColumn(np.empty(0, dtype=np.int64), np.empty(0, dtype=bool))
    if ints_or_none:
        got = _ints_or_none(values)
        if got is not None:
            return got
    try:
        arr = np.array(values)
    except (OverflowError, ValueError):
        arr = np.fromiter(values, dtype=object, count=n)
    if arr.dtype == np.int64 and type(values[0]) is int:
        return IntColumn(arr, np.zeros(n, dtype=bool))
    if arr.dtype != object or arr.ndim != 1:
        arr = np.fromiter(values, dtype=object, count=n)
    return _masked_ints(values, arr)


def _ints_or_none(values: list) -> IntColumn | None:
    """Fast path for a field typed ``int | None``; None if some int does not fit int64."""
    arr = np.fromiter(values, dtype=object, count=len(values))
    missing = arr == None  # noqa: E711  (elementwise)
    out = np.zeros(len(values), dtype=np.int64)
    try:
        out[~missing] = arr[~missing].astype(np.int64)
    except OverflowError:
        return None
    return IntColumn(out, missing)


def _masked_ints(values: list, arr: np.ndarray) -> IntColumn:
    """Mixed values (``arr`` is their object array): ints that fit int64 kept, the rest masked."""
    n = len(values)
    # exact type on purpose: bool is an int subclass and must not pass as one
    ok = np.fromiter(map(type, values), dtype=object, count=n) == int  # noqa: E721
    out = np.zeros(n, dtype=np.int64)
    if ok.any():
        try:
            out[ok] = arr[ok].astype(np.int64)
        except OverflowError:  # ints beyond int64 are not ids we can hold
            fits = np.fromiter(
                (type(v) is int and -(2**63) <= v < 2**63 for v in values), dtype=bool, count=n
            )
            ok &= fits
            out[ok] = arr[ok].astype(np.int64)
    return IntColumn(out, ~ok)
