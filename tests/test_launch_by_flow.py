"""GPU activity -> runtime launch through the flow events (``link._launch_by_flow``), against a
plain-Python reference: dicts over the flow events, read with ``json`` from the corpus traces,
and over hand-made tables for what the corpus does not show (a flow id with two starts, two flows
ending on one activity, exact copies, a pid written 1 in one table and "1" in another, times too
far apart for one int64 key)."""

from __future__ import annotations

import gzip
import json
import random
from decimal import Decimal

import numpy as np
import pandas as pd
import pytest
from corpus import corpus_params

from traceview.link import _launch_by_flow
from traceview.model import FLOW_CATS, ROLES, build_events
from traceview.read import read

Key = tuple  # (pid text or None, tid text or None, ts in ns)


def reference(activities: list[Key], flows: list[tuple], runtime: list[tuple[int, Key]]) -> list:
    """Per activity key, the runtime launch its flow names, as (row, key), or None.

    ``flows``: (ph, id text or None, key); ``runtime``: (events row, key) in file order. A flow
    ending on an activity gives its id, that id's start gives a key, and the first runtime call
    at that key is the launch. An activity with flows of two ids ending on it, or an id with two
    different starts, links nothing; an exact copy of a flow event is the same event."""
    ends: dict[Key, set] = {}
    starts: dict = {}
    for ph, flow_id, key in flows:
        if ph == "f":
            ends.setdefault(key, set()).add(flow_id)
        elif ph == "s":
            starts.setdefault(flow_id, set()).add(key)
    first: dict[Key, int] = {}
    for row, key in runtime:
        first.setdefault(key, row)
    out = []
    for key in activities:
        ids = ends.get(key, set())
        begun = starts.get(next(iter(ids)), set()) if len(ids) == 1 else set()
        at = next(iter(begun)) if len(begun) == 1 else None
        out.append((first[at], at) if at in first else None)
    return out


def _text(value) -> str | None:
    return None if value is None or (isinstance(value, float) and np.isnan(value)) else str(value)


def _keys(frame: pd.DataFrame) -> list[Key]:
    cols = [frame[c].astype(object).tolist() for c in ("pid", "tid")]
    return [(_text(p), _text(t), int(ts)) for p, t, ts in zip(*cols, frame["ts_ns"].tolist(), strict=True)]


def _runtime(events: pd.DataFrame) -> list[tuple[int, Key]]:
    rows = np.flatnonzero(events["role"].astype(object).to_numpy() == "runtime")
    return list(zip(rows.tolist(), _keys(events.iloc[rows]), strict=True))


def _found(out: np.ndarray, events: pd.DataFrame) -> list:
    keys = _keys(events)
    return [(int(r), keys[r]) if r >= 0 else None for r in out]


# ------------------------------------------------------------------ corpus traces, read with json


def _json_flows(path) -> list[tuple]:
    """The flow events as written: (ph, id text, key), ts in ns by Decimal (as the reader keeps it)."""
    with gzip.open(path) as f:
        doc = json.loads(f.read(), parse_float=Decimal)
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    base = doc.get("baseTimeNanoseconds", 0) if isinstance(doc, dict) else 0
    out = []
    for e in events:
        if e.get("ph") in ("s", "f") and e.get("cat") in FLOW_CATS:
            ts = int(Decimal(e["ts"]) * 1000) + base
            out.append((e["ph"], _text(e.get("id")), (_text(e.get("pid")), _text(e.get("tid")), ts)))
    return out


@pytest.mark.parametrize("path", corpus_params())
def test_corpus_flows_against_json(path):
    """Every GPU activity of each corpus trace with flow events: the launch the vectorised join
    finds is the one the reference finds from the file's own flow events."""
    flows = _json_flows(path)
    if not flows:
        pytest.skip("no flow events")
    raw = read(str(path))
    built = build_events(raw.columns, raw.meta)
    events, activities = built.events, built.activities
    assert {r for r, _ in _runtime(events)} == set(
        np.flatnonzero(events["cat"].astype(str).str.lower().map(ROLES).to_numpy() == "runtime")
    )
    want = reference(_keys(activities), flows, _runtime(events))
    got = _found(_launch_by_flow(activities, events, built.flows()), events)
    assert got == want
    assert sum(w is not None for w in want) > 0  # the traces with flows link by them


# ------------------------------------------------------------------ hand-made tables


def _frames(kernels: list, flows: list, runtime: list, others: list = ()):
    """Tables from Python values: kernels (pid, tid, ts); flows (ph, id, pid, tid, ts); runtime
    and other events (pid, tid, ts), the runtime calls first in the file unless ``others`` says."""
    k = pd.DataFrame(kernels, columns=["pid", "tid", "ts_ns"])
    f = pd.DataFrame(flows, columns=["ph", "id", "pid", "tid", "ts_ns"])
    rows = [("runtime", *r) for r in runtime] + [("cpu_op", *r) for r in others]
    e = pd.DataFrame(rows, columns=["role", "pid", "tid", "ts_ns"])
    for frame, cols in ((k, ["pid", "tid"]), (f, ["ph", "id", "pid", "tid"]), (e, ["role", "pid", "tid"])):
        for c in cols:
            frame[c] = pd.Categorical(frame[c].astype(object).tolist())
        frame["ts_ns"] = frame["ts_ns"].astype(np.int64)
    return k, e, f


def _check(k, e, f) -> list:
    flows = [(_text(ph), _text(i), key) for ph, i, key in zip(f["ph"], f["id"], _keys(f), strict=True)]
    want = reference(_keys(k), flows, _runtime(e))
    got = _found(_launch_by_flow(k, e, f), e)
    assert got == want
    return [g[0] if g else -1 for g in got]


