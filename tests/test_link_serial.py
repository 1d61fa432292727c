"""The stages after the decode, made faster for issue 23 item 4, on the paths the corpus does not
reach: a launch id shared by runtime and driver calls, nesting deeper than 16 bits of depth, and
kernel names classified only where a row uses them. Each is checked against a plain recount."""

from __future__ import annotations

import json
import random

import numpy as np
import pandas as pd

import traceview as tv
from traceview.classify import annotate, classify
from traceview.link import sorted_lookup
from traceview.trees import parents_by_depth as _parents


def ev(cat, name, ts, dur, pid=1, tid=1, **args) -> dict:
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}


def kernel(ts, corr) -> dict:
    return ev("kernel", "ampere_sgemm_128x64_tn", ts, 5, pid=0, tid=7, correlation=corr, device=0, stream=7)


def load(tmp_path, events, name="t.json") -> tv.Trace:
    path = tmp_path / name
    path.write_text(json.dumps({"traceEvents": events}))
    return tv.load(path, cache=False)


def test_runtime_and_driver_calls_sharing_a_correlation_id(tmp_path):
    """Per id the runtime call is the launch, whatever driver calls under it share the id; with
    no runtime call one driver call is; two calls of the chosen kind leave the id ambiguous."""
    events = [
        ev("cpu_op", "aten::mm", 1000, 100, **{"External id": 1}),
        ev("cuda_driver", "cuLaunchKernel", 1005, 2, correlation=5),  # before the runtime call
        ev("cuda_runtime", "cudaLaunchKernel", 1010, 20, correlation=5),
        ev("cuda_driver", "cuLaunchKernel", 1012, 2, correlation=5),
        ev("cuda_driver", "cuLaunchKernel", 1015, 2, correlation=5),
        ev("cpu_op", "aten::add", 2000, 100, **{"External id": 2}),
        ev("cuda_driver", "cuLaunchKernel", 2010, 5, correlation=6),  # a driver call alone
        ev("cpu_op", "aten::mul", 3000, 100, **{"External id": 3}),
        ev("cuda_driver", "cuLaunchKernel", 3010, 5, correlation=7),  # two driver calls, one id
        ev("cuda_driver", "cuLaunchKernel", 3020, 5, correlation=7),
        kernel(1050, 5),
        kernel(2050, 6),
        kernel(3050, 7),
    ]
    trace = load(tmp_path, events)
    names = [e["name"] for e in events]
    k = trace.kernels.sort_values("ts_ns")
    assert k["launch"].tolist() == [names.index("cudaLaunchKernel"), 6, -1]
    assert k["op"].astype(object).where(k["op"].notna(), None).tolist() == ["aten::mm", "aten::add", None]
    assert any("1 GPU activity left without a launch" in w for w in trace.warnings)


def _parents_by_stack(depth: list[int]) -> list[int]:
    """The nearest earlier position one level up, by walking the positions with a stack."""
    stack: list[int] = []
    out = []
    for i, d in enumerate(depth):
        del stack[d:]
        out.append(stack[-1] if stack else -1)
        stack.append(i)
    return out


def test_parents_against_a_stack_walk():
    """Depth sequences as a sweep gives them (each at most one deeper than the one before), one
    of them a chain past 2**15 levels, where the depths no longer fit the 16-bit radix sort."""
    rng = random.Random(23)
    cases = [[0], [0, 0, 1, 2, 1, 0, 1]]
    for n in (50, 5_000):
        depth = [0]
        for _ in range(n - 1):
            depth.append(rng.randint(0, depth[-1] + 1))
        cases.append(depth)
    cases.append([*range(2**15 + 10), 0, 1, 2, 1])
    for depth in cases:
        assert _parents(np.array(depth, dtype=np.int64)).tolist() == _parents_by_stack(depth)


def test_annotate_classifies_only_the_names_in_use():
    """Rows get what ``classify`` says of their own name, whatever other names the categories
    hold; a row without a name gets no class."""
    names = ["ampere_sgemm_128x64_tn", "aten::mm", "void at::native::vectorized_elementwise_kernel<4>", "x"]
    col = pd.Categorical.from_codes([2, -1, 0, 2], categories=names)
    out = annotate(pd.DataFrame({"name": col, "dur_ns": [1, 2, 3, 4]}))
    for i, code in enumerate([2, -1, 0, 2]):
        row = out.iloc[i]
        if code < 0:
            assert out[["category", "rule", "confidence"]].iloc[i].isna().all()
            continue
        want = classify(names[code])
        assert row["category"] == want.category
        assert (row["rule"] if pd.notna(row["rule"]) else None) == want.rule
        assert (row["tensor_core"] if pd.notna(row["tensor_core"]) else None) == want.tensor_core


