"""What reading ``[memory]`` events costs a load (issue 19, part 4).

Takes a trace with memory events and writes beside it the same trace without them; then loads
each in a fresh process (``tv.load(path, cache=False)``, imports excluded), ``--repeats`` times,
the two taking turns, and prints the median load time of each, the memory events' share of the
events, and the cost per memory event beside the cost per other event. ``--old DIR`` (a folder
holding another version's ``traceview`` package, e.g. from ``git archive``) adds that version's
load of the trace without memory events: reading memory must not slow a trace that has none.

    python benchmarks/bench_memory.py
    python benchmarks/bench_memory.py --repeats 7 --old /tmp/old_traceview
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

DEFAULT_SRC = "/work/shared/corpus/tracelens/h100__google_owlv2-large-patch14-ensemble__1016001.json.gz"

_CHILD = r"""
import sys, time
import traceview as tv
t0 = time.perf_counter()
trace = tv.load(sys.argv[1], cache=False)
print(time.perf_counter() - t0, len(trace.memory))
"""


def without_memory(src: str, out: Path) -> tuple[int, int]:
    """Write ``src`` without its [memory] events to ``out``; (events, memory events) of ``src``."""
    with gzip.open(src, "rt", encoding="utf-8") as fh:
        doc = json.load(fh)
    events = doc["traceEvents"]
    kept = [e for e in events if e.get("name") != "[memory]"]
    doc["traceEvents"] = kept
    with gzip.open(out, "wt", encoding="utf-8") as fh:
        json.dump(doc, fh)
    return len(events), len(events) - len(kept)


def load_time(path, pythonpath: str | None) -> float:
    env = dict(os.environ)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    got = subprocess.run(
        [sys.executable, "-c", _CHILD, str(path)], capture_output=True, text=True, env=env, check=True
    )
    return float(got.stdout.split()[0])


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--src", default=DEFAULT_SRC, help="a trace with [memory] events")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--old", default=None, help="folder with another version's traceview package")
    a = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        bare = Path(tmp) / "no_memory.json.gz"
        n, n_mem = without_memory(a.src, bare)
        runs = {"with memory": (a.src, None), "without memory": (bare, None)}
        if a.old:
            runs["without memory, --old"] = (bare, a.old)
        times = {k: [] for k in runs}
        for _ in range(a.repeats):
            for name, (path, pp) in runs.items():
                times[name].append(load_time(path, pp))
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"{a.src}: {n:,} events, {n_mem:,} [memory] ({100 * n_mem / n:.1f}%); medians of {a.repeats}")
    for name, t in med.items():
        print(f"  {name:24s} {t * 1000:9.1f} ms")
    per_other = med["without memory"] / (n - n_mem)
    per_mem = (med["with memory"] - med["without memory"]) / n_mem if n_mem else float("nan")
    print(f"  per other event {per_other * 1e6:.2f} us; per [memory] event {per_mem * 1e6:.2f} us")
    return 0


if __name__ == "__main__":
    sys.exit(main())
