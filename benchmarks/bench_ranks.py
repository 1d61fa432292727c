"""A whole run: traceview (serial, and on a local Dask cluster) vs HTA, on 8 tiled param ranks.

The 8 rank traces of ``corpus/param`` are tiled (``make_large_trace.py``) to about
``--size-mb`` MB of JSON each, every rank by the same number of copies, keeping its
``distributedInfo``. Each tool then loads the run and computes the time breakdown,
comm/comp overlap and stragglers, in its own fresh process:

- ``tv``: ``tv.ranks(DIR, cache=False)`` (serial);
- ``tv-dask``: ``tv.ranks(DIR, workers=N, cache=False)`` (a local cluster of N worker processes);
- ``hta``: ``TraceAnalysis(trace_files={rank: path})``, ``get_temporal_breakdown``,
  ``get_comm_comp_overlap``, ``get_potential_stragglers``. (Not ``trace_dir``: the tiles are
  compact JSON, ``"rank":3``, and HTA's rank regex wants a space after the colon, so every file
  would be rank 0 and HTA would keep one of them.)

Tools run interleaved (tv, tv-dask, hta, tv, ...), ``--repeats`` times; reported are
medians: the wall time of the whole process (imports included) and of the work alone,
and peak RSS sampled every 50 ms for every process of the tool's tree (its main
process, and its largest worker). The load average is printed with every run.

    python benchmarks/bench_ranks.py                       # 8 x 100 MB, 5 repeats
    python benchmarks/bench_ranks.py --size-mb 25 --repeats 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
PARAM = Path(os.environ.get("TRACEVIEW_CORPUS", HERE.parents[1] / "shared" / "corpus")) / "param"
TOOLS = ("tv", "tv-dask", "hta")


def make_run(out: Path, size_mb: float) -> list[Path]:
    sys.path.insert(0, str(HERE))
    from make_large_trace import copies_for, make

    ranks = sorted(PARAM.glob("dlrm_kineto__worker*"))
    copies = copies_for(str(ranks[0]), size_mb)
    made = []
    for src in ranks:
        dst = out / (src.name.split("__")[1].split("_step")[0] + ".json")
        if not dst.exists():
            make(str(src), str(dst), copies)
        made.append(dst)
    return made


def child(tool: str, folder: str, workers: int) -> None:
    """Runs in the measured process: the work, timed without imports; prints JSON."""
    if tool == "hta":
        import logging
        import warnings

        warnings.simplefilter("ignore")
        logging.getLogger("hta").setLevel(logging.ERROR)
        from hta.trace_analysis import TraceAnalysis

        files = sorted(Path(folder).glob("worker*.json"))
        t0 = time.perf_counter()
        ta = TraceAnalysis(trace_files={int(f.stem[len("worker") :]): str(f) for f in files})
        tb = ta.get_temporal_breakdown(visualize=False)
        ta.get_comm_comp_overlap(visualize=False)
        stragglers = ta.get_potential_stragglers(visualize=False)
        idle0 = int(tb.set_index("rank").loc[0, "idle_time(us)"])
    else:
        import traceview as tv

        t0 = time.perf_counter()
        kw = {"workers": workers} if tool == "tv-dask" else {}
        rep = tv.ranks(folder, cache=False, **kw)
        stragglers = rep["stragglers"]["straggler"].unique().tolist()
        idle0 = int(rep["ranks"].set_index("rank").loc[0, "idle_ns"] // 1000)
    print(
        json.dumps(
            {
                "work_s": time.perf_counter() - t0,
                "idle_rank0_us": idle0,
                "stragglers": [int(s) for s in stragglers],
            }
        )
    )


def measure(tool: str, folder: Path, workers: int) -> dict:
    """Run one tool in a fresh process; sample the RSS of its process tree."""
    import psutil

    load = os.getloadavg()[0]
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, __file__, "--child", tool, str(folder), "--workers", str(workers)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    peaks: dict = {}
    root = psutil.Process(proc.pid)
    while proc.poll() is None:
        try:
            for p in [root, *root.children(recursive=True)]:
                peaks[p.pid] = max(peaks.get(p.pid, 0), p.memory_info().rss)
        except psutil.Error:
            pass
        time.sleep(0.05)
    wall = time.perf_counter() - t0
    out = json.loads(proc.stdout.read().strip().splitlines()[-1])
    main_peak = peaks.pop(proc.pid, 0)
    return {
        "wall_s": wall,
        "work_s": out["work_s"],
        "main_mb": main_peak / 2**20,
        "worker_mb": max(peaks.values(), default=0) / 2**20,
        "load": load,
        "result": out,
    }


def table(runs: dict, run_mb: float) -> str:
    med = {
        t: {k: statistics.median(r[k] for r in rs) for k in ("wall_s", "work_s", "main_mb", "worker_mb")}
        for t, rs in runs.items()
    }
    loads = [r["load"] for rs in runs.values() for r in rs]
    lines = [
        f"run: 8 ranks, {run_mb:.0f} MB of JSON; load average 1 min at each start: "
        f"median {statistics.median(loads):.2f} (min {min(loads):.2f}, max {max(loads):.2f}); "
        f"{len(next(iter(runs.values())))} repeats, medians",
        "",
        "| tool | wall (process) | work | HTA / tool (work) | peak RSS main | peak RSS largest child |",
        "|---|---|---|---|---|---|",
    ]
    for t, m in med.items():
        ratio = med["hta"]["work_s"] / m["work_s"] if "hta" in med else float("nan")
        lines.append(
            f"| {t} | {m['wall_s']:.2f} s | {m['work_s']:.2f} s | {ratio:.1f}x | {m['main_mb']:.0f} MiB | "
            f"{m['worker_mb']:.0f} MiB |"
        )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size-mb", type=float, default=100)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--dir", default=None, help="where the tiled run is written (default: a temp folder)")
    ap.add_argument("--tools", default=",".join(TOOLS))
    ap.add_argument("--child", nargs=2, metavar=("TOOL", "DIR"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        return child(a.child[0], a.child[1], a.workers)
    folder = Path(a.dir or tempfile.mkdtemp(prefix="tv-bench-run-"))
    folder.mkdir(parents=True, exist_ok=True)
    files = make_run(folder, a.size_mb)
    run_mb = sum(f.stat().st_size for f in files) / 1e6
    runs: dict = {t: [] for t in a.tools.split(",")}
    for rep in range(a.repeats):
        for tool in runs:
            r = measure(tool, folder, a.workers)
            runs[tool].append(r)
            print(
                f"[{rep + 1}/{a.repeats}] {tool}: wall {r['wall_s']:.2f} s, work {r['work_s']:.2f} s, "
                f"main {r['main_mb']:.0f} MiB, largest child {r['worker_mb']:.0f} MiB, load {r['load']:.2f}, "
                f"rank 0 idle {r['result']['idle_rank0_us']} us, stragglers {r['result']['stragglers']}",
                flush=True,
            )
    print()
    print(table(runs, run_mb))


if __name__ == "__main__":
    main()