def test_one_flow_links_and_its_runtime_call_is_the_first_at_its_place():
    k, e, f = _frames(
        [(0, 7, 100), (0, 7, 200)],
        [("s", 5, 1, 1, 10), ("f", 5, 0, 7, 100), ("t", 6, 1, 1, 20), ("f", 6, 0, 7, 200)],
        [(1, 1, 10), (1, 1, 10), (1, 1, 20)],
    )
    assert _check(k, e, f) == [0, -1]  # the second flow has a step, no start


def test_a_flow_id_with_two_starts_links_nothing():
    k, e, f = _frames(
        [(0, 7, 100), (0, 7, 300)],
        [
            ("s", 5, 1, 1, 10),
            ("s", 5, 1, 1, 11),
            ("f", 5, 0, 7, 100),
            ("s", 8, 1, 1, 30),
            ("f", 8, 0, 7, 300),
        ],
        [(1, 1, 10), (1, 1, 11), (1, 1, 30)],
    )
    assert _check(k, e, f) == [-1, 2]


def test_two_flows_ending_on_one_activity_link_nothing():
    k, e, f = _frames(
        [(0, 7, 100), (0, 8, 100)],
        [
            *[("s", 5, 1, 1, 10), ("s", 6, 1, 1, 20), ("f", 5, 0, 7, 100), ("f", 6, 0, 7, 100)],
            *[("s", 9, 1, 1, 30), ("f", 9, 0, 8, 100)],
        ],
        [(1, 1, 10), (1, 1, 20), (1, 1, 30)],
    )
    assert _check(k, e, f) == [-1, 2]


def test_exact_copies_of_a_flow_event_count_as_one():
    k, e, f = _frames(
        [(0, 7, 100), (0, 7, 100)],  # two activities at one place: both are the flow's
        [("s", 5, 1, 1, 10), ("s", 5, 1, 1, 10), ("f", 5, 0, 7, 100), ("f", 5, 0, 7, 100)],
        [(1, 1, 10)],
    )
    assert _check(k, e, f) == [0, 0]


def test_pid_tid_and_id_match_by_their_text():
    """pid 0 (an int in one table) and "0" (text in another) are one process; so for tid and id.
    A missing pid matches a missing pid, not the text "nan"."""
    k, e, f = _frames(
        [(0, 7, 100), ("0", "7", 200), (None, 7, 300), ("nan", 7, 400)],
        [
            *[("s", 5, "1", "1", 10), ("f", "5", "0", "7", 100), ("s", "6", 1, 1, 20), ("f", 6, 0, 7, 200)],
            *[("s", 7, 1, 1, 30), ("f", 7, None, 7, 300), ("s", 8, 1, 1, 40), ("f", 8, None, 7, 400)],
        ],
        [(1, 1, 10), ("1", "1", 20), (1, 1, 30), (1, 1, 40)],
    )
    assert _check(k, e, f) == [0, 1, 2, -1]


def test_times_too_far_apart_for_one_key():
    """A flow event at the far end of int64 time (a damaged ts) leaves the other links as they are."""
    far = np.iinfo(np.int64).min
    k, e, f = _frames(
        [(0, 7, 100), (0, 7, far)],
        [("s", 5, 1, 1, 10), ("f", 5, 0, 7, 100), ("s", 6, 1, 1, 2**62), ("f", 6, 0, 7, far)],
        [(1, 1, 10), (1, 1, 2**62)],
    )
    assert _check(k, e, f) == [0, 1]


def test_runtime_calls_behind_other_events_and_no_flows():
    k, e, f = _frames([(0, 7, 100)], [("f", 5, 0, 7, 100)], [], others=[(1, 1, 10)])
    assert _check(k, e, f) == [-1]
    k, e, f = _frames([(0, 7, 100)], [], [(1, 1, 10)])
    assert _check(k, e, f) == [-1]


@pytest.mark.parametrize("seed", range(6))
def test_random_tables_against_the_reference(seed):
    """Small random tables over few pids, tids, ids and times, so that links, clashes, copies and
    texts written two ways all occur; some with times at the ends of int64."""
    rng = random.Random(seed)
    linked = 0
    for _ in range(100):
        ts = [0, 1] if rng.random() < 0.7 else [np.iinfo(np.int64).min, 2**62]

        def place(ts=ts) -> tuple:  # pid 0 written two ways, missing, the text "nan", another
            return rng.choice([0, "0", 0, "0", None, "nan", 1]), rng.choice([7, "7", 7, None]), rng.choice(ts)

        flows = []
        for _ in range(rng.randint(0, 6)):  # mostly whole flows, some halves, some steps
            flow_id = rng.choice([1, "1", 2, 3, None])
            phases = rng.choice([["s", "f"], ["s", "f"], ["s"], ["f"], ["t"], ["s", "f", "f"]])
            flows += [(ph, flow_id, *place()) for ph in phases]
        rng.shuffle(flows)
        kernels = [place() for _ in range(rng.randint(1, 6))]
        kernels += [f[2:] for f in flows if f[0] == "f" and rng.random() < 0.8]
        runtime = [place() for _ in range(rng.randint(0, 4))]
        runtime += [f[2:] for f in flows if f[0] == "s" and rng.random() < 0.8]
        rng.shuffle(runtime)
        others = [place() for _ in range(rng.randint(0, 3))]
        linked += sum(r >= 0 for r in _check(*_frames(kernels, flows, runtime, others)))
    assert linked > 30  # the cases reach links, not only -1
