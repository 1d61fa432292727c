"""The front door: every command, as a Python function; the CLI calls these and renders.

``tv.summary``, ``tv.kernels``, ``tv.diff``, ``tv.compare``, ``tv.timeline``, ``tv.ranks``,
``tv.hta`` return a :class:`~traceview.report.Report`: ``report["by_category"]`` is a
DataFrame, ``print(report)`` shows what the CLI shows, and a notebook renders it as HTML.
``tv.annotate`` writes an annotated trace, ``tv.report`` the HTML report.

Every function that reads traces takes the same keywords, declared once (:class:`Options`) and
shown in each signature (``help(tv.diff)``):

- the selection: ``step``, ``annotation``, ``device``, ``stream``, ``kind`` (or a ready
  ``sel=Selection(...)``; not both), those its command applies (``traceview.commands``);
- the load options: ``rules``, ``devices``, ``salvage``, ``max_bytes``, ``max_ratio``, ``cache``
  (see :func:`traceview.load`; or a ready ``options=LoadOptions(...)``; not both);
- ``on_warning``: called with each line the load has to say (``"warning: ..."``, as the CLI
  prints them on stderr); None: they stay in ``trace.warnings``.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypedDict, TypeVar

from . import temporaries
from .commands import COMMANDS, LOAD, SELECT, refusal
from .discover import load_all
from .filenames import as_text
from .model import Trace
from .options import LoadOptions
from .read import read_together
from .report import Report
from .selection import KINDS, Selection

if TYPE_CHECKING:  # the names the signatures below use (help() shows them as written)
    from typing_extensions import Unpack

    from .classify import RuleSet
    from .run import Run

    PathLike = str | os.PathLike[str]
    TraceLike = PathLike | Trace  # a trace file (or, where a folder is allowed, a folder) or a loaded Trace
    Traces = TraceLike | Sequence[TraceLike]  # one or several, folders expanded
    RuleFile = PathLike | RuleSet | None
    CacheSetting = bool | PathLike | None  # on, off, or the cache folder (None: the default)
    Baseline = int | str | PathLike | None  # index, label or path; None: the first

__all__ = [
    "KINDS",
    "LoadOptions",
    "Options",
    "Report",
    "Selection",
]  # re-exported: the CLI imports no analyses

Warn = Callable[[str], None]

#: a path given where a run is wanted must be a folder (``compare --run`` and ``tv.compare_runs`` alike)
NOT_A_RUN = "not a folder; a run is a folder of rank traces"


class LoadKeywords(TypedDict, total=False):
    """How traces are read: :class:`LoadOptions`' fields as keywords, or ``options`` (not both)."""

    rules: RuleFile
    devices: PathLike | None
    salvage: bool
    max_bytes: int
    max_ratio: float | None
    cache: CacheSetting
    options: LoadOptions | None
    on_warning: Warn | None


class Options(LoadKeywords, total=False):
    """The keywords every function that reads traces takes (PEP 692: ``**kw: Unpack[Options]``):
    the selection, as :class:`Selection`'s fields or ``sel`` (not both), and the load keywords."""

    step: int | None
    annotation: str | None
    device: int | None
    stream: int | None
    kind: str | None
    sel: Selection | None


class MemoryOptions(LoadKeywords, total=False):
    """``memory``'s keywords: its events belong to no annotation, stream or kind (COMMANDS["memory"])."""

    step: int | None
    device: int | None
    sel: Selection | None


#: the keywords whose default is not None
_DEFAULTS: dict[str, Any] = {
    f.name: f.default for f in dataclasses.fields(LoadOptions) if f.default is not None
}

F = TypeVar("F", bound=Callable[..., Any])


def _keywords(select: tuple[str, ...]) -> list[inspect.Parameter]:
    """The declared keywords (``Options``) a command takes, as help() and ``inspect`` show them."""
    names = [*select, "sel"] if select else []
    names += [*LOAD, "options", "on_warning"]
    notes = Options.__annotations__
    return [
        inspect.Parameter(
            n,
            inspect.Parameter.KEYWORD_ONLY,
            default=_DEFAULTS.get(n),
            annotation=getattr(notes[n], "__forward_arg__", notes[n]),
        )
        for n in names
    ]


