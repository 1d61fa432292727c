"""The per-kernel groups worked out on codes say what the per-row texts said (issue 35).

``launch_chains`` is checked against its plain definition (each activity's op found by event,
its chain read as a Python object, the stand-ins where no op is found) and ``_modes`` against
``value_counts().index[0]`` per group, on real traces and on random codes with many ties.
"""

from __future__ import annotations

import corpus
import numpy as np
import pandas as pd
import pytest

import traceview as tv
from traceview.analyses.measure.completeness import GRAPH_REPLAY, graph_replays
from traceview.analyses.measure.groups import NO_OP, _modes, launch_chain_codes, launch_chains
from traceview.analyses.select.region import Selection, region


def _plain_launch_chains(r) -> np.ndarray:
    """Every activity's chain as a Python object (NaN: none), the stand-ins as the text says."""
    k, ops = r.activities, r.trace.ops
    chains = dict(zip(ops["event"].tolist(), ops["chain"].astype(object).tolist(), strict=True))
    out = []
    for e, graph, launch in zip(
        k["op_event"].tolist(), graph_replays(k).tolist(), k["launch_name"].astype(object), strict=True
    ):
        if e >= 0 and e in chains:
            out.append(chains[e])
        elif graph:
            out.append(GRAPH_REPLAY.format(launch) if isinstance(launch, str) else np.nan)
        else:
            out.append(NO_OP)
    return np.array(out, dtype=object)


def _same_objects(x: np.ndarray, y: np.ndarray) -> bool:
    return len(x) == len(y) and all(
        (a != a and b != b) or (type(a) is type(b) and a == b) for a, b in zip(x, y, strict=True)
    )


@pytest.mark.parametrize("path", corpus.corpus_params("*/*.json.gz")[::3])
def test_launch_chains_on_codes_equal_the_chains_read_per_activity(path):
    t = tv.load(path, cache=False)
    for sel in [None, *(Selection(step=int(s)) for s in t.steps["step"].head(1))]:
        r = region(t, sel)
        got = launch_chains(r)
        assert got.dtype == object
        assert _same_objects(got, _plain_launch_chains(r))
        codes, values = launch_chain_codes(r)
        assert (codes >= -1).all() and (codes < len(values)).all()
        assert len(set(values.tolist())) == len(values)  # each text once: equal texts, one group
        assert not any(v != v for v in values)  # no chain is -1, never a NaN value


def test_modes_equal_value_counts_per_group():
    rng = np.random.default_rng(35)
    for n, keys, values in [(1, 1, 1), (50, 3, 2), (2000, 40, 5), (20000, 300, 40), (5000, 7, 200)]:
        key = rng.integers(0, keys, n)
        value = rng.integers(0, values, n)
        want = pd.Series(value).groupby(key, sort=True).agg(lambda s: s.value_counts().index[0])
        got = _modes(key, value, keys + 2)
        assert (got[want.index.to_numpy()] == want.to_numpy()).all()
        absent = np.setdiff1d(np.arange(keys + 2), want.index.to_numpy())
        assert (got[absent] == -1).all()


@pytest.mark.parametrize("path", corpus.corpus_params("*/*.json.gz")[1::4])
def test_cpu_tables_on_codes_equal_the_tables_grouped_on_texts(path):
    """chain_table and the CPU-only stacked bar, grouped on codes, against the same groups made
    on every op's text."""
    from traceview.analyses.measure.groups import chain_table, stacked_bar

    r = region(tv.load(path, cache=False))
    o = r.ops
    if not len(o):
        pytest.skip("no CPU ops")
    cpu = type(r)(**{**r.__dict__, "activities": r.activities.iloc[:0]})  # the CPU-only branch
    kind, got = stacked_bar(cpu, top=None)
    want = o.groupby(o["name"].astype(object).to_numpy())["self_ns"].sum().clip(lower=0) / r.regions
    assert kind == "cpu"
    pd.testing.assert_series_equal(got.sort_index(), want.sort_index(), check_index_type=False)
    chains = chain_table(r)
    g = o.groupby(o["chain"].astype(object).to_numpy())
    assert chains.index.tolist() == sorted(g.groups)
    assert chains["op"].tolist() == g["name"].first().astype(str).loc[chains.index].tolist()
    times = g["dur_ns"].sum().clip(lower=0) / r.regions
    assert chains["time_ns"].tolist() == times.loc[chains.index].tolist()
