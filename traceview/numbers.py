"""Exact decimal-microsecond -> integer-nanosecond conversion, vectorised.

Kineto writes times as microseconds with up to three fraction digits
(``1695835535123456.789``). Absolute epoch values need 19 significant digits,
more than a float64 holds, so a float parse would lose nanoseconds. We keep
the JSON number's text (msgspec ``Raw``) and split it at the dot with numpy's
string ufuncs; the few tokens this cannot take (exponents, more than three
fraction digits, quoted strings) go through ``Decimal`` one by one.
Durations are small enough that a float64 rounds back to the exact nanosecond:
see ``float_us_to_ns``.
"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation

import numpy as np

MISSING = np.iinfo(np.int64).min  # sentinel for "no value"
# Below 2**42 us (51 days) a correctly rounded float64 is within 0.25 ns of the
# decimal it came from, and x*1000 adds at most 0.25 ns more: rounding is exact.
FLOAT_EXACT_LIMIT_US = float(2**42)
_CHUNK = 1 << 20


def us_to_ns(tokens: list) -> np.ndarray:
    """Convert JSON number texts (bytes-like, microseconds) to int64 ns.

    Empty tokens, ``null`` and texts that are not numbers become ``MISSING``.
    """
    out = np.empty(len(tokens), dtype=np.int64)
    for start in range(0, len(tokens), _CHUNK):
        part = tokens[start : start + _CHUNK]
        out[start : start + len(part)] = _convert_chunk(part)
    return out


def _convert_chunk(tokens: list) -> np.ndarray:
    if not tokens:
        return np.empty(0, dtype=np.int64)
    arr = np.array(b"\n".join(tokens).split(b"\n"))
    ip, dot, fp = np.strings.partition(arr, b".")
    # numpy 2.x: boolean-indexing a zero-width (S0) array, as fp is when no token has a
    # fraction, yields S1 of uninitialised bytes: garbage nanoseconds. Give it one byte.
    ip, fp = (a.astype("S1") if a.dtype.itemsize == 0 else a for a in (ip, fp))
    ok = (
        np.strings.isdigit(np.strings.lstrip(ip, b"-"))
        & (np.strings.str_len(ip) <= 16)
        & (np.strings.str_len(fp) <= 3)
        & (np.strings.isdigit(fp) | (np.strings.str_len(fp) == 0))
        & ~((np.strings.str_len(dot) == 1) & (np.strings.str_len(fp) == 0))
    )
    out = np.full(len(arr), MISSING, dtype=np.int64)
    if ok.any():
        ipo, fpo = ip[ok], fp[ok]
        neg = np.strings.startswith(ipo, b"-")
        whole = np.strings.lstrip(ipo, b"-").astype(np.int64) * 1000
        frac = np.strings.ljust(fpo, 3, b"0").astype(np.int64)
        out[ok] = np.where(neg, -(whole + frac), whole + frac)
    for i in np.flatnonzero(~ok):
        out[i] = _slow_ns(tokens[i])
    return out


def _slow_ns(token) -> int:
    text = bytes(token).strip().strip(b'"').decode("ascii", "replace").strip()
    if text in ("", "null"):
        return MISSING
    try:
        value = Decimal(text) * 1000
        if not value.is_finite():
            return MISSING
        ns = int(value.to_integral_value())
    except (InvalidOperation, ValueError, OverflowError):
        return MISSING
    if not (-(2**62) < ns < 2**62):
        return MISSING
    return ns


def float_us_to_ns(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Float microseconds -> int64 ns; second array flags values that were
    missing (NaN) or too large to round exactly (they become ``MISSING``)."""
    values = np.asarray(values, dtype=np.float64)
    bad = ~np.isfinite(values) | (np.abs(values) >= FLOAT_EXACT_LIMIT_US)
    ns = np.where(bad, 0.0, np.rint(values * 1000.0)).astype(np.int64)
    ns[bad] = MISSING
    return ns, bad
