"""Load-time and peak-memory benchmark: traceview vs HTA vs plain ``json.load``.

For each size, a trace of about that many MB is made by tiling a real trace
(``make_large_trace.py``); every tool then loads the same file in a fresh
subprocess, ``--repeats`` times. Reported: the median wall time of the load call
itself (imports excluded; the tools take turns in every repeat, and the load
average is printed after each round) and the median peak RSS of the process (imports
included; the child's ``ru_maxrss``, or its children's if larger -- HTA forks a
parser; the process's own peak is read from VmHWM, because ``ru_maxrss``
starts from the parent's RSS at fork), each with its ratio to traceview's. Then the cache: a first
``tv.load(path)`` into an empty cache folder vs a reload from the cache, each in a
fresh process.

    python benchmarks/bench_load.py                      # 30 MB, 300 MB, 1 GB
    python benchmarks/bench_load.py --sizes 300 --repeats 5
    python benchmarks/bench_load.py --quick              # tiny, for CI smoke
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT_SRC = "/work/shared/corpus/hta/trace_diff__control__control.json.gz"

_CHILD = r"""
import json, os, resource, sys, time
tool, path, cache = sys.argv[1], sys.argv[2], sys.argv[3]
if tool == "traceview" or tool.startswith("cache"):
    import traceview as tv
    use = False if tool == "traceview" else cache
    run = lambda: tv.load(path, cache=use)  # noqa: E731
elif tool == "hta":
    from hta.trace_analysis import TraceAnalysis
    run = lambda: TraceAnalysis(trace_files={0: path}, trace_dir=os.path.dirname(path))
elif tool == "json.load":
    def run():
        with open(path, "rb") as fh:
            return json.load(fh)
