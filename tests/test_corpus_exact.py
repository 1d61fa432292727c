"""Every corpus trace loads, and its GPU activity counts and ns totals are exact.

The expected figures come from an independent reading in the test: stdlib json
with Decimal numbers, so no float rounding is shared with the loader.
"""

from __future__ import annotations

import gzip
import json
from collections import Counter
from decimal import Decimal

import pandas as pd
import pytest
from corpus import corpus_params

import traceview as tv

KINDS = {
    "kernel": "kernel",
    "gpu_memcpy": "memcpy",
    "gpu_memset": "memset",
    "Kernel": "kernel",
    "Memcpy": "memcpy",
    "Memset": "memset",
}


def independent_counts(path):
    with gzip.open(path) as f:
        doc = json.loads(f.read(), parse_float=Decimal)
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    base = doc.get("baseTimeNanoseconds", 0) if isinstance(doc, dict) else 0
    count, dur, ts = Counter(), Counter(), Counter()
    for e in events:
        kind = KINDS.get(e.get("cat"))
        if e.get("ph") == "X" and kind:
            count[kind] += 1
            dur[kind] += int(Decimal(e["dur"]) * 1000)
            ts[kind] += int(Decimal(e["ts"]) * 1000) + base
    n_x = sum(1 for e in events if e.get("ph") == "X")
    return count, dur, ts, n_x


@pytest.fixture(scope="module", params=corpus_params())
def loaded(request):
    """Each corpus trace loaded once for all the tests below (pytest groups them by file)."""
    return request.param, tv.load(request.param, cache=False)


def test_counts_and_durations_exact(loaded):
    path, trace = loaded
    count, dur, ts, n_x = independent_counts(path)
    k = trace.kernels
    assert len(trace.events) == n_x
    for kind in ("kernel", "memcpy", "memset"):
        sel = k[k["kind"] == kind]
        assert len(sel) == count[kind], kind
        assert int(sel["dur_ns"].sum()) == dur[kind], kind
        assert sum(map(int, sel["ts_ns"])) == ts[kind], kind  # python ints: no overflow
    assert k["ts_ns"].dtype == "int64" and k["dur_ns"].dtype == "int64"
    assert isinstance(k["name"].dtype, pd.CategoricalDtype)


def test_linkage(loaded):
    """Report the share of GPU activities linked to a CPU op; modern traces link (nearly) all."""
    path, trace = loaded
    k = trace.kernels
    linked = float(k["op"].notna().mean()) if len(k) else 1.0
    print(
        f"\n{path.parent.name}/{path.name}: {len(k)} GPU activities, {linked:.1%} linked to a CPU op, "
        f"{float((k['launch'] >= 0).mean()) if len(k) else 1:.1%} to a launch"
    )
    if len(trace.ops) == 0:
        assert k["op"].isna().all()  # nothing to link to: say so, invent nothing
        return
    launched = k[k["launch"] >= 0]
    # A launch that sits inside an op must be attributed to an op on the same thread.
    assert (launched["launch_name"].notna()).all()
    # Modern eager traces link (nearly) everything; sglang's are CUDA-graph replays
    # launched from Python, outside any aten op, and stay linked to their launch only.
    if (
        path.parent.name in ("tracelens", "tokenomics", "torch_profiling_tutorial")
        and "sglang" not in path.name
    ):
        assert linked >= 0.99


def test_external_id_agrees_with_nesting(loaded):
    """Where a launch's External id names a cpu_op, nesting found that very op.

    Some 2022-2023 Kineto builds wrote the correlation id into the launch's
    External id instead; those launches name no op and are left out here,
    which is why traceview links by nesting first.
    """
    path, trace = loaded
    ev, k = trace.events, trace.kernels
    ok = ((k["launch"] >= 0) & (k["op_event"] >= 0)).to_numpy()
    launch_rows = k.loc[ok, "launch"].to_numpy()
    launch_ext = ev["external_id"].array[launch_rows]
    own_corr = ev["correlation"].array[launch_rows]
    op_ids = set(ev.loc[ev["role"] == "cpu_op", "external_id"].dropna().astype("int64"))
    names_op = (~launch_ext.isna()) & (launch_ext != own_corr).fillna(True)
    names_op &= pd.array([x in op_ids if x is not pd.NA else False for x in launch_ext], dtype="boolean")
    if not names_op.any():
        pytest.skip("no launch External id names a cpu_op in this format")
    op_ext = ev["external_id"].array[k.loc[ok, "op_event"].to_numpy()]
    agree = float((launch_ext[names_op] == op_ext[names_op]).fillna(False).mean())
    print(f"\n{path.name}: External id agreement {agree:.1%} of {int(names_op.sum())}")
    assert agree >= 0.99
