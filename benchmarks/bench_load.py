"""Load benchmark, whole processes: traceview (both decoders) vs HTA vs TraceLens vs ``json.load``.

For each size, a trace of about that many MB is made by tiling a real trace
(``make_large_trace.py``); every tool then loads the same file in a fresh Python
process, ``--repeats`` rounds, the tools taking turns in every round (the load average
is printed after each round). The tools:

* ``traceview``: ``tv.load(path, cache=False)`` with the default decoder (compiled where
  built; the table says which decoder ran), ``TRACEVIEW_DECODER`` removed from its environment;
* ``traceview-python``: the same with ``TRACEVIEW_DECODER=python`` (the msgspec fallback);
* ``hta``: ``TraceAnalysis(trace_files={0: path}, trace_dir=...)``, run by ``--hta-python``
  (default: this interpreter) -- the version that ran is printed;
* ``tracelens``: AMD's ``TreePerfAnalyzer.from_file(path)``, run by ``--tracelens-python``
  (TraceLens is not on PyPI: see benchmarks/README.md); skipped, visibly, without it;
* ``json.load``: the standard library's parser on the same file, the floor of "just parse".

Reported, medians over the rounds: the **process** time -- measured by this parent from
just before the child starts to its exit, so interpreter start, imports, the load and
teardown all count, as they do for a user -- and, as a second column, the time of the
load call alone (measured inside the child); the peak RSS of the process (the child's
``VmHWM``, or its children's ``ru_maxrss`` if larger -- HTA forks a parser; the child's
own ``ru_maxrss`` starts from the parent's RSS at fork, so it is not used), each with its
ratio to ``traceview``'s. Then the cache: a first ``tv.load(path)`` into an empty cache
folder vs a reload from the cache, each in a fresh process, both times again.

    python benchmarks/bench_load.py --tracelens-python /tmp/tlvenv/bin/python   # 30 MB, 300 MB, 1 GB
    python benchmarks/bench_load.py --sizes 300 --repeats 5 --tools traceview,hta
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
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT_SRC = "/work/shared/corpus/hta/trace_diff__control__control.json.gz"
TOOLS = ("traceview", "traceview-python", "hta", "tracelens", "json.load")
DECODER_ENV = "TRACEVIEW_DECODER"  # traceview/read/compiled.py reads it

_CHILD = r"""
import json, os, resource, sys, time
tool, path, cache = sys.argv[1], sys.argv[2], sys.argv[3]
traceview = tool.startswith(("traceview", "cache"))
if traceview:
    import traceview as tv
    use = cache if tool.startswith("cache") else False
    run = lambda: tv.load(path, cache=use)  # noqa: E731
elif tool == "hta":
    from hta.trace_analysis import TraceAnalysis
    run = lambda: TraceAnalysis(trace_files={0: path}, trace_dir=os.path.dirname(path))
elif tool == "tracelens":
    from TraceLens import TreePerfAnalyzer
    run = lambda: TreePerfAnalyzer.from_file(path)
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
def decoder(result):  # which decoder ran: what the load says, else what this install would use
    for where in (getattr(result, "info", None), getattr(result, "stats", None)):
        got = where.get("decoder") if isinstance(where, dict) else getattr(where, "decoder", None)
        if got:
            return str(got)
    try:
        from traceview.read.compiled import describe
    except ImportError:
        return "python (msgspec; no compiled decoder in this version)"
    return describe().removeprefix("decoder: ")
