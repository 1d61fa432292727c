"""The front door: every command, as a Python function; the CLI calls these and renders.

``tv.summary``, ``tv.kernels``, ``tv.diff``, ``tv.compare``, ``tv.timeline``, ``tv.ranks``,
``tv.hta`` return a :class:`~traceview.report.Report`: ``report["by_category"]`` is a
DataFrame, ``print(report)`` shows what the CLI shows, and a notebook renders it as HTML.
``tv.annotate`` writes an annotated trace, ``tv.report`` the HTML report.

Every function that reads traces takes the same keywords, visible in its signature:

- the selection: ``step``, ``annotation``, ``device``, ``stream``, ``kind`` (or a ready
  ``sel=Selection(...)``; not both);
- the load options: ``rules``, ``devices``, ``salvage``, ``max_bytes``, ``max_ratio``, ``cache``
  (see :func:`traceview.load`; or a ready ``options=LoadOptions(...)``; not both).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from .analyses.select.region import KINDS, Selection
from .discover import load_all
from .filenames import as_text
from .model import Trace
from .options import LoadOptions
from .read import DEFAULT_MAX_BYTES, DEFAULT_MAX_RATIO
from .report import Report

if TYPE_CHECKING:  # the names the signatures below use (help() shows them as written)
    from .classify import RuleSet
    from .run import Run

    PathLike = str | os.PathLike[str]
    TraceLike = PathLike | Trace  # a trace file (or, where a folder is allowed, a folder) or a loaded Trace
    Traces = TraceLike | Sequence[TraceLike]  # one or several, folders expanded
    RuleFile = PathLike | RuleSet | None
    CacheSetting = bool | PathLike | None  # on, off, or the cache folder (None: the default)
    Baseline = int | str | PathLike | None  # index, label or path; None: the first

__all__ = ["KINDS", "LoadOptions", "Report", "Selection"]  # re-exported: the CLI imports no analyses

_SELECT = ("step", "annotation", "device", "stream", "kind")
_LOAD = ("rules", "devices", "salvage", "max_bytes", "max_ratio", "cache")


def _parts(given: dict) -> tuple[Selection | None, LoadOptions]:
    """The selection and the load options of a function's keywords (its ``locals()``): ``sel=``
    or the selection keywords, ``options=`` or the load keywords; both of a pair is an error."""
    parts = {k: given[k] for k in _SELECT if given.get(k) is not None}
    sel = given.get("sel")
    if sel is not None and parts:
        raise TypeError(f"give sel= or {'=, '.join(parts)}=, not both")
    loads = LoadOptions(**{k: given[k] for k in _LOAD if k in given})
    opts = given.get("options")
    if opts is not None and loads != LoadOptions():
        raise TypeError("give options= or the load keywords (rules=, devices=, ...), not both")
    return (sel if sel is not None else Selection(**parts) if parts else None), (opts or loads).checked()


def _trace(t: TraceLike, opts: LoadOptions) -> Trace:
    if isinstance(t, Trace):
        return same_options(t, opts)
    return opts.load(os.fspath(t))


#: the load options that change what a loaded Trace holds; the others (limits, cache) only how it is read
_HELD = ("rules", "devices", "salvage")


def same_options(t: Trace, opts: LoadOptions) -> Trace:
    """``t`` when the call's load options that change a trace (rules, devices, salvage) are the
    defaults or those ``t`` was loaded with; else a one-line TypeError: a loaded Trace is not
    loaded again, so another option would be silently dropped (issue 37)."""
    default = LoadOptions()
    for name in _HELD:
        given, had = getattr(opts, name), t.loaded_with.get(name, getattr(default, name))
        if given != getattr(default, name) and given != had:
            raise TypeError(
                f"{t.label} was loaded with {name}={had!r}, not {name}={given!r}: "
                f"pass its path, or tv.load(path, {name}=...)"
            )
    return t


def load_traces(
    items: Traces, options: LoadOptions, *, recursive: bool = False
) -> tuple[list[Trace], list[str]]:
    """Traces (paths, folders of traces, or Traces) in the order given, a folder expanded in place;
    and the folder files passed over as not profiler traces."""
    items = [items] if isinstance(items, (str, os.PathLike, Trace)) else list(items)
    loaded, skipped = [], []
    for t in items:
        if isinstance(t, Trace):
            loaded.append(same_options(t, options))
            continue
        more, passed_over = load_all([t], options.load, recursive=recursive)
        loaded += more
        skipped += passed_over
    return loaded, skipped


def summary(
    trace: TraceLike,
    *,
    top: int = 10,
    run: bool = False,
    recursive: bool = False,
    skip_bad: bool = False,
    workers: int | None = None,
    scheduler: str | None = None,
    step: int | None = None,
    annotation: str | None = None,
    device: int | None = None,
    stream: int | None = None,
    kind: str | None = None,
    sel: Selection | None = None,
    rules: RuleFile = None,
    devices: PathLike | None = None,
    salvage: bool = False,
    max_bytes: int = DEFAULT_MAX_BYTES,
    max_ratio: float | None = DEFAULT_MAX_RATIO,
    cache: CacheSetting = None,
    options: LoadOptions | None = None,
) -> Report:
    """Device, GPU time, counts per step, time per kind and category, the ``top`` kernels.

    ``run=True`` (or a ``Run``): the paths are the rank traces of one job, see :func:`summary_run`
    (``top`` does not apply there; ``workers``/``scheduler`` only there).
    """
    from .analyses.trace.summary import summary as _summary
    from .run import Run

    s, opts = _parts(locals())
    if run or isinstance(trace, Run):
        if top != 10:
            raise TypeError("top= lists a trace's kernels; a run's summary has none (run=True)")
        return summary_run(
            trace,
            skip_bad=skip_bad,
            recursive=recursive,
            sel=s,
            options=opts,
            workers=workers,
            scheduler=scheduler,
        )
    _on_dask_needs_runs(workers, scheduler)
    return _summary(_trace(trace, opts), s, top=top)


def _on_dask_needs_runs(workers: int | None, scheduler: str | None) -> None:
    if workers is not None or scheduler is not None:
        raise TypeError("workers= and scheduler= spread a run's rank files over Dask: give run=True or runs")


def _run(x: Traces | Run, skip_bad: bool, recursive: bool, opts: LoadOptions) -> Run:
    from .run import Run
    from .run import load_run as _load_run

    return x if isinstance(x, Run) else _load_run(x, skip_bad=skip_bad, recursive=recursive, **opts.kwargs())


def _results(items: list, s: Selection | None, opts: LoadOptions, *, work: bool, **kw: Any) -> list:
    """Each run's RankResults (a folder, paths or a loaded ``Run``): every rank file of every run by
    ``scale.run_results``, one load each, serially or on Dask (``kw``); a ``Run`` by the same
    per-rank function on its loaded traces."""
    from .analyses.runs.rank_work import of_run
    from .run import Run
    from .scale import run_results

    paths = [x for x in items if not isinstance(x, Run)]
    done = iter(run_results(paths, s, work=work, **kw, **opts.kwargs()) if paths else [])
    return [of_run(x, s, work=work) if isinstance(x, Run) else next(done) for x in items]


def summary_run(
    paths: Traces | Run,
    *,
    skip_bad: bool = False,
    recursive: bool = False,
    workers: int | None = None,
    scheduler: str | None = None,
    step: int | None = None,
    annotation: str | None = None,
    device: int | None = None,
    stream: int | None = None,
    kind: str | None = None,
    sel: Selection | None = None,
    rules: RuleFile = None,
    devices: PathLike | None = None,
    salvage: bool = False,
    max_bytes: int = DEFAULT_MAX_BYTES,
    max_ratio: float | None = DEFAULT_MAX_RATIO,
    cache: CacheSetting = None,
    options: LoadOptions | None = None,
) -> Report:
    """One job's rank traces (a folder, paths or a ``Run``): the shared metrics of each rank (table
    ``ranks``, one row per rank) and the run's ``overall`` row; GPU time by category over the run.
    ``workers``/``scheduler``: on Dask, as :func:`ranks`."""
    from .analyses.runs.run_summary import run_summary

    s, opts = _parts(locals())
    folder = paths if isinstance(paths, (str, os.PathLike)) else None
    label = as_text(os.path.basename(os.path.normpath(folder))) if folder is not None else None
    kw = {"workers": workers, "scheduler": scheduler, "skip_bad": skip_bad, "recursive": recursive}
    return run_summary(_results([paths], s, opts, work=False, **kw)[0], label=label)


def run_labels(items: Sequence[Traces | Run]) -> list[str]:
    """A label per run: its folder's name (its path when two share a name; `` (N)`` after a run given
    twice), else ``run N``."""
    names = [
        as_text(os.path.basename(os.path.normpath(x))) if isinstance(x, (str, os.PathLike)) else f"run {i}"
        for i, x in enumerate(items)
    ]
    names = [
        as_text(x) if names.count(n) > 1 and isinstance(x, (str, os.PathLike)) else n
        for n, x in zip(names, items, strict=True)
    ]
    return [f"{n} ({i})" if names.count(n) > 1 else n for i, n in enumerate(names)]  # one run given twice


def compare_runs(
    runs: Sequence[Traces | Run],
    *,
    baseline: Baseline = None,
    skip_bad: bool = False,
    recursive: bool = False,
    workers: int | None = None,
    scheduler: str | None = None,
    step: int | None = None,
    annotation: str | None = None,
    device: int | None = None,
    stream: int | None = None,
    kind: str | None = None,
    sel: Selection | None = None,
    rules: RuleFile = None,
    devices: PathLike | None = None,
    salvage: bool = False,
    max_bytes: int = DEFAULT_MAX_BYTES,
    max_ratio: float | None = DEFAULT_MAX_RATIO,
    cache: CacheSetting = None,
    options: LoadOptions | None = None,
) -> Report:
    """Runs side by side (each a folder of rank traces or a ``Run``): table ``compare`` one row per run
    (shared metrics and distributed totals over the ranks all runs have), table ``ranks`` one row per
    rank and run; ratios to ``baseline`` (index, label or folder; default the first run).
    ``workers``/``scheduler``: on Dask, as :func:`ranks` (one cluster for every run)."""
    from .analyses.runs.run_compare import run_compare

    s, opts = _parts(locals())
    items = list(runs)
    labels = run_labels(items)
    paths = [os.path.abspath(x) if isinstance(x, (str, os.PathLike)) else None for x in items]
    if isinstance(baseline, (str, os.PathLike)) and os.path.abspath(baseline) in paths:
        baseline = paths.index(os.path.abspath(baseline))
    kw = {"workers": workers, "scheduler": scheduler, "skip_bad": skip_bad, "recursive": recursive}
    done = _results(items, s, opts, work=True, **kw)
    return run_compare(list(zip(labels, done, strict=True)), baseline=baseline)


def kernels(
    trace: TraceLike,
    *,
    ops: bool = False,
    unclassified: bool = False,
    by: str = "name",
    library: tuple[str, ...] = (),
    step: int | None = None,
    annotation: str | None = None,
    device: int | None = None,
    stream: int | None = None,
    kind: str | None = None,
    sel: Selection | None = None,
    rules: RuleFile = None,
    devices: PathLike | None = None,
    salvage: bool = False,
    max_bytes: int = DEFAULT_MAX_BYTES,
    max_ratio: float | None = DEFAULT_MAX_RATIO,
    cache: CacheSetting = None,
    options: LoadOptions | None = None,
) -> Report:
    """Per kernel name, like ``nsys stats`` cuda_gpu_kern_sum, plus category and hardware path;
    ``ops=True`` adds table ``ops`` (per op name and shapes: work and efficiency, ``kernels --ops``);
    ``unclassified=True``: only the names no classification rule matched (``kernels --unclassified``).
    ``by="source"``: table ``sources`` instead, per line of the user's code (``kernels --by source``;
    ``library``: more file or folder/ patterns that are not the user's code, beside rules/sources.toml).
    ``devices=FILE`` adds GPUs to the peak table, as ``--devices`` does."""
    from .analyses.trace.kernels import kernel_stats, unclassified_report

    s, opts = _parts(locals())
    if by not in ("name", "source"):
        raise TypeError(f"by= is 'name' or 'source', not {by!r}")
    if by == "source":
        if ops or unclassified:
            raise TypeError("by='source' is its own table: give it without ops= or unclassified=")
        from .analyses.trace.source_lines import source_stats

        return source_stats(_trace(trace, opts), s, tuple(library))
    if library:
        raise TypeError("library= applies to by='source' only")
    if unclassified:
        if ops:
            raise TypeError("ops= and unclassified= are two different tables: give one")
        return unclassified_report(_trace(trace, opts), s)
    return kernel_stats(_trace(trace, opts), s, ops=ops)


def roofline(
    trace: TraceLike,
    *,
    step: int | None = None,
    annotation: str | None = None,
    device: int | None = None,
    stream: int | None = None,
    kind: str | None = None,
    sel: Selection | None = None,
    rules: RuleFile = None,
    devices: PathLike | None = None,
    salvage: bool = False,
    max_bytes: int = DEFAULT_MAX_BYTES,
    max_ratio: float | None = DEFAULT_MAX_RATIO,
    cache: CacheSetting = None,
    options: LoadOptions | None = None,
) -> Report:
    """One step's kernels with work (``step``, else the region's first): FLOPs, bytes, intensity,
    achieved TFLOP/s and GB/s, and the device's peaks; ``kernels --plot`` draws it."""
    from .analyses.measure.efficiency import roofline as _roofline

    s, opts = _parts(locals())
    return _roofline(_trace(trace, opts), s)


