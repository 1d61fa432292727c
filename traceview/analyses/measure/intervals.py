"""Interval arithmetic on int64 nanoseconds: unions, their lengths, and where two unions overlap.

GPU activities on several streams overlap; "how long was the GPU busy with X" is the
length of the union of X's intervals, never a sum of durations. Everything here is
vectorised numpy on ``(starts, ends)`` arrays; no float ever enters a length.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

Spans = tuple  # (starts, ends): int64 arrays of equal length


def spans(frame: pd.DataFrame) -> Spans:
    """(starts, ends) of a frame with ``ts_ns`` and ``dur_ns`` (negative durations count as 0)."""
    starts = frame["ts_ns"].to_numpy(dtype=np.int64)
    return starts, starts + frame["dur_ns"].to_numpy(dtype=np.int64).clip(0)


def merged(s: Spans) -> Spans:
    """The union of the intervals as sorted, disjoint intervals."""
    starts, ends = s
    if not len(starts):
        return np.empty(0, np.int64), np.empty(0, np.int64)
    order = np.argsort(starts, kind="stable")
    starts, ends = starts[order], ends[order]
    reach = np.maximum.accumulate(ends)
    new = np.empty(len(starts), dtype=bool)
    new[0] = True
    new[1:] = starts[1:] > reach[:-1]
    return starts[new], np.maximum.reduceat(ends, np.flatnonzero(new))


def length(s: Spans) -> int:
    """Length of the union, in ns."""
    starts, ends = merged(s)
    return int((ends - starts).sum())


def join(*parts: Spans) -> Spans:
    """All the intervals of several sets as one set."""
    return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])


def overlap(a: Spans, b: Spans) -> int:
    """Length of (union of a) ∩ (union of b), in ns."""
    return length(a) + length(b) - length(join(a, b))


def clip(s: Spans, lo: int, hi: int) -> Spans:
    """The intervals cut to [lo, hi); those outside it become empty."""
    starts, ends = np.clip(s[0], lo, hi), np.clip(s[1], lo, hi)
    return starts, np.maximum(ends, starts)


def lengths_within(s: Spans, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Length of the union of ``s`` inside each window [lo[i], hi[i]), in ns: one cumulative sum
    and two binary searches instead of clipping every interval once per window."""
    return union_lengths_within(merged(s), lo, hi)


def union_lengths_within(u: Spans, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """``lengths_within`` of ``u`` that is a union already (sorted, disjoint: ``merged``'s)."""
    starts, ends = u
    lo, hi = np.asarray(lo, dtype=np.int64), np.asarray(hi, dtype=np.int64)
    if not len(starts) or not len(lo):
        return np.zeros(len(lo), dtype=np.int64)
    run = np.concatenate(([0], np.cumsum(ends - starts)))
    first = np.searchsorted(ends, lo, side="right")  # the first interval ending after lo
    stop = np.searchsorted(starts, hi, side="left")  # past the last interval starting before hi
    some = stop > first
    f, last = np.clip(first, 0, len(starts) - 1), np.clip(stop - 1, 0, len(starts) - 1)
    cut = np.maximum(lo - starts[f], 0) + np.maximum(ends[last] - hi, 0)
    return np.where(some, run[np.maximum(stop, first)] - run[first] - cut, 0)


def extent(s: Spans) -> int:
    """From the first start to the last end (0 without intervals)."""
    return int(s[1].max() - s[0].min()) if len(s[0]) else 0
