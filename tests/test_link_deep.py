"""Hostile nesting: a trace of 10,000 cpu_ops each inside the one before loads in bounded memory
(it took 2.4 GB when chains were built whole and the tree walked one level a pass), and its op
chains longer than ``CHAIN_MAX`` are elided as documented in docs/metrics.md. The pointer-jumping
walks are checked against a plain walk up the parents, node by node."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from forests import deep_forest

from traceview.link import ARROW, CHAIN_MAX, _first_open, elision
from traceview.trees import count_ancestors, farthest, nearest, subtree_sums

DEPTH = 10_000


def _hostile() -> list[dict]:
    """Op i spans [10i, 20 DEPTH - 10i] us, inside every op before it, and launches one 3 us kernel;
    an allocation (Addr i) at 20 DEPTH - 10i - 5 lies in op i and no op inside it, after all of
    them end: finding its op from the last op to start walks DEPTH - 1 - i levels up."""
    events = []
    for i in range(DEPTH):
        span = {"pid": 1, "tid": 1, "ts": 10 * i}
        events += [
            {"ph": "X", "cat": "cpu_op", "name": f"aten::op{i % 7}", **span, "dur": 20 * (DEPTH - i)},
            {
                "ph": "X",
                "cat": "cuda_runtime",
                "name": "cudaLaunchKernel",
                **span,
                "dur": 1,
                "args": {"correlation": i},
            },
            {
                "ph": "X",
                "cat": "kernel",
                "name": "k",
                "pid": 0,
                "tid": 7,
                "ts": 10 * i + 5,
                "dur": 3,
                "args": {"correlation": i, "device": 0, "stream": 7},
            },
            {
                "ph": "i",
                "s": "t",
                "cat": "cpu_instant_event",
                "name": "[memory]",
                "pid": 1,
                "tid": 1,
                "ts": 20 * DEPTH - 10 * i - 5,
                "args": {"Bytes": 16, "Addr": i, "Device Type": 0, "Device Id": -1},
            },
        ]
    return events


@pytest.fixture(scope="module")
def deep(tmp_path_factory):
    """Load the hostile trace in a fresh interpreter; its peak memory growth and its op table."""
    path = tmp_path_factory.mktemp("deep") / "deep.json"
    events = _hostile()
    path.write_text(json.dumps({"traceEvents": events}))
    script = textwrap.dedent(
        """
        import json, resource, sys
        import traceview as tv
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        trace = tv.load(sys.argv[1], cache=False)
        grew = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
        ops, mem = trace.ops.sort_values("ts_ns"), trace.memory.sort_values("addr")
        print(json.dumps({"grew_kib": grew, "chains": ops["chain"].astype(str).tolist(),
                          **{c: ops[c].tolist() for c in ["depth", "n_kernels", "gpu_ns", "ts_ns"]},
                          "mem_op_ts": ops["ts_ns"].to_numpy()[mem["op"].to_numpy()].tolist()}))
        """
    )
    run = subprocess.run(
        [sys.executable, "-c", script, str(path)], capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, run.stderr
    return [e["name"] for e in events if e["cat"] == "cpu_op"], json.loads(run.stdout)


def test_deep_nesting_loads_in_bounded_memory(deep):
    _, out = deep
    assert out["depth"] == list(range(DEPTH))
    # inclusive kernel counts and time: op i holds the kernels of ops i..DEPTH-1
    assert out["n_kernels"] == [DEPTH - i for i in range(DEPTH)]
    assert out["gpu_ns"] == [3000 * (DEPTH - i) for i in range(DEPTH)]
    assert out["mem_op_ts"] == [10_000 * i for i in range(DEPTH)]  # allocation i is in op i
    assert out["grew_kib"] < 500 * 1024, f"load grew the peak by {out['grew_kib'] // 1024} MiB"


def test_long_chains_are_elided_short_ones_kept_whole(deep):
    names, out = deep
    half = CHAIN_MAX // 2
    for i in [0, 1, CHAIN_MAX - 2, CHAIN_MAX - 1, CHAIN_MAX, CHAIN_MAX + 1, 5000, DEPTH - 1]:
        path = names[: i + 1]  # op i sits inside every op before it
        want = (
            path if len(path) <= CHAIN_MAX else [*path[:half], elision(len(path) - CHAIN_MAX), *path[-half:]]
        )
        assert out["chains"][i].split(ARROW) == want, i
    assert out["chains"][CHAIN_MAX].split(ARROW)[half] == "… 1 op …"
    assert out["chains"][-1].split(ARROW)[half] == f"… {DEPTH - CHAIN_MAX} ops …"
    assert max(len(c) for c in out["chains"]) < 40 * (CHAIN_MAX + 1)  # no text grows with depth


def _walk(parent: np.ndarray, marked: np.ndarray) -> tuple[list, list, list]:
    """Per node, by stepping up one parent at a time: nearest and farthest marked, depth."""
    near, far, depth = [], [], []
    for x in range(len(parent)):
        path = [x]
        while parent[path[-1]] >= 0:
            path.append(int(parent[path[-1]]))
        hits = [p for p in path if marked[p]]
        near.append(hits[0] if hits else -1)
        far.append(hits[-1] if hits else -1)
        depth.append(len(path) - 1)
    return near, far, depth


@pytest.mark.parametrize("seed", range(5))
def test_pointer_jumping_matches_a_plain_walk(seed, walks):
    rng = np.random.default_rng(seed)
    n = 3000
    # a forest: each node's parent is an earlier node or none; chains run deep where parents are recent
    parent = deep_forest(rng, n)
    marked = rng.random(n) < [0.0, 0.02, 0.5, 1.0][seed % 4]
    near, far, depth = _walk(parent, marked)
    assert nearest(parent, marked).tolist() == near
    assert farthest(parent, marked).tolist() == far
    assert count_ancestors(parent).tolist() == depth
    assert max(depth) > 100  # deep enough that pointer jumping takes many doublings
    values = rng.integers(0, 1000, n)
    sums = [0] * n
    for start in range(n):  # each value added to its node and every ancestor, one step at a time
        x = start
        while x >= 0:
            sums[x] += int(values[start])
            x = parent[x]
    assert subtree_sums(parent, np.array(depth), values)[0].tolist() == sums
    # ends in no order along a path (a damaged trace), queries from any node or none
    end = rng.integers(0, 1000, n)
    cur = rng.integers(-1, n, 500)
    ts = rng.integers(0, 1100, 500)
    want = []
    for c, t in zip(cur.tolist(), ts.tolist(), strict=True):
        while c >= 0 and end[c] < t:
            c = int(parent[c])
        want.append(c)
    assert _first_open(cur, ts, parent, end).tolist() == want


def test_first_open_refuses_a_loop_of_parents():
    """A loop of parents ends in a ValueError instead of a pass per power of two forever."""
    parent = np.array([1, 2, 0, -1], dtype=np.int64)
    end = np.zeros(4, dtype=np.int64)
    with pytest.raises(ValueError, match="loop"):
        _first_open(np.array([0]), np.array([5]), parent, end)
    chain = np.array([-1, 0, 1, 2], dtype=np.int64)  # the deepest path n long still ends
    assert _first_open(np.array([3]), np.array([5]), chain, end).tolist() == [-1]