def diff(
    a: TraceLike,
    b: TraceLike,
    *,
    annotation_b: str | None = None,
    top: int | None = 20,
    workers: int | None = None,
    scheduler: str | None = None,
    step: int | None = None,
    annotation: str | None = None,
    device: int | None = None,
    stream: int | None = None,
    kind: str | None = None,
    sel: Selection | None = None,
    rules: RuleFile = None,
    devices: PathLike | None = None,
    salvage: bool = False,
    max_bytes: int = DEFAULT_MAX_BYTES,
    max_ratio: float | None = DEFAULT_MAX_RATIO,
    cache: CacheSetting = None,
    options: LoadOptions | None = None,
) -> Report:
    """What changed from ``a`` to ``b`` (paths or Traces), per step.

    ``annotation_b`` names B's annotation when it differs from A's. ``top`` caps the
    per-kernel/per-op tables (0 or None: every row, as ``--top 0``). Two folders are two runs
    (rank traces of one job each), compared rank by rank: :func:`diff_runs`, where selections
    and ``top`` do not apply (``workers``/``scheduler`` apply there only).
    """
    from .analyses.variants.diff import diff as _diff

    s, opts = _parts(locals())
    paths = [x for x in (a, b) if isinstance(x, (str, os.PathLike)) and os.path.isdir(x)]
    if len(paths) == 2:
        if s is not None or annotation_b is not None or top != 20:
            raise TypeError(
                "two folders are two runs, compared whole: a selection, annotation_b or top does not apply"
            )
        return diff_runs(*paths, options=opts, workers=workers, scheduler=scheduler)
    _on_dask_needs_runs(workers, scheduler)
    return _diff(_trace(a, opts), _trace(b, opts), s, sel_b=_sel_b(s, annotation_b), top=top or None)