def _command(f: F) -> F:
    """The function of the command of its name (``traceview.commands.COMMANDS``): its signature
    shows its own parameters and the keywords of ``Options`` it takes (not ``**kw``); a keyword
    it does not take is a TypeError, as Python's own, and an option its spec refuses in this form
    (with the arguments' ``facts``) one line naming it."""
    spec = COMMANDS[f.__name__]
    own = [p for p in inspect.signature(f).parameters.values() if p.kind is not p.VAR_KEYWORD]
    sig = inspect.Signature(
        [*own, *_keywords(spec.select)], return_annotation=inspect.signature(f).return_annotation
    )

    @functools.wraps(f)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            bound = sig.bind(*args, **kwargs)
        except TypeError as e:  # as Python says it: the function's name first
            raise TypeError(f"{f.__name__}() {e}") from None
        if spec.takes == "runs":  # a file is no run: ``compare --run`` says the same (issue 37)
            _runs_are_folders([bound.arguments[p.name] for p in own if p.default is p.empty])
        if spec.refuse:
            named = {n for rule in spec.refuse for n in rule.names}
            given = {n for n, v in bound.arguments.items() if n in named and v != sig.parameters[n].default}
            sel = bound.arguments.get("sel")
            given |= {n for n in SELECT if sel is not None and getattr(sel, n) is not None}
            bound.apply_defaults()
            broken = spec.refused({**bound.arguments, **_facts(f.__name__, bound.arguments)}, given)
            if broken is not None:
                raise TypeError(f"{f.__name__}: {refusal(*broken, cli=False)}")
        return f(*args, **kwargs)

    wrapper.__signature__ = sig  # type: ignore[attr-defined]
    return wrapper  # type: ignore[return-value]


def _facts(name: str, args: dict[str, Any]) -> dict[str, Any]:
    """What a command's refusals ask of its arguments beside their values: diff of two folders
    is diff of two runs (``runs``)."""
    from .run import Run

    if name == "diff":
        return {"runs": all(_is_folder(args[k]) for k in ("a", "b"))}
    if name in ("summary", "compare"):  # a Run given is a run
        return {"run": args["run"] or isinstance(args.get("trace", args.get("traces")), Run)}
    return {}


def _runs_are_folders(runs: list) -> None:
    """Each path given as a run names a folder (a run given as a list of files, or a Run, is one);
    else one line, the same as ``compare --run`` on a file says."""
    from .errors import TraceviewError

    for x in (x for r in runs for x in (r if isinstance(r, (list, tuple)) else [r])):
        if isinstance(x, (str, os.PathLike)) and not os.path.isdir(x):
            raise TraceviewError(f"{as_text(os.fspath(x))}: {NOT_A_RUN}")


def _is_folder(x: object) -> bool:
    return isinstance(x, (str, os.PathLike)) and os.path.isdir(x)


