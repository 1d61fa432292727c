"""Seed inputs for fuzz/fuzz_scan.c: runs of real events, as the scanner receives them.

Each seed is 1-6 consecutive events of a real trace, joined as in a traceEvents array
(the text between its brackets): the sample traces, plus the corpus traces where
``TRACEVIEW_CORPUS`` (or ../shared/corpus) has them. A few hand-made ones cover what real
traces rarely hold: escapes, surrogate pairs, [memory] events, flows, numbers at the limits.

    python fuzz/seeds.py OUT_DIR [--max 400]
"""

from __future__ import annotations

import argparse
import gzip
import os
import random
from pathlib import Path

import msgspec

ROOT = Path(__file__).resolve().parents[1]
HANDMADE = [
    b'{"ph":"X","name":"a\\u00e9\\ud83d\\ude00\\n\\"","cat":"kernel","pid":0,"tid":"7","ts":1.5,"dur":0.001,'
    b'"args":{"correlation":3,"External id":-4,"device":"0","stream":7,"Input Dims":[[1,2],[]],"bytes":"x"}}',
    b'{"ph":"i","name":"[memory]","pid":1,"tid":2,"ts":4611686018427386.999,'
    b'"args":{"Addr":140000000000,"Bytes":-512,"Total Allocated":0,"Total Reserved":null,"Device Type":1,'
    b'"Device Id":0}}',
    b'{"ph":"s","id":9,"pid":1,"tid":1,"ts":0,"cat":"ac2g","bp":"e"},{"ph":"f","id":"9","pid":1,"tid":2,"ts":-0}',
    b'{"ph":"M","name":"process_name","args":{"name":[1,{"a":true}]}},{},{"ph":""}',
    b' {"ph" : "X" , "ts" : null , "dur" : 12 , "args" : null } , {"ph":"C","args":{"x":1e400}} ',
]


def trace_files() -> list[Path]:
    files = sorted((ROOT / "sample_traces").glob("*.json.gz"))
    corpus = Path(os.environ.get("TRACEVIEW_CORPUS", ROOT.parent / "shared" / "corpus"))
    if corpus.is_dir():
        files += sorted(p for p in corpus.rglob("*.json*") if p.name != "provenance.json")
    return files


def events_of(path: Path) -> list[bytes]:
    data = path.read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    try:
        doc = msgspec.json.decode(data, type=dict[str, msgspec.Raw])
        return [bytes(e) for e in msgspec.json.decode(doc["traceEvents"], type=list[msgspec.Raw])]
    except (msgspec.DecodeError, msgspec.ValidationError, KeyError):
        return []


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--max", type=int, default=400, help="at most this many seeds from traces")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    rng = random.Random(23)
    files = trace_files()
    per_file = max(1, args.max // max(1, len(files)))
    n = 0
    for path in files:
        events = events_of(path)
        for _ in range(per_file if events else 0):
            at = rng.randrange(len(events))
            run = events[at : at + rng.randint(1, 6)]
            (args.out / f"seed{n:04d}").write_bytes(b",".join(run))
            n += 1
    for k, text in enumerate(HANDMADE):
        (args.out / f"hand{k}").write_bytes(text)
    print(f"{n} seeds from {len(files)} traces, {len(HANDMADE)} hand-made, in {args.out}")


if __name__ == "__main__":
    main()