def _sel_b(s: Selection | None, annotation_b: str | None) -> Selection | None:
    """B's selection: A's with B's annotation, when B's is named differently."""
    if annotation_b is None:
        return None
    base = s or Selection()
    return Selection(base.step, annotation_b, base.device, base.stream, base.kind)


def compare(
    traces: Traces,
    *,
    baseline: Baseline = None,
    recursive: bool = False,
    run: bool = False,
    skip_bad: bool = False,
    workers: int | None = None,
    scheduler: str | None = None,
    step: int | None = None,
    annotation: str | None = None,
    device: int | None = None,
    stream: int | None = None,
    kind: str | None = None,
    sel: Selection | None = None,
    rules: RuleFile = None,
    devices: PathLike | None = None,
    salvage: bool = False,
    max_bytes: int = DEFAULT_MAX_BYTES,
    max_ratio: float | None = DEFAULT_MAX_RATIO,
    cache: CacheSetting = None,
    options: LoadOptions | None = None,
) -> Report:
    """One row per trace (paths, folders of traces, or Traces), ratios to ``baseline``.

    ``baseline``: index, label, path or Trace (default: the first trace). A folder's
    files that are not profiler traces are skipped and named in the report's notes.
    ``run=True``: each item is one run (a folder of rank traces), see :func:`compare_runs`.
    """
    from .analyses.variants.compare import compare as _compare

    s, opts = _parts(locals())
    if run:
        runs = [traces] if isinstance(traces, (str, os.PathLike, Trace)) else list(traces)
        return compare_runs(
            runs,
            baseline=baseline,
            skip_bad=skip_bad,
            recursive=recursive,
            sel=s,
            options=opts,
            workers=workers,
            scheduler=scheduler,
        )
    _on_dask_needs_runs(workers, scheduler)
    loaded, skipped = load_traces(traces, opts, recursive=recursive)
    report = _compare(loaded, baseline=baseline, sel=s)
    report.notes += [f"skipped (not a profiler trace): {p}" for p in skipped]
    return report