peak = max(hwm_kb(), resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
extra = {}
if traceview:
    extra = {"events": len(result.events), "kernels": len(result.kernels), "decoder": decoder(result)}
print("RESULT " + json.dumps({"wall": wall, "peak_kb": peak, **extra}), flush=True)
"""

# what each external tool needs importable, and the distributions whose version names it
_PROBES = {
    "hta": ("hta.trace_analysis", ("holistictraceanalysis", "traceinsight")),
    "tracelens": ("TraceLens", ("TraceLens",)),
}
_PROBE = r"""
import importlib, importlib.metadata as md, sys
importlib.import_module(sys.argv[1])
for dist in sys.argv[2:]:
    try:
        print(dist, md.version(dist))
        break
    except md.PackageNotFoundError:
        pass
else:
    print(sys.argv[1], "(version unknown)")
"""


def probe(tool: str, python: str) -> tuple[bool, str]:
    """Whether ``python`` can import the tool: (True, "dist version") or (False, why not)."""
    module, dists = _PROBES[tool]
    try:
        got = subprocess.run(
            [python, "-c", _PROBE, module, *dists], capture_output=True, text=True, timeout=300
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, f"{python}: {exc}"
    if got.returncode != 0:
        last = (got.stderr.strip().splitlines() or ["no output"])[-1]
        return False, f"{python} cannot import {module}: {last[:200]}"
    return True, got.stdout.strip()


def child_env(tool: str) -> dict:
    """The child's environment: no cache folder of the caller's, and the decoder the tool names."""
    env = dict(os.environ)
    env.pop("TRACEVIEW_CACHE_DIR", None)
    env.pop(DECODER_ENV, None)
    if tool == "traceview-python":
        env[DECODER_ENV] = "python"
    return env


def measure(tool: str, path: str, python: str, cache: str = "-", timeout: float = 3600) -> dict:
    """One load in a fresh process: {'process': s, 'wall': s, 'peak_kb': ..}, or {'error': ...}.

    'process' is timed here, from before the child starts to its exit (imports and teardown
    included); 'wall' is the load call alone, timed by the child."""
    argv = [python, "-c", _CHILD, tool, path, cache]
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=child_env(tool))
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    process = time.perf_counter() - t0
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT ") and proc.returncode == 0:
            return {"process": process, **json.loads(line[7:])}
    tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
    return {"error": f"exit {proc.returncode}: {tail[0][:200]}"}


def summarize(runs: list[dict]) -> dict:
    """Medians of the successful runs (with how many there were), else the last error."""
    ok = [r for r in runs if "error" not in r]
    if not ok:
        return runs[-1]
    out = {
        "process": statistics.median(r["process"] for r in ok),
        "wall": statistics.median(r["wall"] for r in ok),
        "peak_mb": statistics.median(r["peak_kb"] for r in ok) / 1024,
        "n": len(ok),
    }
    for key in ("events", "kernels", "decoder"):
        seen = sorted({str(r[key]) for r in ok if key in r})
        if seen:
            out[key] = seen[0] if len(seen) == 1 else " / ".join(seen)
    return out


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


def brief(r: dict) -> str:
    if "error" in r:
        return r["error"]
    return f"{r['process']:.2f} s (load {r['wall']:.2f} s, {r['peak_kb'] / 1024:.0f} MiB)"


def interleaved(pythons: dict, path: str, repeats: int, timeout: float) -> dict:
    """Each round runs every tool once, in turn, so a busy spell hits them all alike."""
    runs: dict = {tool: [] for tool in pythons}
    for i in range(repeats):
        for tool, python in pythons.items():
            runs[tool].append(measure(tool, path, python, timeout=timeout))
            print(f"  round {i + 1}/{repeats}: {tool} {brief(runs[tool][-1])}", flush=True)
        print(f"  round {i + 1}/{repeats} done; {load_average()}", flush=True)
    return {tool: summarize(r) for tool, r in runs.items()}


def ratio(r: dict, base: dict, key: str, digits: int) -> str:
    return f"{r[key] / base[key]:.{digits}f}x" if key in base and base[key] > 0 else ""


LOAD_HEAD = [
    "size", "tool", "process (s)", "load call (s)", "peak RSS (MiB)",
    "process / traceview", "load call / traceview", "RSS / traceview",
]  # fmt: skip


def load_rows(label: str, results: dict) -> list[list]:
    base = results.get("traceview", {})
    rows = []
    for tool, r in results.items():
        if "error" in r:
            rows.append([label, tool, r["error"], "", "", "", "", ""])
            continue
        times = [f"{r['process']:.2f}", f"{r['wall']:.2f}", f"{r['peak_mb']:.0f}"]
        ratios = [ratio(r, base, "process", 1), ratio(r, base, "wall", 1), ratio(r, base, "peak_mb", 2)]
        rows.append([label, tool, *times, *ratios])
    return rows


def decoder_check(label: str, results: dict) -> list[str]:
    """Which decoder each traceview run used, and a MISMATCH line where the two decoders'
    loads differ in events or kernels (a speed-up of a different result would mean nothing)."""
    lines, counts = [], {}
    for tool in ("traceview", "traceview-python"):
        r = results.get(tool, {})
        if "decoder" in r:
            lines.append(
                f"{label} {tool}: decoder {r['decoder']}; {r['events']} events, {r['kernels']} kernels"
            )
            counts[tool] = (r["events"], r["kernels"])
    if len(set(counts.values())) > 1:
        lines.append(f"MISMATCH at {label}: the two decoders loaded different events/kernels: {counts}")
    return lines


CACHE_HEAD = [
    "size", "first load (s)", "cached reload (s)", "speed-up",
    "first load, process (s)", "cached reload, process (s)", "speed-up, process",
]  # fmt: skip


def cache_row(label: str, path: str, work: Path, repeats: int, timeout: float) -> list:
    """A first tv.load(path) into an empty cache folder, then the reload, each in a fresh process."""
    first, hit = [], []
    for _ in range(repeats):
        cdir = tempfile.mkdtemp(prefix="tv-cache-", dir=work)
        first.append(measure("cache-first", path, sys.executable, cdir, timeout))
        hit.append(measure("cache-hit", path, sys.executable, cdir, timeout))
        shutil.rmtree(cdir, ignore_errors=True)
    f, h = summarize(first), summarize(hit)
    if "wall" not in f or "wall" not in h:
        return [label, f.get("error", ""), h.get("error", ""), "", "", "", ""]
    print(
        f"  cache: first {f['process']:.2f} s (load {f['wall']:.2f} s), "
        f"reload {h['process']:.3f} s (load {h['wall']:.3f} s)",
        flush=True,
    )
    calls = [f"{f['wall']:.2f}", f"{h['wall']:.3f}", f"{f['wall'] / h['wall']:.0f}x"]
    procs = [f"{f['process']:.2f}", f"{h['process']:.3f}", f"{f['process'] / h['process']:.1f}x"]
    return [label, *calls, *procs]


def choose_tools(a) -> tuple[dict, list[str]]:
    """{tool: the python that runs it} for the tools asked for and runnable here, and the
    lines that say which versions run and which tools are skipped, and why."""
    asked = [t for t in a.tools.split(",") if t]
    unknown = [t for t in asked if t not in TOOLS]
    if unknown:
        raise SystemExit(f"bench_load.py: unknown tool(s) {', '.join(unknown)}; known: {', '.join(TOOLS)}")
    pythons, notes = {}, []
    for tool in asked:
        python = {"hta": a.hta_python, "tracelens": a.tracelens_python}.get(tool, sys.executable)
        if tool == "tracelens" and not python:
            notes.append("tracelens: SKIPPED (no --tracelens-python given; see benchmarks/README.md)")
            continue
        if tool in _PROBES:
            ok, said = probe(tool, python)
            notes.append(f"{tool}: {said} ({python})" if ok else f"{tool}: SKIPPED ({said})")
            if not ok:
                continue
        pythons[tool] = python
    return pythons, notes


def make_trace(src: str, work: Path, size) -> str:
    how = ["--copies", "1"] if size is None else ["--size-mb", f"{size:g}"]
    path = str(work / f"tiled_{'1x' if size is None else f'{size:g}MB'}.json")
    if not os.path.exists(path):  # in a subprocess, so that this process stays small
        cmd = [sys.executable, str(HERE / "make_large_trace.py"), src, path, *how]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return path


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--src", default=DEFAULT_SRC, help="real trace to tile (default: corpus HTA control trace)"
    )
    p.add_argument("--sizes", default="30,300,1000", help="comma-separated sizes in MB (default 30,300,1000)")
    p.add_argument(
        "--repeats",
        type=int,
        default=5,
        help="rounds: loads per tool and size, the tools taking turns; medians are reported (default 5)",
    )
    p.add_argument(
        "--tools", default=",".join(TOOLS), help=f"which loaders to compare (default {','.join(TOOLS)})"
    )
    p.add_argument(
        "--hta-python", default=sys.executable, help="the python that runs HTA (default: this one)"
    )
    p.add_argument(
        "--tracelens-python", help="the python that runs TraceLens (its own venv); without it, skipped"
    )
    p.add_argument("--hta-max-mb", type=float, default=float("inf"), help="skip HTA above this size")
    p.add_argument(
        "--tracelens-max-mb", type=float, default=float("inf"), help="skip TraceLens above this size"
    )
    p.add_argument(
        "--timeout", type=float, default=3600, help="seconds one load process may take (default 3600)"
    )
    p.add_argument("--no-cache-bench", action="store_true", help="skip the cache reload benchmark")
    p.add_argument("--quick", action="store_true", help="one tiny size (CI smoke): 1 copy of --src, 1 repeat")
    p.add_argument("--workdir", help="where the large traces go (default: a temporary folder, removed)")
    return p.parse_args(argv)


def bench_size(a, size, work: Path, pythons: dict, repeats: int) -> tuple[list, list, list]:
    """One size: (rows of the load table, the decoder lines, the cache row or None)."""
    path = make_trace(a.src, work, size)
    mb = os.path.getsize(path) / 1e6
    label = f"{mb:.0f} MB"
    print(f"# {label}: {path} (tiles of {os.path.basename(a.src)})", flush=True)
    limits = {"hta": a.hta_max_mb, "tracelens": a.tracelens_max_mb}
    here = {t: py for t, py in pythons.items() if mb <= limits.get(t, float("inf"))}
    for tool in pythons.keys() - here.keys():
        print(f"  {tool}: skipped above {limits[tool]:g} MB", flush=True)
    results = interleaved(here, path, repeats, a.timeout)
    cache = None
    if not a.no_cache_bench and "traceview" in pythons:
        cache = cache_row(label, path, work, repeats, a.timeout)
    return load_rows(label, results), decoder_check(label, results), cache


def main(argv=None) -> int:
    a = parse_args(argv)
    pythons, notes = choose_tools(a)
    for line in notes:
        print(f"# {line}", flush=True)
    work = Path(a.workdir) if a.workdir else Path(tempfile.mkdtemp(prefix="tv-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    sizes = [None] if a.quick else [float(s) for s in a.sizes.split(",") if s]
    repeats = 1 if a.quick else a.repeats
    rows, checks, cache_rows = [LOAD_HEAD], [], [CACHE_HEAD]
    try:
        for size in sizes:
            got, lines, cache = bench_size(a, size, work, pythons, repeats)
            rows += got
            checks += lines
            cache_rows += [cache] if cache else []
    finally:
        if not a.workdir:
            shutil.rmtree(work, ignore_errors=True)
    print()
    print(f"# {load_average()} at the end; medians of {repeats} rounds, tools interleaved")
    print(
        "# process: the whole process, timed by the parent (start, imports, load, exit); load call: inside it"
    )
    for line in notes + checks:
        print(f"# {line}")
    print(table(rows))
    if len(cache_rows) > 1:
        print()
        print(table(cache_rows))
    return 1 if any(line.startswith("MISMATCH") for line in checks) else 0


if __name__ == "__main__":
    sys.exit(main())