t0 = time.perf_counter()
result = run()
wall = time.perf_counter() - t0
def hwm_kb():  # this process's own peak; ru_maxrss would include the parent's RSS at fork
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
peak = max(hwm_kb(), resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
extra = {}
if tool == "traceview" or tool.startswith("cache"):
    extra = {"events": len(result.events), "kernels": len(result.kernels)}
print("RESULT " + json.dumps({"wall": wall, "peak_kb": peak, **extra}))
"""


def have_hta() -> bool:
    probe = subprocess.run([sys.executable, "-c", "import hta.trace_analysis"], capture_output=True)
    return probe.returncode == 0


def measure(tool: str, path: str, cache: str = "-", timeout: float = 3600) -> dict:
    """One load in a fresh subprocess: {'wall': s, 'peak_kb': ..}, or {'error': ...}."""
    env = dict(os.environ)
    env.pop("TRACEVIEW_CACHE_DIR", None)
    try:
        proc = subprocess.run(
            [sys.executable, "-c", _CHILD, tool, path, cache],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
        )
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
    return {"error": f"exit {proc.returncode}: {tail[0][:200]}"}


def summarize(runs: list[dict]) -> dict:
    ok = [r for r in runs if "error" not in r]
    if not ok:
        return runs[-1]
    return {
        "wall": statistics.median(r["wall"] for r in ok),
        "peak_mb": statistics.median(r["peak_kb"] for r in ok) / 1024,
        "n": len(ok),
    }


def fmt_row(cells, widths) -> str:
    return "| " + " | ".join(str(c).ljust(w) for c, w in zip(cells, widths, strict=True)) + " |"


def table(rows: list[list]) -> str:
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(rows[0]))]
    out = [fmt_row(rows[0], widths), "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    out += [fmt_row(r, widths) for r in rows[1:]]
    return "\n".join(out)


def load_average() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f}, {five:.2f}, {fifteen:.2f} ({os.cpu_count()} cores)"


def interleaved(tools, path: str, repeats: int) -> dict:
    """Each repeat runs every tool once, in turn, so a busy spell hits them all alike."""
    runs: dict = {tool: [] for tool in tools}
    for i in range(repeats):
        for tool in tools:
            runs[tool].append(measure(tool, path))
        print(f"  repeat {i + 1}/{repeats} done; {load_average()}", flush=True)
    return {tool: summarize(r) for tool, r in runs.items()}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--src", default=DEFAULT_SRC, help="real trace to tile (default: corpus HTA control trace)"
    )
    p.add_argument("--sizes", default="30,300,1000", help="comma-separated sizes in MB (default 30,300,1000)")
    p.add_argument(
        "--repeats",
        type=int,
        default=5,
        help="loads per tool and size, interleaved across tools; medians are reported (default 5)",
    )
    p.add_argument("--tools", default="traceview,hta,json.load", help="which loaders to compare")
    p.add_argument("--hta-max-mb", type=float, default=float("inf"), help="skip HTA above this size")
    p.add_argument("--no-cache-bench", action="store_true", help="skip the cache reload benchmark")
    p.add_argument("--quick", action="store_true", help="one tiny size (CI smoke): 1 copy of --src, 1 repeat")
    p.add_argument("--workdir", help="where the large traces go (default: a temporary folder, removed)")
    a = p.parse_args(argv)
    tools = [t for t in a.tools.split(",") if t]
    if "hta" in tools and not have_hta():
        print("HTA not installed")
        tools.remove("hta")
    work = Path(a.workdir) if a.workdir else Path(tempfile.mkdtemp(prefix="tv-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    sizes = [None] if a.quick else [float(s) for s in a.sizes.split(",") if s]
    repeats = 1 if a.quick else a.repeats
    rows = [["size", "tool", "time (s)", "peak RSS (MB)", "time / traceview", "RSS / traceview"]]
    cache_rows = [["size", "first load (s)", "cached reload (s)", "speed-up"]]
    try:
        for size in sizes:
            how = ["--copies", "1"] if size is None else ["--size-mb", f"{size:g}"]
            path = str(work / f"tiled_{'1x' if size is None else f'{size:g}MB'}.json")
            if not os.path.exists(path):  # in a subprocess, so that this process stays small
                subprocess.run(
                    [sys.executable, str(HERE / "make_large_trace.py"), a.src, path, *how],
                    check=True,
                    stdout=subprocess.DEVNULL,
                )
            mb = os.path.getsize(path) / 1e6
            label = f"{mb:.0f} MB"
            print(f"# {label}: {path} (tiles of {os.path.basename(a.src)})", flush=True)
            results = interleaved(
                tools if mb <= a.hta_max_mb else [t for t in tools if t != "hta"], path, repeats
            )
            for tool, r in results.items():
                print(f"  {tool}: {r}", flush=True)
            base = results.get("traceview", {})
            for tool, r in results.items():
                if "error" in r:
                    rows.append([label, tool, r["error"], "", "", ""])
                    continue
                tr = f"{r['wall'] / base['wall']:.1f}x" if "wall" in base else ""
                mr = f"{r['peak_mb'] / base['peak_mb']:.2f}x" if "peak_mb" in base else ""
                rows.append([label, tool, f"{r['wall']:.2f}", f"{r['peak_mb']:.0f}", tr, mr])
            if not a.no_cache_bench and "traceview" in tools:
                first, hit = [], []
                for _ in range(repeats):
                    cdir = tempfile.mkdtemp(prefix="tv-cache-", dir=work)
                    first.append(measure("cache-first", path, cdir))
                    hit.append(measure("cache-hit", path, cdir))
                    shutil.rmtree(cdir, ignore_errors=True)
                f, h = summarize(first), summarize(hit)
                if "wall" in f and "wall" in h:
                    cache_rows.append(
                        [label, f"{f['wall']:.2f}", f"{h['wall']:.3f}", f"{f['wall'] / h['wall']:.0f}x"]
                    )
                    print(f"  cache: first {f['wall']:.2f} s, reload {h['wall']:.3f} s", flush=True)
                else:
                    cache_rows.append([label, f.get("error", ""), h.get("error", ""), ""])
    finally:
        if not a.workdir:
            shutil.rmtree(work, ignore_errors=True)
    print()
    print(f"# {load_average()} at the end; medians of {repeats}, tools interleaved")
    print(table(rows))
    if len(cache_rows) > 1:
        print()
        print(table(cache_rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
