"""Unions of intervals and exposed time's split, against plain references (issue 35).

``intervals.merged`` sorts the starts and the ends each on their own (no order gathered) and
leaves empty intervals out; ``exposed.host_layers`` flags the host's calls by their codes and
drops the empty ones; a window's communication hidden is read off the split where the
computation layers hold every computation. What is checked:

- ``merged`` covers exactly the nanoseconds a per-ns recount covers, on random small sets with
  empty sets, zero and negative lengths, nested, identical and touching intervals and several
  parts, and its pieces are sorted, of positive length and apart;
- ``split_windows`` gives each window's nanoseconds to the first layer covering them, by a per-ns
  recount, with empty layers and windows partly or wholly outside the intervals, or empty;
- on larger random sets the split equals the one of the algorithm it replaced (argsort and
  running maximum, kept here), and the host layers of text columns equal those of categoricals;
- on every corpus trace, exposed's steps table (whole trace, and one stream) equals the one the
  former code made (its host layers, split and hidden, kept here);
- hidden with a computation of no category (no layer of its own) is measured apart, as before.
"""

from __future__ import annotations

import random

import numpy as np
import pandas as pd
import pytest
from corpus import corpus_params

import traceview as tv
from traceview.analyses.measure import exposed as ex
from traceview.analyses.measure import intervals as iv
from traceview.analyses.select.region import Selection, _matching_activities, region


def _spans(pairs) -> iv.Spans:
    return np.array([s for s, _ in pairs], dtype=np.int64), np.array([e for _, e in pairs], dtype=np.int64)


def _random_spans(rng: random.Random, most: int, *, top: int = 100) -> iv.Spans:
    pairs = []
    for _ in range(rng.randrange(0, most + 1)):
        s = rng.randrange(0, top)
        pairs.append((s, s + rng.choice([0, 0, -3, 1, 2, 5, 13, 40])))  # empty, negative, short, long
        if pairs and rng.random() < 0.2:
            pairs.append(rng.choice(pairs))  # identical
        if rng.random() < 0.2:
            pairs.append((pairs[-1][1], pairs[-1][1] + 3))  # touching
    rng.shuffle(pairs)
    return _spans(pairs)


def _ns(s: iv.Spans) -> set:
    return {t for a, b in zip(s[0].tolist(), s[1].tolist(), strict=True) for t in range(a, b)}


def test_merged_covers_exactly_the_covered_ns_in_sorted_positive_pieces_apart():
    rng = random.Random(3501)
    for _ in range(1500):
        parts = [_random_spans(rng, 8) for _ in range(rng.randrange(1, 4))]
        starts, ends = iv.merged(*parts)
        assert starts.dtype == ends.dtype == np.int64
        assert (ends > starts).all() and (starts[1:] > ends[:-1]).all()
        assert _ns((starts, ends)) == set().union(*map(_ns, parts))
        assert iv.length(iv.join(*parts)) == len(set().union(*map(_ns, parts)))
    empty = iv.merged((np.empty(0, np.int64), np.empty(0, np.int64)))
    assert len(empty[0]) == len(empty[1]) == 0


def _split_per_ns(layers: list, lo: int, hi: int) -> list[int]:
    """Each ns of [lo, hi) to the first layer covering it, else to the last column (uncovered)."""
    covering = [_ns(s) for _, s in layers]
    out = [0] * (len(layers) + 1)
    for t in range(lo, hi):
        out[next((k for k, c in enumerate(covering) if t in c), len(layers))] += 1
    return out


def test_the_split_gives_each_ns_to_the_first_layer_covering_it():
    rng = random.Random(3502)
    for _ in range(300):
        layers = [(str(k), _random_spans(rng, 6)) for k in range(rng.randrange(1, 6))]
        lo = np.array([rng.randrange(-30, 130) for _ in range(4)], dtype=np.int64)
        hi = lo + np.array([rng.choice([0, 1, 10, 60, 200]) for _ in range(4)], dtype=np.int64)
        got = np.array(ex.split_windows(layers, lo, hi)).T.tolist()
        assert got == [_split_per_ns(layers, a, b) for a, b in zip(lo.tolist(), hi.tolist(), strict=True)]


# ---------------------------------------------------------------- the former code, as it was


def _former_merged(s: iv.Spans) -> iv.Spans:
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