def _nesting_by_brute_force(start, end, group, prio) -> tuple[list[int], list[int]]:
    """Depth and parent of each span, from the definitions alone: spans in (thread, start, later
    end first, role) order; a span's depth counts the earlier spans on its thread still open at
    its start (one that ends exactly there has closed); its parent is the nearest earlier span
    one level up."""
    n = len(start)
    order = sorted(range(n), key=lambda i: (group[i], start[i], -end[i], prio[i], i))
    depth, parent = [0] * n, [-1] * n
    for k, i in enumerate(order):
        depth[i] = sum(1 for j in order[:k] if group[j] == group[i] and end[j] > start[i])
        for j in reversed(order[:k]):
            if depth[j] == depth[i] - 1:
                parent[i] = j
                break
    return depth, parent


def _events(start, dur, tid, role) -> pd.DataFrame:
    n = len(start)
    return pd.DataFrame(
        {
            "ts_ns": np.array(start, dtype=np.int64),
            "dur_ns": np.array(dur, dtype=np.int64),
            "pid": pd.Categorical(["p"] * n),
            "tid": pd.Categorical([f"t{t}" for t in tid]),
            "role": pd.Categorical(role),
        }
    )


def test_nesting_against_the_definition():
    """Touching siblings, zero-length spans, equal starts of several roles, partial overlaps and
    several threads, on both paths: thread and time in one key (every real trace), and times
    too far apart for one (the keys sorted apart)."""
    from traceview.link import _ROLE_ORDER, _time_key, nest

    rng = random.Random(23)
    roles = list(_ROLE_ORDER)
    for far in (False, True):
        for _ in range(150):
            n = rng.randint(2 if far else 1, 40)
            start = [rng.randint(0, 12) * 10 for _ in range(n)]
            dur = [rng.choice([0, 0, 10, 10, 20, 35, 60]) for _ in range(n)]
            if far:
                start[0] = -(2**62)  # the span of times no longer fits one int64 key
            tid = [rng.randint(0, 2) for _ in range(n)]
            role = [rng.choice(roles) for _ in range(n)]
            events = _events(start, dur, tid, role)
            ends = [s + d for s, d in zip(start, dur, strict=True)]
            tids = np.array(tid, dtype=np.int64)
            assert (_time_key(tids, np.array(start), np.array(ends)) is None) == far
            got = nest(events)
            prio = [_ROLE_ORDER[r] for r in role]
            want_depth, want_parent = _nesting_by_brute_force(start, ends, tid, prio)
            assert got["depth"].tolist() == want_depth
            assert got["parent"].tolist() == want_parent


def test_an_activity_without_external_id_names_no_op(tmp_path):
    """Where neither nesting nor correlation finds the op, the External id names it; an activity
    without one names none, even where an op's External id is -1 (a missing id is not -1)."""
    events = [
        ev("cpu_op", "aten::mm", 1000, 100, **{"External id": -1}),
        ev("cpu_op", "aten::add", 2000, 100, **{"External id": 7}),
        {**kernel(1050, 5), "args": {"device": 0, "stream": 7}},  # no correlation, no External id
        {**kernel(2050, 6), "args": {"device": 0, "stream": 7, "External id": 7}},
    ]
    k = load(tmp_path, events).kernels.sort_values("ts_ns")
    assert k["op"].astype(object).where(k["op"].notna(), None).tolist() == [None, "aten::add"]


def test_sorted_lookup_against_a_dict():
    rng = np.random.default_rng(3)
    for n in (0, 1, 7, 1000):
        keys = np.unique(rng.integers(-50, 50, n))
        values = rng.integers(0, 10**6, len(keys))
        queries = rng.integers(-60, 60, 200)
        table = dict(zip(keys.tolist(), values.tolist(), strict=True))
        assert sorted_lookup(keys, values, queries).tolist() == [table.get(q, -1) for q in queries.tolist()]
