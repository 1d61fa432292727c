"""The main jobs as a user runs them: diff, summary, compare and ranks, cold and warm, vs HTA.

Every job is a whole process (interpreter start, imports, reading, analyses, output and exit
all count), the jobs taking turns in every round; reported are medians, with the load average
at each start. The traceview package is byte-compiled first, as an install leaves it. The inputs
are tiled from the corpus (``make_large_trace.py``):

- A: ``hta/trace_diff__control__control`` tiled to about ``--size-mb`` MB, B: ``…test__test``
  by the same number of copies, C: ``…test__test`` by half of them (compare's third trace);
- a run: the 8 ``param/dlrm_kineto`` ranks, each tiled to about ``--rank-mb`` MB.

The jobs (``--jobs``, comma-separated; all by default):

- ``load A`` and ``load A+B``: ``tv.load(..., cache=False)`` in one process: the floor the
  analyses are set against (diff cold ≤ 1.3x load A+B, summary cold ≤ 1.2x load A), with
  numpy's huge-page madvise off as the ``traceview`` command runs (``NUMPY_MADVISE_HUGEPAGE=0``);
- ``diff`` / ``summary`` / ``compare`` / ``ranks``: ``traceview diff A B``, ``traceview summary
  A``, ``traceview compare A B C``, ``traceview ranks RUN`` (output to /dev/null), ``cold`` with
  ``--no-cache``, ``warm`` with every trace already in a cache folder of the benchmark's own
  (``TRACEVIEW_CACHE_DIR``, filled before the first round, never ``~/.cache``) and no replay
  record (``<cache>/replay`` is emptied before each warm run): the analyses on cached traces
  (a warm ``summary`` shows what the untimed run before the first round kept in the entry of
  what it showed, ``traceview.kept``); ``summary analyses``: a warm summary with a setting of
  its own each round (``TRACEVIEW_BENCH_ROUND``), so that nothing it showed before is shown
  again and its analyses run, as for a trace that another command cached;
  ``repeat``: the same command line again, answered from the record of its output
  (``traceview.replay``; one untimed run before each makes sure the record is there);
- HTA 0.5.0 where it has the job, run by ``--hta-python``: ``hta diff`` = two ``Trace`` parses
  and ``TraceDiff.compare_traces``; ``hta summary`` = ``TraceAnalysis`` with
  ``get_gpu_kernel_breakdown`` and ``get_temporal_breakdown``; ``hta ranks`` = ``TraceAnalysis``
  of the 8 ranks, ``get_temporal_breakdown``, ``get_comm_comp_overlap`` and
  ``get_potential_stragglers`` (as bench_ranks.py). HTA has no compare of N traces.

    python benchmarks/bench_jobs.py                                   # 300 MB, 8 x 90 MB, 3 rounds
    python benchmarks/bench_jobs.py --hta-python /tmp/htavenv/bin/python
    python benchmarks/bench_jobs.py --size-mb 5 --rank-mb 2 --rounds 1   # a smoke run
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
CORPUS = Path(os.environ.get("TRACEVIEW_CORPUS", HERE.parents[1] / "shared" / "corpus"))
CONTROL = CORPUS / "hta" / "trace_diff__control__control.json.gz"
TEST = CORPUS / "hta" / "trace_diff__test__test.json.gz"
JOBS = (
    "load A",
    "load A+B",
    "diff cold",
    "diff warm",
    "diff repeat",
    "summary cold",
    "summary warm",
    "summary analyses",
    "summary repeat",
    "compare cold",
    "compare warm",
    "compare repeat",
    "ranks cold",
    "ranks warm",
    "ranks repeat",
    "hta diff",
    "hta summary",
    "hta ranks",
)

HTA_PRELUDE = """
import logging, sys, warnings
warnings.simplefilter("ignore")
logging.disable(logging.WARNING)
"""
HTA_DIFF = (
    HTA_PRELUDE
    + """
