"""Python entry points that take paths or loaded traces: ``tv.summary``, ``tv.diff``, ``tv.compare``, ...

Each returns a :class:`~traceview.report.Report`: ``report["by_category"]`` is a
DataFrame, ``print(report)`` shows what the CLI shows, and a notebook renders it
as HTML. Selections are keywords (``step=``, ``annotation=``, ``device=``,
``stream=``, ``kind=``) or a ready ``sel=Selection(...)``; other keywords go to
``traceview.load``.
"""
from __future__ import annotations

import os

from .analyses.region import Selection
from .discover import load_all
from .load import load
from .model import Trace

_SELECT = ("step", "annotation", "device", "stream", "kind")


def _trace(t, load_kw: dict) -> Trace:
    return t if isinstance(t, Trace) else load(os.fspath(t), **load_kw)


def _split(kw: dict) -> tuple[Selection | None, dict]:
    """Selection keywords (or ``sel``) apart from load keywords."""
    sel = kw.pop("sel", None)
    parts = {k: kw.pop(k) for k in _SELECT if k in kw}
    if sel is None and any(v is not None for v in parts.values()):
        sel = Selection(**parts)
    return sel, kw


def summary(trace, *, top: int = 10, run: bool = False, **kw):
    """Device, GPU time, counts per step, time per kind and category, top kernels.

    ``run=True`` (or a ``Run``): the paths are the rank traces of one job, see :func:`summary_run`.
    """
    from .analyses.summary import summary as _summary
    from .run import Run

    if run or isinstance(trace, Run):
        return summary_run(trace, **kw)
    sel, load_kw = _split(kw)
    return _summary(_trace(trace, load_kw), sel, top=top)


def _run(x, skip_bad: bool, recursive: bool, load_kw: dict):
    from .run import Run

    return x if isinstance(x, Run) else load_run(x, skip_bad=skip_bad, recursive=recursive, **load_kw)


def summary_run(paths, *, skip_bad: bool = False, recursive: bool = False, **kw):
    """One job's rank traces (a folder, paths or a ``Run``): the shared metrics of each rank (table
    ``ranks``, one row per rank) and the run's ``overall`` row; GPU time by category over the run."""
    from .analyses.run_summary import run_summary

    sel, load_kw = _split(kw)
    label = os.path.basename(os.path.normpath(paths)) if isinstance(paths, (str, os.PathLike)) else None
    return run_summary(_run(paths, skip_bad, recursive, load_kw), sel, label=label)


def run_labels(items) -> list[str]:
    """A label per run: its folder's name (its path when two share a name; `` (N)`` after a run given
    twice), else ``run N``."""
    names = [os.path.basename(os.path.normpath(x)) if isinstance(x, (str, os.PathLike)) else f"run {i}"
             for i, x in enumerate(items)]
    names = [os.fspath(x) if names.count(n) > 1 and isinstance(x, (str, os.PathLike)) else n
             for n, x in zip(names, items)]
    return [f"{n} ({i})" if names.count(n) > 1 else n for i, n in enumerate(names)]  # one run given twice


def compare_runs(runs, *, baseline=None, skip_bad: bool = False, recursive: bool = False, **kw):
    """Runs side by side (each a folder of rank traces or a ``Run``): table ``compare`` one row per run
    (shared metrics and distributed totals over the ranks all runs have), table ``ranks`` one row per
    rank and run; ratios to ``baseline`` (index, label or folder; default the first run)."""
    from .analyses.run_compare import run_compare

    sel, load_kw = _split(kw)
    items = list(runs)
    labels = run_labels(items)
    paths = [os.path.abspath(x) if isinstance(x, (str, os.PathLike)) else None for x in items]
    if isinstance(baseline, (str, os.PathLike)) and os.path.abspath(baseline) in paths:
        baseline = paths.index(os.path.abspath(baseline))
    loaded = [(label, _run(x, skip_bad, recursive, load_kw)) for label, x in zip(labels, items)]
    return run_compare(loaded, baseline=baseline, sel=sel)