@dataclass(frozen=True)
class Loader:
    """The one way traces are loaded (the CLI's and the API's): the load options, and where the
    load's warnings go (``on_warning``: each line, ``"warning: ..."``; None: kept on the trace)."""

    options: LoadOptions
    warn: Warn | None = None

    def _said(self, t: Trace) -> Trace:
        self.say([f"warning: {w}" for w in t.warnings])
        return t

    def say(self, lines: list[str]) -> None:
        if self.warn is not None:
            for line in lines:
                self.warn(line)

    def one(self, t: TraceLike) -> Trace:
        """A path loaded with the options, or a Trace loaded with the same ones (else TypeError)."""
        if isinstance(t, Trace):
            return same_options(t, self.options)
        return self._said(self.options.load(os.fspath(t)))

    def pair(
        self,
        a: TraceLike,
        b: TraceLike,
        then: tuple[Callable[[Trace], None], Callable[[Trace], None]] | None = None,
    ) -> tuple[Trace, Trace]:
        """``(one(a), one(b))``; two paths are read at once, B on a second thread: a load is
        half compiled scanning and numpy copies, which release the GIL, and half linking in
        Python, so one trace's linking runs beside the other's scan (two 300 MB traces: see
        benchmarks/bench_jobs.py). The warnings are said A's first; A's error is raised first.
        ``then``: (for A, for B), each called with its trace on the thread that loaded it, when
        the two are read at once (work the caller will ask of each side, done side by side)."""
        if isinstance(a, Trace) or isinstance(b, Trace) or not read_together([a, b]):
            return self.one(a), self.one(b)
        after_a, after_b = then or (_nothing, _nothing)
        failed = threading.Event()  # A's load failed: B's result is dropped, its ``then`` not run
        with temporaries.armed():  # B's thread may write into the cache: SIGTERM removes its files
            pool = ThreadPoolExecutor(max_workers=1)
            later = pool.submit(_and_then, self.options.load, os.fspath(b), after_b, failed)
            try:
                ta = self._said(self.options.load(os.fspath(a)))
                after_a(ta)
            except BaseException:
                failed.set()
                pool.shutdown(wait=False)  # A's error now, not after B's load (B's result is dropped)
                raise
            pool.shutdown()
            return ta, self._said(later.result())

    def many(self, items: Traces, *, recursive: bool = False) -> tuple[list[Trace], list[str]]:
        """Traces (paths, folders of traces, or Traces) in the order given, a folder expanded in
        place; and the folder files passed over as not profiler traces (each said, as a warning)."""
        items = [items] if isinstance(items, (str, os.PathLike, Trace)) else list(items)
        loaded, skipped = [], []
        for t in items:
            if isinstance(t, Trace):
                loaded.append(same_options(t, self.options))
                continue
            more, passed_over = load_all([t], lambda p: self._said(self.options.load(p)), recursive=recursive)
            loaded += more
            skipped += passed_over
            self.say([f"warning: skipped {s}" for s in passed_over])
        return loaded, skipped


def _nothing(_trace: Trace) -> None:
    return None


def _and_then(
    load: Callable[[str], Trace], path: str, then: Callable[[Trace], None], failed: threading.Event
) -> Trace:
    trace = load(path)
    if not failed.is_set():
        then(trace)
    return trace


def _parts(given: Options | MemoryOptions | LoadKeywords) -> tuple[Selection | None, Loader]:
    """The selection and the loader of a function's keywords: ``sel=`` or the selection keywords,
    ``options=`` or the load keywords; both of a pair is an error."""
    kw: dict[str, Any] = dict(given)
    parts = {k: kw[k] for k in SELECT if kw.get(k) is not None}
    sel = kw.get("sel")
    if sel is not None and parts:
        raise TypeError(f"give sel= or {'=, '.join(parts)}=, not both")
    loads = LoadOptions(**{k: kw[k] for k in LOAD if k in kw})
    opts = kw.get("options")
    if opts is not None and loads != LoadOptions():
        raise TypeError("give options= or the load keywords (rules=, devices=, ...), not both")
    s = sel if sel is not None else Selection(**parts) if parts else None
    return s, Loader((opts or loads).checked(), kw.get("on_warning"))


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


@_command
def summary(
    trace: Traces | Run,
    *,
    top: int = 10,
    run: bool = False,
    recursive: bool = False,
    skip_bad: bool = False,
    workers: int | None = None,
    scheduler: str | None = None,
    **kw: Unpack[Options],
) -> Report | list[Report]:
    """Device, GPU time, counts per step, time per kind and category, the ``top`` kernels.

    One trace (a file or a Trace): its Report. Several (a list, or a folder of traces): a list of
    Reports, one per trace, as ``traceview summary`` prints them (``on_warning`` hears the note
    when they are the ranks of one job). ``run=True`` (or a ``Run``): the paths are the rank
    traces of one job, see :func:`summary_run` (``top`` does not apply there;
    ``workers``/``scheduler`` only there).
    """
    from .analyses.trace.summary import summary as _summary
    from .run import Run, one_job

    s, load = _parts(kw)
    if run or isinstance(trace, Run):
        return summary_run(
            trace,
            skip_bad=skip_bad,
            recursive=recursive,
            workers=workers,
            scheduler=scheduler,
            sel=s,
            options=load.options,
            on_warning=load.warn,
        )
    if isinstance(trace, Trace) or (isinstance(trace, (str, os.PathLike)) and not os.path.isdir(trace)):
        return _summary(load.one(trace), s, top=top)
    loaded, _ = load.many(trace, recursive=recursive)
    hint = one_job(loaded)  # rank traces summarised one by one: say that run=True exists
    if hint:
        load.say([f"note: {hint}"])
    return [_summary(t, s, top=top) for t in loaded]


