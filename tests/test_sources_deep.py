"""Hostile nesting in Python stacks: 10,000 python_function frames each called by the one before,
and 10,000 cpu_ops each inside the one before that inherit one ``Call stack``, load in bounded
memory (stack text was built whole at every level, one pass per level: 50,000 frames took
seconds and gigabytes), and stacks longer than ``STACK_MAX`` frames are elided as documented in
docs/metrics.md 'Python stacks'. The loop-safe depth walk is checked against a plain walk."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from forests import deep_forest

import traceview as tv
from traceview.sources import SEP, STACK_MAX, _forest, frame_elision

DEPTH = 10_000
CALL_STACK = "torch/nn/functional.py(5): softmax;model.py(42): forward;train.py(3): <module>"


def _frame(i: int) -> str:
    """Frame i's name: a user file every 7th frame, library code otherwise."""
    return f"model{i}.py({i % 50}): f{i % 5}" if i % 7 == 0 else f"torch/nn/m{i % 3}.py({i % 11}): g"


def _hostile() -> list[dict]:
    """Thread 1: frame i spans [10i, 20 DEPTH - 10i] us, called by frame i - 1 (Python ids i + 1);
    op i starts 1 us into frame i, so its stack is frame i's. Thread 2: op i spans
    [10i, 20 DEPTH - 10i] us inside op i - 1; only the outermost carries a ``Call stack``."""
    events = []
    for i in range(DEPTH):
        span = {"ph": "X", "pid": 1, "ts": 10 * i, "dur": 20 * (DEPTH - i)}
        args = {"Python id": i + 1, "Python parent id": i}  # id 0: no frame, so frame 0 is a root
        events += [
            {**span, "tid": 1, "cat": "python_function", "name": _frame(i), "args": args},
            {**span, "tid": 1, "cat": "cpu_op", "name": "aten::a", "ts": 10 * i + 1, "dur": 1},
            {**span, "tid": 2, "cat": "cpu_op", "name": f"aten::op{i % 7}"}
            | ({"args": {"Call stack": CALL_STACK}} if i == 0 else {}),
        ]
    return events


@pytest.fixture(scope="module")
def deep(tmp_path_factory):
    """Load the hostile trace in a fresh interpreter; its peak memory growth and its ops' stacks."""
    path = tmp_path_factory.mktemp("deep") / "deep.json"
    path.write_text(json.dumps({"traceEvents": _hostile()}))
    script = textwrap.dedent(
        """
        import json, resource, sys
        import traceview as tv
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        trace = tv.load(sys.argv[1], cache=False)
        grew = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
        out = {"grew_kib": grew}
        for tid, ops in trace.ops.groupby("tid", observed=True):
            ops = ops.sort_values("ts_ns")
            cols = ["stack", "source", "call"]
            out[str(tid)] = {c: ops[c].astype("string").fillna("-").tolist() for c in cols}
        print(json.dumps(out))
        """
    )
    run = subprocess.run([sys.executable, "-c", script, path], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)


def test_deep_stacks_load_in_bounded_memory_and_deep_ops_inherit(deep):
    assert deep["grew_kib"] < 500 * 1024, f"load grew the peak by {deep['grew_kib'] // 1024} MiB"
    inherited = deep["2"]
    assert inherited["stack"] == [CALL_STACK] * DEPTH  # op 9,999 has op 0's stack, 9,999 levels up
    assert set(inherited["source"]) == {"model.py:42 forward"} and set(inherited["call"]) == {"softmax"}


def test_long_stacks_are_elided_short_ones_kept_whole(deep):
    ops, half = deep["1"], STACK_MAX // 2
    for i in [0, 1, STACK_MAX - 2, STACK_MAX - 1, STACK_MAX, STACK_MAX + 1, 5000, DEPTH - 1]:
        frames = [_frame(k) for k in range(i, -1, -1)]  # innermost first: frame i, then its callers
        want = (
            frames
            if len(frames) <= STACK_MAX
            else [*frames[:half], frame_elision(len(frames) - STACK_MAX), *frames[-half:]]
        )
        assert ops["stack"][i].split(SEP) == want, i
        # the user's line: the innermost model*.py frame, a frame every 7th level, never elided here
        user = i - i % 7
        assert ops["source"][i] == f"model{user}.py:{user % 50} f{user % 5}", i
        assert ops["call"][i] == ("-" if user == i else "g"), i
    assert ops["stack"][STACK_MAX].split(SEP)[half] == "… 1 frame …"
    assert ops["stack"][-1].split(SEP)[half] == f"… {DEPTH - STACK_MAX} frames …"
    assert max(len(s) for s in ops["stack"]) < 40 * (STACK_MAX + 1)  # no text grows with depth