def kernels(trace, *, ops: bool = False, **kw):
    """Per kernel name, like ``nsys stats`` cuda_gpu_kern_sum, plus category and hardware path;
    ``ops=True`` adds table ``ops`` (per op name and shapes: work and efficiency, ``kernels --ops``).
    ``devices=FILE`` (a load keyword) adds GPUs to the peak table, as ``--devices`` does."""
    from .analyses.kernels import kernel_stats

    sel, load_kw = _split(kw)
    return kernel_stats(_trace(trace, load_kw), sel, ops=ops)


def diff(a, b, *, annotation_b: str | None = None, top: int | None = 20, **kw):
    """What changed from ``a`` to ``b`` (paths or Traces), per step.

    ``annotation_b`` names B's annotation when it differs from A's. ``top`` caps the
    per-kernel/per-op tables (None: every row).
    """
    from .analyses.diff import diff as _diff

    s, load_kw = _split(kw)
    sel_b = None
    if annotation_b is not None:
        base = s or Selection()
        sel_b = Selection(base.step, annotation_b, base.device, base.stream, base.kind)
    return _diff(_trace(a, load_kw), _trace(b, load_kw), s, sel_b=sel_b, top=top)


def compare(traces, *, baseline=None, recursive: bool = False, run: bool = False, **kw):
    """One row per trace (paths, folders of traces, or Traces), ratios to ``baseline``.

    ``baseline``: index, label, path or Trace (default: the first trace). A folder's
    files that are not profiler traces are skipped and named in the report's notes.
    ``run=True``: each item is one run (a folder of rank traces), see :func:`compare_runs`.
    """
    from .analyses.compare import compare as _compare

    if run:
        return compare_runs(traces, baseline=baseline, recursive=recursive, **kw)
    sel, load_kw = _split(kw)
    items = [traces] if isinstance(traces, (str, os.PathLike, Trace)) else list(traces)
    loaded, skipped = [], []
    for t in items:  # in the order given; a folder expands in place
        if isinstance(t, Trace):
            loaded.append(t)
            continue
        more, passed_over = load_all([t], lambda p: load(p, **load_kw), recursive=recursive)
        loaded += more
        skipped += passed_over
    report = _compare(loaded, baseline=baseline, sel=sel)
    report.notes += [f"skipped (not a profiler trace): {s}" for s in skipped]
    return report


def load_run(paths, *, skip_bad: bool = False, recursive: bool = False, **load_kw):
    """The rank traces of one distributed job (a folder, or paths) as a ``Run``: rank and world size
    from each trace's ``distributedInfo``; two traces of one rank are refused, missing ranks reported.
    ``run.frame("kernels")`` stacks every rank's frame with a ``rank`` column."""
    from .run import load_run as _load_run

    return _load_run(paths, skip_bad=skip_bad, recursive=recursive, **load_kw)


def ranks(paths, *, workers: int | None = None, scheduler: str | None = None, skip_bad: bool = False,
          recursive: bool = False, progress=None, **load_kw):
    """The distributed analyses of a run, one row per rank (``traceview ranks``): GPU time breakdown,
    comm/comp overlap, idle per stream and its cause, stragglers per step and per collective.

    ``workers=N`` spreads the ranks over a local Dask cluster of N processes, ``scheduler=ADDRESS``
    over an existing one (its workers read the files by path: a shared filesystem); default serial.
    """
    from .scale import analyse_run

    return analyse_run(paths, workers=workers, scheduler=scheduler, skip_bad=skip_bad, recursive=recursive,
                       progress=progress, **load_kw)


def diff_runs(a, b, *, workers: int | None = None, scheduler: str | None = None, skip_bad: bool = False,
              **load_kw):
    """Two runs (folders of rank traces, or ``ranks`` Reports), rank by rank and overall."""
    from .analyses.run_diff import run_diff

    a, b = (r if hasattr(r, "tables") else ranks(r, workers=workers, scheduler=scheduler, skip_bad=skip_bad,
                                                  **load_kw) for r in (a, b))
    return run_diff(a, b)