def breakdown(
    traces: Trace | Sequence[Trace], *, sels: list | None = None, labels: list | None = None
) -> Report:
    """GPU time per step by category, one row per Trace and category (``--plot`` of diff and compare);
    ``sels`` gives each trace its selection."""
    from .analyses.trace.breakdown import breakdown as _breakdown

    return _breakdown([traces] if isinstance(traces, Trace) else list(traces), sels=sels, labels=labels)


def timeline(
    trace: TraceLike,
    *,
    step: int | None = None,
    annotation: str | None = None,
    device: int | None = None,
    stream: int | None = None,
    kind: str | None = None,
    sel: Selection | None = None,
    rules: RuleFile = None,
    devices: PathLike | None = None,
    salvage: bool = False,
    max_bytes: int = DEFAULT_MAX_BYTES,
    max_ratio: float | None = DEFAULT_MAX_RATIO,
    cache: CacheSetting = None,
    options: LoadOptions | None = None,
) -> Report:
    """One step (``step``; default the first) on a time axis: its activities with start, duration,
    lane (stream, or thread for CPU-only traces) and category; ``traceview timeline`` draws it
    (``traceview.render.plot.plot_timeline(report, path)``)."""
    from .analyses.trace.timeline import timeline as _timeline

    s, opts = _parts(locals())
    return _timeline(_trace(trace, opts), s)