from hta.common.trace import Trace
from hta.trace_diff import LabeledTrace, TraceDiff
def labeled(label, path, folder):
    t = Trace(trace_files={0: path}, trace_dir=folder)
    t.parse_traces()
    return LabeledTrace(label, t=t)
a, b, folder = sys.argv[1:4]
TraceDiff.compare_traces(labeled("A", a, folder), labeled("B", b, folder))
"""
)
HTA_SUMMARY = (
    HTA_PRELUDE
    + """
from hta.trace_analysis import TraceAnalysis
ta = TraceAnalysis(trace_files={0: sys.argv[1]}, trace_dir=sys.argv[2])
ta.get_gpu_kernel_breakdown(visualize=False)
ta.get_temporal_breakdown(visualize=False)
"""
)
HTA_RANKS = (
    HTA_PRELUDE
    + """
from pathlib import Path
from hta.trace_analysis import TraceAnalysis
files = sorted(Path(sys.argv[1]).glob("worker*.json"))
# trace_files, not trace_dir: HTA's rank regex wants '"rank": N' and the tiles are compact JSON
ta = TraceAnalysis(trace_files={int(f.stem[len("worker"):]): str(f) for f in files}, trace_dir=sys.argv[1])
ta.get_temporal_breakdown(visualize=False)
ta.get_comm_comp_overlap(visualize=False)
ta.get_potential_stragglers(visualize=False)
"""
)


def inputs(work: Path, size_mb: float, rank_mb: float, need_run: bool) -> dict:
    """The tiled traces (made once, kept in ``work`` for later rounds and later runs)."""
    sys.path.insert(0, str(HERE))
    from bench_ranks import make_run
    from make_large_trace import copies_for, make

    copies = copies_for(str(CONTROL), size_mb)
    files = {
        "A": (CONTROL, work / f"A_control_x{copies}.json", copies),
        "B": (TEST, work / f"B_test_x{copies}.json", copies),
        "C": (TEST, work / f"C_test_x{max(1, copies // 2)}.json", max(1, copies // 2)),
    }
    out: dict = {}
    for key, (src, dst, n) in files.items():
        if not dst.exists():
            make(str(src), str(dst), n)
        out[key] = str(dst)
    if need_run:
        run = work / f"run_{rank_mb:g}mb"
        run.mkdir(parents=True, exist_ok=True)
        out["run"] = str(run)
        out["run_mb"] = sum(f.stat().st_size for f in make_run(run, rank_mb)) / 1e6
    return out


def commands(f: dict, hta_python: str, hta_dir: str) -> dict[str, list[str]]:
    py, tv = sys.executable, [sys.executable, "-m", "traceview"]
    # the floor under the traceview command's own setting (it turns numpy's huge-page madvise
    # off, ``_entry``): loads of a script that keeps numpy's default take ~0.3-0.5 s longer here
    load = (
        "import os, sys\nos.environ.setdefault('NUMPY_MADVISE_HUGEPAGE', '0')\n"
        "import traceview as tv\nfor p in sys.argv[1:]: tv.load(p, cache=False)"
    )
    cmds = {
        "load A": [py, "-c", load, f["A"]],
        "load A+B": [py, "-c", load, f["A"], f["B"]],
        "diff": [*tv, "diff", f["A"], f["B"]],
        "summary": [*tv, "summary", f["A"]],
        "compare": [*tv, "compare", f["A"], f["B"], f["C"]],
        "hta diff": [hta_python, "-c", HTA_DIFF, f["A"], f["B"], hta_dir],
        "hta summary": [hta_python, "-c", HTA_SUMMARY, f["A"], hta_dir],
    }
    if "run" in f:
        cmds["ranks"] = [*tv, "ranks", f["run"]]
        cmds["hta ranks"] = [hta_python, "-c", HTA_RANKS, f["run"]]
    out = {}
    for job in JOBS:
        base, _, how = job.rpartition(" ")
        if how in ("cold", "warm", "analyses", "repeat") and base in cmds:
            out[job] = cmds[base] + (["--no-cache"] if how == "cold" else [])
        elif job in cmds:
            out[job] = cmds[job]
    return out


def hta_version(python: str) -> str:
    """Which HTA distribution and version ``python`` runs (0.5.0 is ``holistictraceanalysis``)."""
    code = (
        "import importlib.metadata as m\n"
        "for d in ('holistictraceanalysis', 'traceinsight'):\n"
        "    try: print(d, m.version(d)); break\n"
        "    except m.PackageNotFoundError: pass\n"
        "else: print('no HTA')"
    )
    out = subprocess.run([python, "-c", code], capture_output=True, text=True, check=False)
    return f"HTA by {python}: {out.stdout.strip() or out.stderr.strip()[-200:]}"


def compile_package() -> str:
    """Byte-compile the traceview that the jobs import, as an install does: where the environment
    says not to write bytecode (``PYTHONDONTWRITEBYTECODE``, set on this project's machines), a
    module changed since its last ``.pyc`` would be compiled again by every timed process (0.05-0.15
    s of each warm job after a day's edits)."""
    code = (
        "import compileall, os, traceview\n"
        "print(compileall.compile_dir(os.path.dirname(traceview.__file__), quiet=1))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    if out.stdout.strip() == "True":
        return "traceview byte-compiled"
    return f"byte-compiling failed: {out.stderr[-200:]}"


def measure(cmd: list[str], env: dict, timeout: float) -> dict:
    """One whole process: wall time from its start until the wait for it returns, and the peak RSS
    of its process tree, sampled every 50 ms on a thread of its own (so that the end of the process
    is seen when it comes, not at the next sample: a poll-and-sleep loop added 0-50 ms to every
    job). Not the kernel's ``ru_maxrss`` of the child: on Linux it counts the copy of this process
    the fork made before the exec."""
    import psutil

    load = os.getloadavg()[0]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, text=True)
    root, peak, done = psutil.Process(proc.pid), [0], threading.Event()

    def sample() -> None:
        while not done.is_set():
            with contextlib.suppress(psutil.Error):  # a process of the tree may end while it is read
                tree = [root, *root.children(recursive=True)]
                peak[0] = max(peak[0], sum(p.memory_info().rss for p in tree))
            if time.perf_counter() - t0 > timeout:
                proc.kill()
            done.wait(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    proc.wait()
    wall = time.perf_counter() - t0
    done.set()
    sampler.join()
    err = proc.stderr.read() if proc.stderr else ""
    ok = proc.returncode == 0
    return {
        "wall_s": wall,
        "peak_mb": peak[0] / 2**20,
        "load": load,
        "ok": ok,
        "error": "" if ok else err[-300:],
    }


def table(runs: dict, f: dict) -> str:
    med = {
        j: {k: statistics.median(r[k] for r in rs if r["ok"]) for k in ("wall_s", "peak_mb")}
        for j, rs in runs.items()
        if any(r["ok"] for r in rs)
    }
    loads = [r["load"] for rs in runs.values() for r in rs]
    mb = {k: os.path.getsize(f[k]) / 1e6 for k in ("A", "B", "C")}
    lines = [
        f"A {mb['A']:.0f} MB, B {mb['B']:.0f} MB, C {mb['C']:.0f} MB"
        + (f", run 8 ranks {f['run_mb']:.0f} MB" if "run_mb" in f else "")
        + f"; load average (1 min) at each start: median {statistics.median(loads):.2f} "
        f"(min {min(loads):.2f}, max {max(loads):.2f}); "
        f"medians of {max(len(rs) for rs in runs.values())} rounds",
        "",
        "| job | wall (process) | peak RSS | vs load | HTA / traceview |",
        "|---|---|---|---|---|",
    ]
    floor = {"diff": "load A+B", "summary": "load A", "compare": None, "ranks": None}
    for job, m in med.items():
        base, _, how = job.rpartition(" ")
        ref = floor.get(base) if how in ("cold", "warm", "analyses", "repeat") else None
        vs = f"{m['wall_s'] / med[ref]['wall_s']:.2f}x {ref}" if ref in med else "-"
        hta = f"hta {base}"
        ratio = f"{med[hta]['wall_s'] / m['wall_s']:.1f}x" if hta in med and hta != job else "-"
        lines.append(f"| {job} | {m['wall_s']:.2f} s | {m['peak_mb']:.0f} MiB | {vs} | {ratio} |")
    failed = [f"{j}: {r['error'].strip()}" for j, rs in runs.items() for r in rs if not r["ok"]]
    return "\n".join(lines + ([""] + ["FAILED " + x for x in failed] if failed else []))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size-mb", type=float, default=300, help="A's size (B: as many copies)")
    ap.add_argument("--rank-mb", type=float, default=90, help="each rank trace of the run")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--jobs", default=",".join(JOBS), help="comma-separated, from: " + ", ".join(JOBS))
    ap.add_argument("--workdir", default="/tmp/tv-bench-jobs", help="tiles and cache (kept between runs)")
    ap.add_argument("--hta-python", default=sys.executable, help="the python that runs HTA")
    ap.add_argument("--no-hta", action="store_true", help="leave out the HTA jobs")
    ap.add_argument("--timeout", type=float, default=1800, help="seconds one process may run")
    a = ap.parse_args()
    jobs = [j.strip() for j in a.jobs.split(",") if j.strip() and not (a.no_hta and j.startswith("hta"))]
    unknown = sorted(set(jobs) - set(JOBS))
    if unknown:
        ap.error(f"unknown job(s): {', '.join(unknown)}")
    work = Path(a.workdir)
    work.mkdir(parents=True, exist_ok=True)
    f = inputs(work, a.size_mb, a.rank_mb, any(j.endswith("ranks") or "ranks " in j for j in jobs))
    hta_dir = work / "hta"
    hta_dir.mkdir(exist_ok=True)
    cmds = {j: c for j, c in commands(f, a.hta_python, str(hta_dir)).items() if j in jobs}
    cache = work / "cache"
    shutil.rmtree(cache, ignore_errors=True)
    env = {**os.environ, "TRACEVIEW_CACHE_DIR": str(cache), "TRACEVIEW_CACHE_MIN_MB": "0"}
    env.pop("TRACEVIEW_DECODER", None)
    for job, cmd in cmds.items():  # the warm jobs' traces into the cache, untimed
        if job.endswith(" warm"):
            subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, check=False)
    compiled = compile_package()
    print(
        f"python {sys.version.split()[0]}; traceview from {sys.executable}; {hta_version(a.hta_python)}; "
        f"{compiled}",
        flush=True,
    )
    runs: dict = {j: [] for j in cmds}
    for rnd in range(a.rounds):
        for job, cmd in cmds.items():
            if job.endswith((" warm", " analyses")):  # on cached traces, not a replay of their output
                shutil.rmtree(cache / "replay", ignore_errors=True)
            # nor what a summary showed of them: a setting of its own each round (a TRACEVIEW_*
            # variable is part of the name a shown output is kept under), so its analyses run
            mine = {**env, "TRACEVIEW_BENCH_ROUND": str(rnd)} if job.endswith(" analyses") else env
            if job.endswith(" repeat"):  # the command ran before: its record is there
                quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
                subprocess.run(cmd, **quiet, env=env, check=False)
            r = measure(cmd, mine, a.timeout)
            runs[job].append(r)
            state = "ok" if r["ok"] else "FAILED"
            print(
                f"[{rnd + 1}/{a.rounds}] {job}: {r['wall_s']:.2f} s, peak {r['peak_mb']:.0f} MiB, "
                f"load {r['load']:.2f}, {state}",
                flush=True,
            )
    print()
    print(table(runs, f))


if __name__ == "__main__":
    main()