def _run(x: Traces | Run, skip_bad: bool, recursive: bool, opts: LoadOptions) -> Run:
    from .run import Run
    from .run import load_run as _load_run

    return x if isinstance(x, Run) else _load_run(x, skip_bad=skip_bad, recursive=recursive, **opts.kwargs())


def _results(items: list, s: Selection | None, load: Loader, *, work: bool, **kw: Any) -> list:
    """Each run's RankResults (a folder, paths or a loaded ``Run``): every rank file of every run by
    ``scale.run_results``, one load each, serially or on Dask (``kw``); a ``Run`` by the same
    per-rank function on its loaded traces."""
    from .analyses.runs.rank_work import of_run
    from .run import Run
    from .scale import run_results

    paths = [x for x in items if not isinstance(x, Run)]
    loaded = run_results(paths, s, work=work, **kw, **load.options.kwargs()) if paths else []
    for res in loaded:  # each rank's load warnings, said as a trace's are (a worker cannot say them)
        load.say([f"warning: {w}" for r in res.ranks.values() for w in r.warnings])
    done = iter(loaded)
    return [of_run(x, s, work=work) if isinstance(x, Run) else next(done) for x in items]


@_command
def summary_run(
    paths: Traces | Run,
    *,
    skip_bad: bool = False,
    recursive: bool = False,
    workers: int | None = None,
    scheduler: str | None = None,
    **kw: Unpack[Options],
) -> Report:
    """One job's rank traces (a folder, paths or a ``Run``): the shared metrics of each rank (table
    ``ranks``, one row per rank) and the run's ``overall`` row; GPU time by category over the run.
    ``workers``/``scheduler``: on Dask, as :func:`ranks`."""
    from .analyses.runs.run_summary import run_summary

    s, load = _parts(kw)
    folder = paths if isinstance(paths, (str, os.PathLike)) else None
    label = as_text(os.path.basename(os.path.normpath(folder))) if folder is not None else None
    dask = {"workers": workers, "scheduler": scheduler, "skip_bad": skip_bad, "recursive": recursive}
    return run_summary(_results([paths], s, load, work=False, **dask)[0], label=label)


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


@_command
def compare_runs(
    runs: Sequence[Traces | Run],
    *,
    baseline: Baseline = None,
    skip_bad: bool = False,
    recursive: bool = False,
    workers: int | None = None,
    scheduler: str | None = None,
    **kw: Unpack[Options],
) -> Report:
    """Runs side by side (each a folder of rank traces or a ``Run``): table ``compare`` one row per run
    (shared metrics and distributed totals over the ranks all runs have), table ``ranks`` one row per
    rank and run; ratios to ``baseline`` (index, label or folder; default the first run).
    ``workers``/``scheduler``: on Dask, as :func:`ranks` (one cluster for every run)."""
    from .analyses.runs.run_compare import run_compare

    s, load = _parts(kw)
    items = list(runs)
    labels = run_labels(items)
    paths = [os.path.abspath(x) if isinstance(x, (str, os.PathLike)) else None for x in items]
    if isinstance(baseline, (str, os.PathLike)) and os.path.abspath(baseline) in paths:
        baseline = paths.index(os.path.abspath(baseline))
    dask = {"workers": workers, "scheduler": scheduler, "skip_bad": skip_bad, "recursive": recursive}
    done = _results(items, s, load, work=True, **dask)
    return run_compare(list(zip(labels, done, strict=True)), baseline=baseline)