def memory(
    trace: TraceLike,
    *,
    step: int | None = None,
    annotation: str | None = None,
    device: int | None = None,
    stream: int | None = None,
    kind: str | None = None,
    timeline: bool = False,
    sel: Selection | None = None,
    rules: RuleFile = None,
    devices: PathLike | None = None,
    salvage: bool = False,
    max_bytes: int = DEFAULT_MAX_BYTES,
    max_ratio: float | None = DEFAULT_MAX_RATIO,
    cache: CacheSetting = None,
    options: LoadOptions | None = None,
) -> Report:
    """Allocations from the trace's ``[memory]`` events (``profile_memory=True``), per device: the
    peak and the op at it (``devices``), what is alive at the peak by allocating op
    (``alive_at_peak``), bytes per op (``ops``) and per step (``steps``); ``timeline=True`` adds
    allocated/reserved after every event, which ``traceview memory --plot`` draws
    (``traceview.render.plot.plot_memory(report, path)``). A trace without them says so in a note.
    Memory events belong to no annotation, stream or kind: those selections are refused."""
    from .analyses.trace.memory import memory as _memory

    s, opts = _parts(locals())
    return _memory(_trace(trace, opts), s, timeline=timeline)


def annotate(
    trace: TraceLike,
    output: PathLike,
    *,
    rules: RuleFile = None,
    devices: PathLike | None = None,
    salvage: bool = False,
    max_bytes: int = DEFAULT_MAX_BYTES,
    max_ratio: float | None = DEFAULT_MAX_RATIO,
    cache: CacheSetting = None,
    options: LoadOptions | None = None,
) -> dict:
    """Write ``trace`` (a path) to ``output`` (.json or .json.gz) with each GPU activity's category,
    tensor-core use, attention backend and launching op chain in its args, plus counter tracks of GPU
    time by category per step. ``output`` appears only once complete and is never the input.
    Returns counts: ``activities``, ``counter_events``, ``skipped``, ``not_loaded``."""
    from .analyses.trace.annotate import gpu_annotations
    from .render.annotated import check_output, write_annotated

    _, opts = _parts(locals())
    path = trace.path if isinstance(trace, Trace) else os.fspath(trace)
    check_output(path, output)  # before the (slow) load: a wrong output is known now
    t = _trace(trace, opts)  # the text is re-read under the load's caps
    return write_annotated(
        t,
        gpu_annotations(t),
        output,
        max_bytes=opts.max_bytes,
        max_ratio=opts.max_ratio,
        salvage=opts.salvage,
    )


