"""Each kernel's launch configuration (``grid``, ``block``), read from the trace file on demand.

The loaded Trace keeps no launch configuration (the decoders keep the fields every analysis
needs), yet it is the one evidence of problem size that every kernel carries, shapes or not
(issue 32 item 1): the same kernel with another grid ran another problem size. So the workload
verdict, which needs it only when a side has no shapes, reads the file's kernel events once more
with a narrow struct and keeps the grid and block by correlation id. Trace text is untrusted: a
grid that is not a list of 1-3 positive ints reads as missing.
"""

from __future__ import annotations

from typing import Any

import msgspec
import numpy as np
import pandas as pd

from ...errors import TraceviewError
from ...read.document import split_document
from ...read.source import read_source
from ..measure.derived import of_trace

_MAX_DIM = 2**31  # CUDA's grid x limit; anything larger is junk


class _Event(msgspec.Struct, gc=False):
    cat: Any = None
    name: Any = None
    args: Any = None  # any JSON: a junk value on one event must not lose every other event's grid


def _dims(v) -> tuple[int, ...] | None:
    """A grid or block as a tuple of positive ints, trailing 1s kept (``(100, 50, 1)``)."""
    ok = isinstance(v, list) and 1 <= len(v) <= 3
    if not ok or not all(isinstance(x, int) and not isinstance(x, bool) and 0 < x < _MAX_DIM for x in v):
        return None
    return tuple(v)


def _kernel(cat: str) -> bool:
    return cat.lower() == "kernel"


def launch_configs(trace) -> pd.DataFrame:
    """Per kernel event of the file: ``name``, ``correlation``, ``grid``, ``block`` (tuples, None
    where not recorded). Empty when the file cannot be read again (moved since it was loaded)."""
    return of_trace(trace, "launch_configs", _read)


def _read(trace) -> pd.DataFrame:
    empty = pd.DataFrame({"name": [], "correlation": [], "grid": [], "block": []})
    try:
        _, raw = split_document(read_source(trace.path, max_ratio=None).data, trace.path)
        events = msgspec.json.decode(raw, type=list[_Event])
    except (TraceviewError, OSError, msgspec.DecodeError, msgspec.ValidationError):
        return empty
    rows = [
        (e.name, e.args.get("correlation"), _dims(e.args.get("grid")), _dims(e.args.get("block")))
        for e in events
        if isinstance(e.args, dict) and isinstance(e.cat, str) and isinstance(e.name, str) and _kernel(e.cat)
    ]
    if not rows:
        return empty
    names, corr, grid, block = zip(*rows, strict=True)
    c = np.array([x if isinstance(x, int) and not isinstance(x, bool) else -1 for x in corr], dtype=np.int64)
    return pd.DataFrame({"name": names, "correlation": c, "grid": grid, "block": block})


def with_configs(trace, k: pd.DataFrame) -> pd.DataFrame:
    """``k`` (GPU activities of ``trace``) with columns ``grid`` and ``block`` joined on (name,
    correlation); None where the file records none (memcpys, memsets, old traces)."""
    cfg = launch_configs(trace)
    out = k.copy()
    if not len(cfg) or not len(k):
        out["grid"], out["block"] = None, None
        return out
    cfg = cfg[cfg["correlation"] >= 0].drop_duplicates(["name", "correlation"])
    key = pd.MultiIndex.from_arrays([k["name"].astype(str).to_numpy(), k["correlation"].to_numpy()])
    at = pd.MultiIndex.from_arrays([cfg["name"].to_numpy(), cfg["correlation"].to_numpy()]).get_indexer(key)
    for col in ("grid", "block"):
        picked = np.full(len(k), None, dtype=object)  # an object array: tuples stay whole
        picked[at >= 0] = cfg[col].to_numpy(dtype=object)[at[at >= 0]]
        out[col] = picked
    return out