@_command
def kernels(
    trace: TraceLike,
    *,
    ops: bool = False,
    unclassified: bool = False,
    by: str = "name",
    library: tuple[str, ...] = (),
    plot: PathLike | None = None,
    **kw: Unpack[Options],
) -> Report:
    """Per kernel name, like ``nsys stats`` cuda_gpu_kern_sum, plus category and hardware path;
    ``ops=True`` adds table ``ops`` (per op name and shapes: work and efficiency, ``kernels --ops``);
    ``unclassified=True``: only the names no classification rule matched (``kernels --unclassified``).
    ``by="source"``: table ``sources`` instead, per line of the user's code (``kernels --by source``;
    ``library``: more file or folder/ patterns that are not the user's code, beside rules/sources.toml).
    ``devices=FILE`` adds GPUs to the peak table, as ``--devices`` does. ``plot``: also draw a
    roofline of one step's kernels (:func:`roofline`) into that .png, .svg or .html file."""
    from .analyses.trace.kernels import kernel_stats, unclassified_report

    s, load = _parts(kw)
    if by not in ("name", "source"):
        raise TypeError(f"by= is 'name' or 'source', not {by!r}")
    if by == "source":
        from .analyses.trace.source_lines import source_stats

        return source_stats(load.one(trace), s, tuple(library))
    check_plot(plot)
    t = load.one(trace)
    report = unclassified_report(t, s) if unclassified else kernel_stats(t, s, ops=ops)
    if plot is not None:
        from .render.plot import plot_roofline

        _not_onto_inputs(plot, [t])
        plot_roofline(roofline(t, sel=s), plot)
    return report


def check_plot(plot: PathLike | None) -> None:
    """A plot file's name and matplotlib, checked before the (slow) loading; every command that
    draws (the API's ``plot=`` and the CLI's ``--plot``) checks here."""
    if plot is not None:
        from .render.plot import check_path, pyplot

        check_path(plot)
        pyplot()


@_command
def roofline(
    trace: TraceLike,
    **kw: Unpack[Options],
) -> Report:
    """One step's kernels with work (``step``, else the region's first): FLOPs, bytes, intensity,
    achieved TFLOP/s and GB/s, and the device's peaks; ``kernels --plot`` draws it."""
    from .analyses.measure.efficiency import roofline as _roofline

    s, load = _parts(kw)
    return _roofline(load.one(trace), s)


@_command
def diff(
    a: TraceLike,
    b: TraceLike,
    *,
    annotation_b: str | None = None,
    top: int | None = 20,
    plot: PathLike | None = None,
    workers: int | None = None,
    scheduler: str | None = None,
    **kw: Unpack[Options],
) -> Report:
    """What changed from ``a`` to ``b`` (paths or Traces), per step.

    ``annotation_b`` names B's annotation when it differs from A's. ``top`` caps the
    per-kernel/per-op tables (0 or None: every row, as ``--top 0``). Two folders are two runs
    (rank traces of one job each), compared rank by rank: :func:`diff_runs`, where selections
    and ``top`` do not apply (``workers``/``scheduler`` apply there only). ``plot``: also draw
    GPU time per step by category of A and B into that .png, .svg or .html file.
    """
    from .analyses.variants.diff import diff as _diff
    from .analyses.variants.sides import prepare

    s, load = _parts(kw)
    if not isinstance(a, Trace) and not isinstance(b, Trace) and _is_folder(a) and _is_folder(b):
        # two runs: what does not apply to them was refused (COMMANDS["diff"])
        return diff_runs(
            a, b, options=load.options, on_warning=load.warn, workers=workers, scheduler=scheduler
        )
    check_plot(plot)
    sb = sel_b(s, annotation_b)
    sides = (functools.partial(prepare, sel=s), functools.partial(prepare, sel=sb if sb is not None else s))
    ta, tb = load.pair(a, b, then=sides)  # each side's tables worked out on its loading thread
    report = _diff(ta, tb, s, sel_b=sb, top=top or None)
    if plot is not None:
        labels = [f"A: {report.info['a_label']}", f"B: {report.info['b_label']}"]
        _draw_breakdown([ta, tb], plot, labels, [s, sb or s])
    return report


