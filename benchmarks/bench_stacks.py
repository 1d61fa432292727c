"""What reading Python stacks costs a load (issue 19, part 4).

Takes a trace recorded with ``with_stack=True`` and writes beside it the same trace without its
stacks (no ``python_function`` events, no ``Call stack`` args); then loads each in a fresh process
(``tv.load(path, cache=False)``, imports excluded), ``--repeats`` times, taking turns, and prints
the median load time of each, the stack events' share of the events, and the cost per stack event
beside the cost per other event. ``--old DIR`` (a folder holding another version's ``traceview``
package, e.g. from ``git archive``) adds that version's load of both: reading stacks must not slow
a trace that has none. HTA reads neither python_function parents nor Call stack, so it has no
figure to stand beside these.

    python benchmarks/bench_stacks.py
    python benchmarks/bench_stacks.py --repeats 7 --old /tmp/old_traceview
"""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from bench_memory import load_time  # one way to time a load in a fresh process

DEFAULT_SRC = "/work/shared/corpus/tracelens/h100__google_owlv2-large-patch14-ensemble__1016001.json.gz"


def without_stacks(src: str, out: Path) -> tuple[int, int]:
    """Write ``src`` without its stacks to ``out``; (events, python_function events) of ``src``."""
    with gzip.open(src, "rt", encoding="utf-8") as fh:
        doc = json.load(fh)
    events = doc["traceEvents"]
    kept = [e for e in events if e.get("cat") != "python_function"]
    for e in kept:
        if isinstance(e.get("args"), dict):
            e["args"].pop("Call stack", None)
    doc["traceEvents"] = kept
    with gzip.open(out, "wt", encoding="utf-8") as fh:
        json.dump(doc, fh)
    return len(events), len(events) - len(kept)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--src", default=DEFAULT_SRC, help="a trace with python_function events")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--old", default=None, help="folder with another version's traceview package")
    a = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        bare = Path(tmp) / "no_stacks.json.gz"
        n, n_py = without_stacks(a.src, bare)
        runs = {"with stacks": (a.src, None), "without stacks": (bare, None)}
        if a.old:
            runs["with stacks, --old"] = (a.src, a.old)
            runs["without stacks, --old"] = (bare, a.old)
        times = {k: [] for k in runs}
        for _ in range(a.repeats):
            for name, (path, pp) in runs.items():
                times[name].append(load_time(path, pp))
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"{a.src}: {n:,} events, {n_py:,} python_function ({100 * n_py / n:.1f}%); medians of {a.repeats}")
    for name, t in med.items():
        print(f"  {name:24s} {t * 1000:9.1f} ms")
    per_other = med["without stacks"] / (n - n_py)
    per_py = (med["with stacks"] - med["without stacks"]) / n_py if n_py else float("nan")
    print(f"  per other event {per_other * 1e6:.2f} us; per python_function event {per_py * 1e6:.2f} us")
    return 0


if __name__ == "__main__":
    sys.exit(main())
