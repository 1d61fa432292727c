"""An annotated trace: the original JSON with each GPU activity's classification in its
``args`` (keys ``traceview.category``, ``traceview.tensor_core``,
``traceview.attention_backend``, ``traceview.launched_by``) and counter tracks (``"ph": "C"``)
of GPU time per step by category, so Perfetto UI and chrome://tracing show them.
Every other event is written back as it was."""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import TraceviewError
from ..analyses.annotate import PREFIX

COUNTER = "GPU time by category in this step (us, traceview)"


class _Number(float):
    """A JSON number kept as written (``1694039959123.4567`` has more digits than a float)."""

    __slots__ = ("text",)

    def __new__(cls, text: str):
        obj = super().__new__(cls, text)
        obj.text = text
        return obj


def _number_text(value, allow_nan=True, _repr=float.__repr__, _inf=float("inf")) -> str:
    if isinstance(value, _Number):
        return value.text
    if value != value:
        return "NaN"
    if value in (_inf, -_inf):
        return "Infinity" if value > 0 else "-Infinity"
    return _repr(value)


def _dumps(doc) -> str:
    """``json.dumps`` that writes every number read by ``_read`` exactly as it was written."""
    enc = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)
    chunks = json.encoder._make_iterencode(  # the pure-Python encoder: it lets us format floats
        {}, enc.default, json.encoder.py_encode_basestring, None, _number_text, ":", ",", False, False, True)
    return "".join(chunks(doc, 0))


def _read(path: str):
    opener = gzip.open if str(path).endswith(".gz") else open
    try:
        with opener(path, "rt", encoding="utf-8") as fh:
            return json.load(fh, parse_float=_Number)
    except (OSError, ValueError) as exc:
        raise TraceviewError(f"{path}: cannot re-read the trace to annotate it ({exc})") from None


def write_annotated(trace, report, out) -> dict:
    """Write ``trace`` with ``report`` (``analyses.annotate.annotations``) to ``out``
    (``.json`` or ``.json.gz``). Returns counts: activities annotated, counter events."""
    out = Path(out)
    if not out.name.endswith((".json", ".json.gz")):
        raise TraceviewError(f"{out}: the annotated trace must end in .json or .json.gz")
    doc = _read(trace.path)
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    x = [i for i, e in enumerate(events) if isinstance(e, dict) and e.get("ph") == "X"]
    if len(x) != len(trace.events):
        raise TraceviewError(f"{trace.path}: {len(x)} complete events in the file, {len(trace.events)} loaded "
                             "(malformed events?): cannot annotate it exactly")
    acts = report["activities"]
    names = trace.events["name"].astype(str).to_numpy()
    for row in acts.itertuples(index=False):
        e = events[x[int(row.event)]]
        if str(e.get("name")) != names[row.event]:
            raise TraceviewError(f"{trace.path}: event {row.event} does not match the loaded trace")
        args = e.setdefault("args", {}) if isinstance(e.get("args"), dict) or "args" not in e else None
        if args is None:
            continue
        args[PREFIX + "category"] = row.category
        args[PREFIX + "tensor_core"] = _flag(row.tensor_core)
        args[PREFIX + "attention_backend"] = row.attention_backend if isinstance(row.attention_backend, str) else None
        args[PREFIX + "launched_by"] = str(row.launched_by)
    counters = _counters(trace, report, events, x)
    events.extend(counters)
    text = _dumps(doc)
    try:
        if out.name.endswith(".gz"):
            with gzip.open(out, "wt", encoding="utf-8", compresslevel=6) as fh:
                fh.write(text)
        else:
            out.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise TraceviewError(f"{out}: cannot write ({exc.strerror or exc})") from None
    return {"activities": len(acts), "counter_events": len(counters)}


def _flag(value):
    """True/False, or None when unknown (NA, NaN, None)."""
    if value is None or value is pd.NA or (isinstance(value, float) and value != value):
        return None
    return bool(value)


def _counters(trace, report, events, x) -> list:
    """One counter sample per step at its first GPU activity (GPU time per category, us),
    and zeros after the last activity."""
    k, per = trace.kernels, report["per_step"]
    if not len(k):
        return []
    raw = [events[x[int(i)]] for i in k["event"].to_numpy()]
    ts = np.array([float(e.get("ts", 0)) for e in raw])
    end = ts + np.array([float(e.get("dur", 0) or 0) for e in raw])
    step = k["step"].fillna(-1).astype(np.int64).to_numpy()
    pid = raw[0].get("pid", 0)
    cats = sorted(per["category"].unique().tolist())
    out = []
    for s, g in per.groupby("step", sort=True):
        if s < 0:
            continue
        values = dict.fromkeys(cats, 0.0) | {c: round(v / 1000.0, 3) for c, v in zip(g["category"], g["time_ns"])}
        out.append({"ph": "C", "name": COUNTER, "pid": pid, "ts": float(ts[step == s].min()), "args": values})
    if out:
        out.append({"ph": "C", "name": COUNTER, "pid": pid, "ts": float(end.max()), "args": dict.fromkeys(cats, 0.0)})
    return out