def _former_within(s: iv.Spans, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    return iv.union_lengths_within(_former_merged(s), lo, hi)


def _former_split(layers: list, lo: np.ndarray, hi: np.ndarray) -> list:
    covered = (np.empty(0, np.int64), np.empty(0, np.int64))
    before, out = np.zeros(len(lo), dtype=np.int64), []
    for _, s in layers:
        if len(s[0]):
            covered = _former_merged(iv.join(covered, s))
        now = iv.union_lengths_within(covered, lo, hi)
        out.append(now - before)
        before = now
    return [*out, (hi - lo) - before]


def _former_host_layers(events: pd.DataFrame) -> list:
    host = events["role"].isin(ex.HOST_ROLES).to_numpy(dtype=bool)
    names = events["name"].astype(object).to_numpy()[host]
    starts = events["ts_ns"].to_numpy(dtype=np.int64)[host]
    ends = starts + events["dur_ns"].to_numpy(dtype=np.int64)[host].clip(0)
    h = ex.rules().host
    named = pd.Series(names, dtype=object)
    sync = named.str.contains(h.sync, regex=True, na=False).to_numpy(dtype=bool)
    loader = named.str.contains(h.data_loader, regex=True, na=False).to_numpy(dtype=bool)
    return [
        (ex.SYNC, (starts[sync], ends[sync])),
        (ex.LOADER, (starts[loader], ends[loader])),
        (ex.LAUNCH, (starts, ends)),
    ]


def _former_steps(r) -> pd.DataFrame:
    trace, sel = r.trace, r.selection
    acts = ex._selected(r)
    layers, (comm, comp) = ex.gpu_layers(acts)
    if sel.stream is not None or sel.kind is not None:
        layers.append((ex.UNSELECTED, iv.spans(_matching_activities(trace, Selection(device=sel.device)))))
    layers += _former_host_layers(trace.events)
    cols = ["step", "start_ns", "wall_ns", *[c for c, _ in layers], ex.OTHER, ex.HIDDEN]
    wins = ex.windows(r, acts)
    if not wins:
        return ex._empty(cols)
    step, lo, hi = (np.array(x, dtype=np.int64) for x in zip(*wins, strict=True))
    hidden = _former_within(comm, lo, hi) + _former_within(comp, lo, hi)
    hidden -= _former_within(iv.join(comm, comp), lo, hi)
    split = _former_split(layers, lo, hi)
    return pd.DataFrame(dict(zip(cols, [step, lo, hi - lo, *split, hidden], strict=True)))


def test_the_split_equals_the_former_one_on_larger_random_sets():
    rng = np.random.default_rng(3503)
    for n in (0, 1, 50, 5000, 40000):
        layers = []
        for k in range(rng.integers(1, 8)):
            starts = rng.integers(0, 10**7, size=int(rng.integers(0, n + 1)), dtype=np.int64)
            dur = rng.choice(np.array([0, 0, 1, 100, 10**4, 3 * 10**5], dtype=np.int64), size=len(starts))
            layers.append((str(k), (starts, starts + dur)))
        lo = np.sort(rng.integers(-(10**5), 10**7, size=7, dtype=np.int64))
        hi = lo + rng.integers(0, 3 * 10**6, size=7, dtype=np.int64)
        got, want = ex.split_windows(layers, lo, hi), _former_split(layers, lo, hi)
        assert [g.tolist() for g in got] == [w.tolist() for w in want]


CORPUS_TRACES = corpus_params("*/*.json*")


@pytest.mark.parametrize("path", CORPUS_TRACES)
def test_exposed_steps_equal_the_former_code_on_every_corpus_trace(path):
    t = tv.load(path, cache=False)
    streams = ex._selected(region(t))["stream"].dropna()
    sels = [Selection()] + ([Selection(stream=int(streams.iloc[0]))] if len(streams) else [])
    for sel in sels:
        r = region(t, sel)
        got, want = ex.exposed(r).steps, _former_steps(r)
        pd.testing.assert_frame_equal(got, want, check_exact=True)
    # text columns (no categoricals) give the same host layers as the categoricals they were
    events = t.events.copy()
    for col in ("role", "name"):
        events[col] = events[col].astype(object)
    for (c1, a), (c2, b) in zip(ex.host_layers(t.events), ex.host_layers(events), strict=True):
        assert c1 == c2 and a[0].tolist() == b[0].tolist() and a[1].tolist() == b[1].tolist()


def _acts(rows: list) -> pd.DataFrame:
    kind, category, ts, dur = zip(*rows, strict=True)
    return pd.DataFrame(
        {
            "kind": pd.Categorical(kind),
            "category": pd.Categorical(category),
            "ts_ns": np.array(ts, dtype=np.int64),
            "dur_ns": np.array(dur, dtype=np.int64),
        }
    )


@pytest.mark.parametrize("category", ["gemm", None])
def test_hidden_is_communication_under_computation_with_or_without_a_category(category):
    acts = _acts(
        [
            ("kernel", "communication", 0, 100),
            ("kernel", "gemm", 20, 10),
            ("kernel", category, 50, 30),  # no category: no layer, still computation
            ("kernel", "communication", 60, 40),
            ("memcpy", "copy", 90, 50),
        ]
    )
    layers, pair = ex.gpu_layers(acts)
    lo, hi = np.array([0, 55, 200], dtype=np.int64), np.array([150, 70, 300], dtype=np.int64)
    split = ex.split_windows(layers, lo, hi)
    want = _former_within(pair[0], lo, hi) + _former_within(pair[1], lo, hi)
    want -= _former_within(iv.join(*pair), lo, hi)
    assert want.tolist() == [40, 15, 0]  # [20, 30) and [50, 80) under [0, 100)
    assert ex._hidden(pair, layers, split, lo, hi).tolist() == want.tolist()