def _draw_breakdown(traces: list[Trace], plot: PathLike, labels: list, sels: list) -> None:
    from .render.plot import plot_breakdown

    _not_onto_inputs(plot, traces)
    plot_breakdown(breakdown(traces, sels=sels, labels=labels), plot)


def sel_b(s: Selection | None, annotation_b: str | None) -> Selection | None:
    """B's selection: A's with B's annotation, when B's is named differently."""
    if annotation_b is None:
        return None
    base = s or Selection()
    return Selection(base.step, annotation_b, base.device, base.stream, base.kind)


@_command
def compare(
    traces: Traces,
    *,
    baseline: Baseline = None,
    recursive: bool = False,
    run: bool = False,
    skip_bad: bool = False,
    plot: PathLike | None = None,
    workers: int | None = None,
    scheduler: str | None = None,
    **kw: Unpack[Options],
) -> Report:
    """One row per trace (paths, folders of traces, or Traces), ratios to ``baseline``.

    ``baseline``: index, label, path or Trace (default: the first trace). A folder's
    files that are not profiler traces are skipped and named in the report's notes.
    ``run=True``: each item is one run (a folder of rank traces), see :func:`compare_runs`.
    ``plot``: also draw GPU time per step by category per trace into that .png, .svg or .html file.
    """
    from .analyses.variants.compare import compare as _compare

    s, load = _parts(kw)
    if run:
        runs = [traces] if isinstance(traces, (str, os.PathLike, Trace)) else list(traces)
        return compare_runs(
            runs,
            baseline=baseline,
            skip_bad=skip_bad,
            recursive=recursive,
            workers=workers,
            scheduler=scheduler,
            sel=s,
            options=load.options,
            on_warning=load.warn,
        )
    check_plot(plot)
    loaded, skipped = load.many(traces, recursive=recursive)
    report = _compare(loaded, baseline=baseline, sel=s)
    report.notes += [f"skipped (not a profiler trace): {p}" for p in skipped]
    if plot is not None:
        _draw_breakdown(loaded, plot, report["compare"]["label"].tolist(), [s] * len(loaded))
    return report


def breakdown(
    traces: Trace | Sequence[Trace], *, sels: list | None = None, labels: list | None = None
) -> Report:
    """GPU time per step by category, one row per Trace and category (``--plot`` of diff and compare);
    ``sels`` gives each trace its selection."""
    from .analyses.trace.breakdown import breakdown as _breakdown

    return _breakdown([traces] if isinstance(traces, Trace) else list(traces), sels=sels, labels=labels)


@_command
def timeline(
    trace: TraceLike,
    *,
    plot: PathLike | None = None,
    **kw: Unpack[Options],
) -> Report:
    """One step (``step``; default the first) on a time axis: its activities with start, duration,
    lane (stream, or thread for CPU-only traces) and category; ``plot``: also drawn into that
    .png, .svg or .html file (``traceview.render.plot.plot_timeline(report, path)``)."""
    from .analyses.trace.timeline import timeline as _timeline

    s, load = _parts(kw)
    check_plot(plot)
    t = load.one(trace)
    report = _timeline(t, s)
    if plot is not None:
        from .render.plot import plot_timeline

        _not_onto_inputs(plot, [t])
        plot_timeline(report, plot)
    return report


@_command
def memory(
    trace: TraceLike,
    *,
    timeline: bool = False,
    plot: PathLike | None = None,
    **kw: Unpack[MemoryOptions],
) -> Report:
    """Allocations from the trace's ``[memory]`` events (``profile_memory=True``), per device: the
    peak and the op at it (``devices``), what is alive at the peak by allocating op
    (``alive_at_peak``), bytes per op (``ops``) and per step (``steps``); ``timeline=True`` adds
    allocated/reserved after every event, which ``traceview memory --plot`` draws
    (``traceview.render.plot.plot_memory(report, path)``; ``plot``: drawn into that file, the
    timeline made for it). A trace without them says so in a note. Memory events belong to no
    annotation, stream or kind: those selections are not keywords here."""
    from .analyses.trace.memory import memory as _memory

    s, load = _parts(kw)
    check_plot(plot)
    t = load.one(trace)
    report = _memory(t, s, timeline=timeline or plot is not None)
    if plot is not None:
        from .render.plot import plot_memory

        _not_onto_inputs(plot, [t])
        plot_memory(report, plot)
    return report


