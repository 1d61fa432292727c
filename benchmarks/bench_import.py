"""What ``import traceview`` costs a whole process (issue 23: a user waits for the process).

Runs ``import traceview`` and ``import traceview as tv; tv.load(TRACE, cache=False)`` as fresh
processes, ``--repeats`` times, taking turns with ``--old DIR`` where given (a folder holding
another version's ``traceview`` package, e.g. from ``git archive``), and prints for each the
median wall and CPU time (user + system: less moved by other processes on a shared machine),
the traceview modules the import brought in, and their own import time (``-X importtime``,
children excluded). The load average is printed before and after: compare only quiet runs.

    python benchmarks/bench_import.py
    python benchmarks/bench_import.py --repeats 9 --old /tmp/old_traceview
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_TRACE = ROOT / "sample_traces" / "naive.json.gz"
COUNT = "import sys, traceview; print(sum(m.startswith('traceview') for m in sys.modules))"


def timed(code: str, where: Path) -> tuple[float, float]:
    """Wall and CPU seconds of one fresh process running ``code`` with ``where`` first on its path."""
    before, t0 = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    subprocess.run([sys.executable, "-c", code], cwd=where, check=True)
    wall, after = time.perf_counter() - t0, resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def own_import_s(where: Path) -> float:
    """Seconds spent in traceview's own modules' bodies during ``import traceview``."""
    args = [sys.executable, "-X", "importtime", "-c", "import traceview"]
    err = subprocess.run(args, cwd=where, capture_output=True, text=True, check=True).stderr
    rows = [line.split("|") for line in err.splitlines() if line.startswith("import time:")][1:]
    return sum(int(r[0].split(":")[1]) for r in rows if r[2].strip().startswith("traceview")) / 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace", nargs="?", default=str(DEFAULT_TRACE))
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--old", type=Path, help="a folder holding another version's traceview package")
    args = ap.parse_args()
    sides = {"this": ROOT} | ({"old": args.old.resolve()} if args.old else {})
    codes = {
        "import": "import traceview",
        "import+load": f"import traceview as tv; tv.load({args.trace!r}, cache=False)",
    }
    print("load average before: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))
    times: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for label, code in codes.items():
        for _ in range(args.repeats):
            for side, where in sides.items():  # taking turns: a busy spell hits both
                times.setdefault((label, side), []).append(timed(code, where))
    for (label, side), got in times.items():
        wall, cpu = (statistics.median(x[i] for x in got) for i in (0, 1))
        print(f"{label:12s} {side:5s} wall {wall:.3f} s  cpu {cpu:.3f} s  (median of {len(got)})")
    for side, where in sides.items():
        out = subprocess.run([sys.executable, "-c", COUNT], cwd=where, capture_output=True, text=True)
        own = statistics.median(own_import_s(where) for _ in range(args.repeats))
        print(f"{side:5s} traceview modules imported: {out.stdout.strip()}, their own import {own:.3f} s")
    print("load average after: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))


if __name__ == "__main__":
    main()