def report(
    traces: Traces,
    *,
    output: PathLike | None = None,
    baseline: Baseline = None,
    recursive: bool = False,
    step: int | None = None,
    annotation: str | None = None,
    device: int | None = None,
    stream: int | None = None,
    kind: str | None = None,
    sel: Selection | None = None,
    rules: RuleFile = None,
    devices: PathLike | None = None,
    salvage: bool = False,
    max_bytes: int = DEFAULT_MAX_BYTES,
    max_ratio: float | None = DEFAULT_MAX_RATIO,
    cache: CacheSetting = None,
    options: LoadOptions | None = None,
) -> str:
    """The HTML report of traces (paths, folders or Traces) as one self-contained page: findings in
    words, the compare table, GPU time by category, tensor-core share, attention backend and one step's
    timeline per trace; ratios to ``baseline``. Written to ``output`` (.html, atomically) when given;
    returns the page. Needs matplotlib (traceview[plot])."""
    from .analyses.report_set import report_set
    from .render.htmlreport import render_report_set
    from .render.plot import pyplot

    s, opts = _parts(locals())
    if output is not None:
        check_report_path(output)
    pyplot()  # fail before the (slow) loading when matplotlib is missing
    loaded, _ = load_traces(traces, opts, recursive=recursive)
    text = render_report_set(
        report_set(loaded, s, baseline),
        f"traceview report: {len(loaded)} trace{'s' if len(loaded) != 1 else ''}",
    )
    if output is not None:
        from .atomic import write_text

        _not_onto_inputs(output, loaded)
        write_text(output, text)  # a full disk or Ctrl-C leaves no truncated report
    return text


def check_report_path(output: PathLike) -> None:
    """The report file must be .html in a folder that exists (checked before any trace is read)."""
    from pathlib import Path

    from .errors import TraceviewError

    path = Path(output)
    if path.suffix.lower() not in (".html", ".htm"):
        raise TraceviewError(f"{path}: the report file must end in .html")
    if not path.parent.exists():
        raise TraceviewError(f"{path}: folder {path.parent} does not exist")


def exposed(
    trace: TraceLike,
    *,
    step: int | None = None,
    annotation: str | None = None,
    device: int | None = None,
    stream: int | None = None,
    kind: str | None = None,
    sel: Selection | None = None,
    rules: RuleFile = None,
    devices: PathLike | None = None,
    salvage: bool = False,
    max_bytes: int = DEFAULT_MAX_BYTES,
    max_ratio: float | None = DEFAULT_MAX_RATIO,
    cache: CacheSetting = None,
    options: LoadOptions | None = None,
) -> Report:
    """Each step's wall time split into exposed time per cause (computation by category,
    communication, memcpy/memset, GPU idle by what the host was doing), summing exactly to the
    wall time; ``diff`` shows the same split for A and B (table ``exposed``)."""
    from .analyses.measure.exposed import exposed_report

    s, opts = _parts(locals())
    return exposed_report(_trace(trace, opts), s)


def advise(
    trace: TraceLike,
    *,
    min_pct: float | None = None,
    step: int | None = None,
    annotation: str | None = None,
    device: int | None = None,
    stream: int | None = None,
    kind: str | None = None,
    sel: Selection | None = None,
    rules: RuleFile = None,
    devices: PathLike | None = None,
    salvage: bool = False,
    max_bytes: int = DEFAULT_MAX_BYTES,
    max_ratio: float | None = DEFAULT_MAX_RATIO,
    cache: CacheSetting = None,
    options: LoadOptions | None = None,
) -> Report:
    """What to do about a trace (rules in ``rules/advice.toml``), ranked by the time at stake per
    step: an upper bound from the exposed-time split, never more than its cause exposes (table
    ``advice``); table ``rules`` says which rules could not run on this trace and why.
    ``min_pct``: say advice with at least this share of the wall time at stake (None: each rule's own)."""
    from .analyses.trace.advise import advise as _advise

    s, opts = _parts(locals())
    return _advise(_trace(trace, opts), s, min_pct)


def stacks(
    trace: TraceLike,
    *,
    by: str = "frame",
    fold_layers: bool = False,
    depth: int | None = None,
    min_pct: float | None = None,
    form: str = "tree",
    library: tuple[str, ...] = (),
    own: tuple[str, ...] = (),
    source_root: PathLike | None = None,
    step: int | None = None,
    annotation: str | None = None,
    device: int | None = None,
    stream: int | None = None,
    kind: str | None = None,
    sel: Selection | None = None,
    rules: RuleFile = None,
    devices: PathLike | None = None,
    salvage: bool = False,
    max_bytes: int = DEFAULT_MAX_BYTES,
    max_ratio: float | None = DEFAULT_MAX_RATIO,
    cache: CacheSetting = None,
    options: LoadOptions | None = None,
) -> Report:
    """GPU time per place in the code (``traceview stacks``, table ``stacks``): ``by="frame"`` the
    call tree of Python and nn.Module frames, ``"module"`` the nn.Module tree (``fold_layers``: every
    instance of a class as one), ``"line"`` the user's lines; per node inclusive and self time,
    kernels, FLOPs and bytes allocated (CPU op self time on a trace without GPU activity, as
    ``info["weight"]`` says). ``form="table"``: each node with its path. ``depth``, ``min_pct``:
    leave out deeper and smaller nodes. ``library``/``own``: file or folder/ patterns that are not
    / are the user's code. ``source_root``: where the trace's source files are, to find the line
    of each call (default: the current folder; files are parsed, never run)."""
    from .analyses.trace.stacks import call_tree

    s, opts = _parts(locals())
    return call_tree(
        _trace(trace, opts),
        s,
        by=by,
        fold_layers=fold_layers,
        depth=depth,
        min_pct=min_pct,
        form=form,
        library=tuple(library),
        own=tuple(own),
        source_root=source_root,
    )