@_command
def annotate(
    trace: TraceLike,
    output: PathLike,
    **kw: Unpack[LoadKeywords],
) -> dict:
    """Write ``trace`` (a path) to ``output`` (.json or .json.gz) with each GPU activity's category,
    tensor-core use, attention backend and launching op chain in its args, plus counter tracks of GPU
    time by category per step. ``output`` appears only once complete and is never the input.
    Returns counts: ``activities``, ``counter_events``, ``skipped``, ``not_loaded``."""
    from .analyses.trace.annotate import gpu_annotations
    from .render.annotated import check_output, write_annotated

    _, load = _parts(kw)
    opts = load.options
    path = trace.path if isinstance(trace, Trace) else os.fspath(trace)
    check_output(path, output)  # before the (slow) load: a wrong output is known now
    t = load.one(trace)  # the text is re-read under the load's caps
    return write_annotated(
        t,
        gpu_annotations(t),
        output,
        max_bytes=opts.max_bytes,
        max_ratio=opts.max_ratio,
        salvage=opts.salvage,
    )


@_command
def report(
    traces: Traces,
    *,
    output: PathLike | None = None,
    baseline: Baseline = None,
    recursive: bool = False,
    **kw: Unpack[Options],
) -> str:
    """The HTML report of traces (paths, folders or Traces) as one self-contained page: findings in
    words, the compare table, GPU time by category, tensor-core share, attention backend and one step's
    timeline per trace; ratios to ``baseline``. Written to ``output`` (.html, atomically) when given;
    returns the page. Needs matplotlib (traceview[plot])."""
    from .analyses.report_set import report_set
    from .render.htmlreport import render_report_set
    from .render.plot import pyplot

    s, load = _parts(kw)
    if output is not None:
        check_report_path(output)
    pyplot()  # fail before the (slow) loading when matplotlib is missing
    loaded, _ = load.many(traces, recursive=recursive)
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


@_command
def exposed(
    trace: TraceLike,
    **kw: Unpack[Options],
) -> Report:
    """Each step's wall time split into exposed time per cause (computation by category,
    communication, memcpy/memset, GPU idle by what the host was doing), summing exactly to the
    wall time; ``diff`` shows the same split for A and B (table ``exposed``)."""
    from .analyses.measure.exposed import exposed_report

    s, load = _parts(kw)
    return exposed_report(load.one(trace), s)


@_command
def advise(
    trace: TraceLike,
    *,
    min_pct: float | None = None,
    **kw: Unpack[Options],
) -> Report:
    """What to do about a trace (rules in ``rules/advice.toml``), ranked by the time at stake per
    step: an upper bound from the exposed-time split, never more than its cause exposes (table
    ``advice``); table ``rules`` says which rules could not run on this trace and why.
    ``min_pct``: say advice with at least this share of the wall time at stake (None: each rule's own)."""
    from .analyses.trace.advise import advise as _advise

    s, load = _parts(kw)
    return _advise(load.one(trace), s, min_pct)