def _walk(parent: np.ndarray) -> list[int]:
    """Per node, by stepping up one parent at a time: its depth, or 0 where its callers loop."""
    depth = []
    for x in range(len(parent)):
        seen = [x]
        while parent[seen[-1]] >= 0 and parent[seen[-1]] not in seen:
            seen.append(int(parent[seen[-1]]))
        depth.append(0 if parent[seen[-1]] >= 0 else len(seen) - 1)
    return depth


@pytest.mark.parametrize("seed", range(4))
def test_loop_safe_depth_matches_a_plain_walk(seed):
    rng = np.random.default_rng(seed)
    n = 2000
    # a forest whose chains run deep, then a few parents pointed anywhere: loops, and trees under them
    parent = deep_forest(rng, n)
    bent = rng.choice(n, size=seed * 3, replace=False)
    parent[bent] = rng.integers(0, n, size=len(bent))
    want = _walk(parent)
    cut, depth = _forest(parent)
    assert depth.tolist() == want
    looped = np.array([w == 0 and p >= 0 for w, p in zip(want, parent, strict=True)])
    assert cut.tolist() == np.where(looped, -1, parent).tolist()
    assert max(want) > 100


def _frames_trace(path, frames) -> str:
    """A trace of python_function frames (name, ts, dur, Python id, Python parent id) on one
    thread and one op at 30-40 us inside them, written to ``path``."""
    events = [
        {"ph": "X", "pid": 1, "tid": 1, "cat": "python_function", "name": name, "ts": ts, "dur": dur}
        | {"args": {"Python id": own, "Python parent id": up}}
        for name, ts, dur, own, up in frames
    ] + [{"ph": "X", "pid": 1, "tid": 1, "cat": "cpu_op", "name": "aten::x", "ts": 30, "dur": 10}]
    path.write_text(json.dumps({"traceEvents": events}))
    return str(path)


def test_callers_that_loop_load_and_are_cut(tmp_path):
    """Frames 1 and 2 name each other as caller (a damaged trace), frame 3 is called by 2: each
    has no caller trusted, so an op in frame 3 has that frame alone as its stack. The walk up
    the callers to find an op's frame once never ended on such a loop: run in a subprocess."""
    frames = [("a.py(1): f", 0, 100, 1, 2), ("b.py(2): g", 10, 80, 2, 1), ("c.py(3): h", 20, 60, 3, 2)]
    path = _frames_trace(tmp_path / "loop.json", frames)
    script = (
        "import sys, traceview as tv; t = tv.load(sys.argv[1], cache=False); "
        "print(t.ops['stack'].tolist()); print(t.warnings)"
    )
    run = subprocess.run([sys.executable, "-c", script, path], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    stacks, warnings = run.stdout.strip().splitlines()
    assert stacks == "['c.py(3): h']"
    # nothing dropped silently: the three callers not trusted are counted
    note = "3 Python frames left without a caller (following their Python parent ids leads round a loop)"
    assert note in warnings


def test_a_parent_id_several_frames_carry_is_counted(tmp_path):
    """Two frames carry Python id 5 and a third names 5 as its caller: which one called it is
    not known, so it has none, and the load says so."""
    frames = [("a.py(1): f", 0, 100, 5, 0), ("b.py(2): g", 200, 100, 5, 0), ("c.py(3): h", 20, 60, 6, 5)]
    trace = tv.load(_frames_trace(tmp_path / "shared.json", frames), cache=False)
    assert trace.ops["stack"].tolist() == ["c.py(3): h"]
    note = "1 Python frame left without a caller (each one's Python parent id names several frames)"
    assert any(note in w for w in trace.warnings), trace.warnings
