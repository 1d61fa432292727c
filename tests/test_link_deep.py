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

from traceview.link import ARROW, CHAIN_MAX, _depth, _farthest, _nearest, elision

DEPTH = 10_000


@pytest.fixture(scope="module")
def deep(tmp_path_factory):
    """Load the hostile trace in a fresh interpreter; its peak memory growth and its chains."""
    folder = tmp_path_factory.mktemp("deep")
    path = folder / "deep.json"
    events = [
        {
            "ph": "X",
            "cat": "cpu_op",
            "name": f"aten::op{i % 7}",
            "pid": 1,
            "tid": 1,
            "ts": i,
            "dur": 2 * (DEPTH - i),
        }
        for i in range(DEPTH)
    ]
    path.write_text(json.dumps({"traceEvents": events}))
    script = textwrap.dedent(
        """
        import json, resource, sys
        import traceview as tv
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        trace = tv.load(sys.argv[1], cache=False)
        grew = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
        ops = trace.ops.sort_values("ts_ns")
        print(json.dumps({"grew_kib": grew, "depth": ops["depth"].tolist(),
                          "chains": ops["chain"].astype(str).tolist()}))
        """
    )
    run = subprocess.run(
        [sys.executable, "-c", script, str(path)], capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, run.stderr
    return [e["name"] for e in events], json.loads(run.stdout)


def test_deep_nesting_loads_in_bounded_memory(deep):
    _, out = deep
    assert out["depth"] == list(range(DEPTH))
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
def test_pointer_jumping_matches_a_plain_walk(seed):
    rng = np.random.default_rng(seed)
    n = 3000
    # a forest: each node's parent is an earlier node or none; chains run deep where parents are recent
    parent = np.array(
        [-1 if i == 0 or rng.random() < 0.01 else i - 1 - int(rng.integers(0, 3)) for i in range(n)]
    )
    parent = np.where(parent >= 0, parent, -1)
    marked = rng.random(n) < [0.0, 0.02, 0.5, 1.0][seed % 4]
    near, far, depth = _walk(parent, marked)
    assert _nearest(parent, marked).tolist() == near
    assert _farthest(parent, marked).tolist() == far
    assert _depth(parent).tolist() == depth
    assert max(depth) > 100  # deep enough that pointer jumping takes many doublings