@_command
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
    **kw: Unpack[Options],
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

    s, load = _parts(kw)
    return call_tree(
        load.one(trace),
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


@_command
def check(
    candidate: TraceLike | Sequence[TraceLike],
    *,
    baseline: TraceLike | Sequence[TraceLike] | None = None,
    checks: PathLike | None = None,
    junit: PathLike | None = None,
    **kw: Unpack[Options],
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

    s, load = _parts(kw)
    ruleset = read_rules(checks)
    if junit is not None:
        check_junit_path(junit)
    cand = load.many(expand_runs(candidate))[0]
    base = load.many(expand_runs(baseline))[0] if baseline is not None else None
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


@_command
def assert_check(
    candidate: TraceLike,
    *,
    baseline: TraceLike | None = None,
    checks: PathLike | None = None,
    **kw: Unpack[Options],
) -> Report:
    """For a test: ``tv.assert_check("new.json.gz", baseline="old.json.gz")`` raises AssertionError
    naming each failed rule, how far it missed and what diff says changed; returns the Report when
    every rule holds. The selection and load keywords as :func:`check` (``cache=False``, ...)."""
    result = check(candidate, baseline=baseline, checks=checks, **kw)
    if result.info["verdict"] != "pass":
        raise AssertionError("\n".join([result.title, *(f"  - {f}" for f in result.findings)]))
    return result


@_command
def hta(
    trace: TraceLike,
    *,
    analysis: str = "temporal",
    rank: int | None = None,
    drop_last_step: bool = False,
    ns_rounding: bool = True,
    **kw: Unpack[LoadKeywords],
) -> Report:
    """Holistic Trace Analysis's ``analysis`` (temporal, idle, kernels, launch) of a trace, its
    COMPUTATION split by traceview's categories. ``rank``: the rank to file it under (default the
    trace's distributedInfo.rank, else 0). Needs HTA: pip install 'traceview[hta]'."""
    from .interop.hta import import_hta, to_hta

    _, load = _parts(kw)
    import_hta()  # fail fast, before loading, with the install hint
    from .analyses.trace.hta_views import hta_report

    t = load.one(trace)
    ta = to_hta(t, rank=rank, include_last_step=not drop_last_step, ns_rounding=ns_rounding)
    return hta_report(t, ta, analysis)


@_command
def load_run(
    paths: Traces | Run,
    *,
    skip_bad: bool = False,
    recursive: bool = False,
    **kw: Unpack[LoadKeywords],
) -> Run:
    """The rank traces of one distributed job (a folder, or paths) as a ``Run``: rank and world size
    from each trace's ``distributedInfo``; two traces of one rank are refused, missing ranks reported.
    ``run.frame("kernels")`` stacks every rank's frame with a ``rank`` column."""
    _, load = _parts(kw)
    return _run(paths, skip_bad, recursive, load.options)


@_command
def ranks(
    paths: Traces | Run,
    *,
    workers: int | None = None,
    scheduler: str | None = None,
    skip_bad: bool = False,
    recursive: bool = False,
    progress: Callable[..., Any] | None = None,
    **kw: Unpack[LoadKeywords],
) -> Report:
    """The distributed analyses of a run, one row per rank (``traceview ranks``): GPU time breakdown,
    comm/comp overlap, idle per stream and its cause, stragglers per step and per collective.

    ``workers=N`` spreads the ranks over a local Dask cluster of N processes, ``scheduler=ADDRESS``
    over an existing one (its workers read the files by path: a shared filesystem); default serial.
    """
    from .scale import ranks_of

    _, load = _parts(kw)
    dask = {"workers": workers, "scheduler": scheduler, "skip_bad": skip_bad, "recursive": recursive}
    return ranks_of(_results([paths], None, load, work=True, progress=progress, **dask)[0])


@_command
def diff_runs(
    a: PathLike | Report,
    b: PathLike | Report,
    *,
    workers: int | None = None,
    scheduler: str | None = None,
    skip_bad: bool = False,
    **kw: Unpack[LoadKeywords],
) -> Report:
    """Two runs (folders of rank traces, or ``ranks`` Reports), rank by rank and overall."""
    from .analyses.runs.run_diff import run_diff
    from .scale import ranks_of

    _, load = _parts(kw)
    runs = [r for r in (a, b) if not isinstance(r, Report)]
    dask = {"workers": workers, "scheduler": scheduler, "skip_bad": skip_bad}
    done = iter(_results(runs, None, load, work=True, **dask) if runs else [])  # both runs in one gather
    ra, rb = (r if isinstance(r, Report) else ranks_of(next(done)) for r in (a, b))
    return run_diff(ra, rb)