def check(
    candidate: TraceLike | Sequence[TraceLike],
    *,
    baseline: TraceLike | Sequence[TraceLike] | None = None,
    checks: PathLike | None = None,
    junit: PathLike | None = None,
    step: int | None = None,
    annotation: str | None = None,
    device: int | None = None,
    stream: int | None = None,
    kind: str | None = None,
    sel: Selection | None = None,
    rules: RuleFile = None,
    devices: PathLike | None = None,
    salvage: bool = False,
    max_bytes: int = DEFAULT_MAX_BYTES,
    max_ratio: float | None = DEFAULT_MAX_RATIO,
    cache: CacheSetting = None,
    options: LoadOptions | None = None,
) -> Report:
    """A performance gate: every rule of ``checks`` (a TOML rules file; None: the built-in rules,
    traceview/rules/check_default.toml) on ``candidate``, relative rules against ``baseline``. Each
    side is one run or several (a list of traces, a folder of them, a glob such as ``"base/*/x.json.gz"``):
    timing rules judge the runs against the baseline runs' spread (one baseline run cannot judge them:
    they then fail only beyond 6x). Table ``rules``: one row per rule, its status (pass, fail, skipped),
    value, bound and how it was judged; ``info["verdict"]`` is ``pass`` or ``fail``. ``junit``: also
    write the results as JUnit XML there. ``rules=`` stays the kernel classification rules, as in every
    function. A malformed rules file raises CheckRuleError (one line, FILE:LINE) before any trace is read."""
    from .analyses.variants.check import check as _check
    from .analyses.variants.check import expand_runs
    from .analyses.variants.check_rules import DEFAULT, read_rules

    s, opts = _parts(locals())
    ruleset = read_rules(checks)
    if junit is not None:
        check_junit_path(junit)
    cand = load_traces(expand_runs(candidate), opts)[0]
    base = load_traces(expand_runs(baseline), opts)[0] if baseline is not None else None
    source = os.fspath(checks) if checks is not None else f"built-in ({DEFAULT.name})"
    result = _check(cand, base, ruleset, s, source=source)
    if junit is not None:
        from .render.junit import write_junit

        _not_onto_inputs(junit, [*cand, *(base or [])], checks)
        write_junit(result, junit)
    return result


def _not_onto_inputs(target: PathLike, traces: Sequence[Trace], *files: PathLike | None) -> None:
    """The API's writes refuse their inputs as the CLI's do (issue 38): InputTargetError (one line,
    a TraceviewError) when ``target`` is the same file as a trace read or a rules file given."""
    from .atomic import refuse_inputs

    refuse_inputs([target], [t.path for t in traces] + [os.fspath(f) for f in files if f is not None])


def check_junit_path(path: PathLike) -> None:
    """The JUnit file's folder must exist (checked before any trace is read)."""
    from pathlib import Path

    from .atomic import OutputError

    if not Path(path).parent.is_dir():
        raise OutputError(path, f"folder {Path(path).parent} does not exist")


def assert_check(
    candidate: TraceLike,
    *,
    baseline: TraceLike | None = None,
    checks: PathLike | None = None,
    sel: Selection | None = None,
    **load: Any,
) -> Report:
    """For a test: ``tv.assert_check("new.json.gz", baseline="old.json.gz")`` raises AssertionError
    naming each failed rule, how far it missed and what diff says changed; returns the Report when
    every rule holds. ``load``: the load options (``cache=False``, ``rules=``, ...)."""
    result = check(candidate, baseline=baseline, checks=checks, sel=sel, **load)
    if result.info["verdict"] != "pass":
        raise AssertionError("\n".join([result.title, *(f"  - {f}" for f in result.findings)]))
    return result


