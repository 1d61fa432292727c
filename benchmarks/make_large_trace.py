"""Make a large, valid, linkable PyTorch profiler trace by tiling a real one N times.

Copy k (0-based) of the source's events is shifted by ``k * (span + gap)`` in time,
and every id that links events -- ``args.correlation``, ``args["External id"]``,
``args["external id"]``, flow ``id`` and ``ProfilerStep#N`` numbers -- by ``k`` times
(the source's largest value + 1), so that the copies never collide and traceview,
HTA, ... link each copy exactly like the original. Metadata (``ph: "M"``) events are
written once. Output is ``.json`` or, if the name ends in ``.gz``, gzip.

    python benchmarks/make_large_trace.py SRC OUT --copies 10
    python benchmarks/make_large_trace.py SRC OUT --size-mb 300   # about 300 MB of JSON
"""

from __future__ import annotations

import argparse
import gzip
import re
import sys

import msgspec

GAP_US = 1000
_STEP = re.compile(r"^ProfilerStep#(\d+)$")


def _load(path: str) -> dict:
    with open(path, "rb") as fh:
        data = fh.read()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    doc = msgspec.json.decode(data)
    if isinstance(doc, list):
        doc = {"traceEvents": doc}
    return doc


def _span(events: list) -> tuple[float, float]:
    lo, hi = None, None
    for e in events:
        ts = e.get("ts")
        if not isinstance(ts, (int, float)) or e.get("ph") == "M":
            continue
        end = ts + (e.get("dur") if isinstance(e.get("dur"), (int, float)) else 0)
        lo = ts if lo is None or ts < lo else lo
        hi = end if hi is None or end > hi else hi
    return (lo or 0), (hi or 0)


def _max_ids(events: list) -> tuple[int, int]:
    """(largest correlation / External id / flow id, largest ProfilerStep number)."""
    top, step = 0, 0
    for e in events:
        args = e.get("args") if isinstance(e.get("args"), dict) else {}
        for v in (e.get("id"), args.get("correlation"), args.get("External id"), args.get("external id")):
            if isinstance(v, int) and not isinstance(v, bool):
                top = max(top, v)
            elif isinstance(v, str) and v.isdigit():
                top = max(top, int(v))
        m = _STEP.match(str(e.get("name", "")))
        if m:
            step = max(step, int(m.group(1)))
    return top, step


def _shift_id(v, by: int):
    if isinstance(v, int) and not isinstance(v, bool):
        return v + by
    if isinstance(v, str) and v.isdigit():
        return str(int(v) + by)
    return v


def _copy(events: list, k: int, dt, did: int, dstep: int) -> list:
    out = []
    for e in events:
        if e.get("ph") == "M":
            continue
        e = dict(e)
        ts = e.get("ts")
        if isinstance(ts, int) and not isinstance(ts, bool):
            e["ts"] = ts + k * dt
        elif isinstance(ts, float):
            e["ts"] = round(ts + k * dt, 3)
        if "id" in e:
            e["id"] = _shift_id(e["id"], k * did)
        args = e.get("args")
        if isinstance(args, dict):
            args = dict(args)
            for key in ("correlation", "External id", "external id"):
                if key in args:
                    args[key] = _shift_id(args[key], k * did)
            e["args"] = args
        name = e.get("name")
        if isinstance(name, str) and name.startswith("ProfilerStep#"):
            m = _STEP.match(name)
            if m:
                e["name"] = f"ProfilerStep#{int(m.group(1)) + k * dstep}"
        out.append(e)
    return out


def make(src: str, out: str, copies: int) -> int:
    """Write ``copies`` tiles of ``src`` to ``out``; returns the bytes of JSON written."""
    doc = _load(src)
    events = doc.pop("traceEvents")
    lo, hi = _span(events)
    dt = int(hi - lo) + GAP_US
    top, step = _max_ids(events)
    did, dstep = top + 1, step + 1
    enc = msgspec.json.Encoder()
    opener = gzip.open if out.endswith(".gz") else open
    written = 0
    with opener(out, "wb") as fh:
        head = enc.encode(doc)
        prefix = head[:-1] + (b',"traceEvents":[' if doc else b'"traceEvents":[')
        fh.write(prefix)
        written += len(prefix)
        meta = [e for e in events if e.get("ph") == "M"]
        first = True
        for k in range(copies):
            part = (meta if k == 0 else []) + _copy(events, k, dt, did, dstep)
            if not part:
                continue
            body = enc.encode(part)[1:-1]
            if not first:
                fh.write(b",\n")
                written += 2
            fh.write(body)
            written += len(body)
            first = False
        fh.write(b"]}")
        written += 2
    return written


def copies_for(src: str, size_mb: float) -> int:
    doc = _load(src)
    one = len(msgspec.json.encode(doc["traceEvents"]))
    return max(1, round(size_mb * 1e6 / one))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("src", help="a real trace (.json or .json.gz)")
    p.add_argument("out", help="output path (.json, or .json.gz for gzip)")
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--copies", type=int, help="tile the source this many times")
    g.add_argument("--size-mb", type=float, help="tile until about this many MB of JSON")
    a = p.parse_args(argv)
    copies = a.copies if a.copies else copies_for(a.src, a.size_mb)
    n = make(a.src, a.out, copies)
    print(f"{a.out}: {copies} copies of {a.src}, {n / 1e6:.1f} MB of JSON")
    return 0


if __name__ == "__main__":
    sys.exit(main())