def hta(
    trace: TraceLike,
    *,
    analysis: str = "temporal",
    rank: int | None = None,
    drop_last_step: bool = False,
    ns_rounding: bool = True,
    rules: RuleFile = None,
    devices: PathLike | None = None,
    salvage: bool = False,
    max_bytes: int = DEFAULT_MAX_BYTES,
    max_ratio: float | None = DEFAULT_MAX_RATIO,
    cache: CacheSetting = None,
    options: LoadOptions | None = None,
) -> Report:
    """Holistic Trace Analysis's ``analysis`` (temporal, idle, kernels, launch) of a trace, its
    COMPUTATION split by traceview's categories. ``rank``: the rank to file it under (default the
    trace's distributedInfo.rank, else 0). Needs HTA: pip install 'traceview[hta]'."""
    from .interop.hta import import_hta, to_hta

    _, opts = _parts(locals())
    import_hta()  # fail fast, before loading, with the install hint
    from .analyses.trace.hta_views import hta_report

    t = _trace(trace, opts)
    ta = to_hta(t, rank=rank, include_last_step=not drop_last_step, ns_rounding=ns_rounding)
    return hta_report(t, ta, analysis)


def load_run(
    paths: Traces | Run,
    *,
    skip_bad: bool = False,
    recursive: bool = False,
    rules: RuleFile = None,
    devices: PathLike | None = None,
    salvage: bool = False,
    max_bytes: int = DEFAULT_MAX_BYTES,
    max_ratio: float | None = DEFAULT_MAX_RATIO,
    cache: CacheSetting = None,
    options: LoadOptions | None = None,
) -> Run:
    """The rank traces of one distributed job (a folder, or paths) as a ``Run``: rank and world size
    from each trace's ``distributedInfo``; two traces of one rank are refused, missing ranks reported.
    ``run.frame("kernels")`` stacks every rank's frame with a ``rank`` column."""
    _, opts = _parts(locals())
    return _run(paths, skip_bad, recursive, opts)


def ranks(
    paths: Traces | Run,
    *,
    workers: int | None = None,
    scheduler: str | None = None,
    skip_bad: bool = False,
    recursive: bool = False,
    progress: Callable[..., Any] | None = None,
    rules: RuleFile = None,
    devices: PathLike | None = None,
    salvage: bool = False,
    max_bytes: int = DEFAULT_MAX_BYTES,
    max_ratio: float | None = DEFAULT_MAX_RATIO,
    cache: CacheSetting = None,
    options: LoadOptions | None = None,
) -> Report:
    """The distributed analyses of a run, one row per rank (``traceview ranks``): GPU time breakdown,
    comm/comp overlap, idle per stream and its cause, stragglers per step and per collective.

    ``workers=N`` spreads the ranks over a local Dask cluster of N processes, ``scheduler=ADDRESS``
    over an existing one (its workers read the files by path: a shared filesystem); default serial.
    """
    from .scale import ranks_of

    _, opts = _parts(locals())
    kw = {"workers": workers, "scheduler": scheduler, "skip_bad": skip_bad, "recursive": recursive}
    return ranks_of(_results([paths], None, opts, work=True, progress=progress, **kw)[0])


def diff_runs(
    a: PathLike | Report,
    b: PathLike | Report,
    *,
    workers: int | None = None,
    scheduler: str | None = None,
    skip_bad: bool = False,
    rules: RuleFile = None,
    devices: PathLike | None = None,
    salvage: bool = False,
    max_bytes: int = DEFAULT_MAX_BYTES,
    max_ratio: float | None = DEFAULT_MAX_RATIO,
    cache: CacheSetting = None,
    options: LoadOptions | None = None,
) -> Report:
    """Two runs (folders of rank traces, or ``ranks`` Reports), rank by rank and overall."""
    from .analyses.runs.run_diff import run_diff
    from .scale import ranks_of

    _, opts = _parts(locals())
    runs = [r for r in (a, b) if not isinstance(r, Report)]
    kw = {"workers": workers, "scheduler": scheduler, "skip_bad": skip_bad}
    done = iter(_results(runs, None, opts, work=True, **kw) if runs else [])  # both runs in one gather
    ra, rb = (r if isinstance(r, Report) else ranks_of(next(done)) for r in (a, b))
    return run_diff(ra, rb)
