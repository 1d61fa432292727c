"""Python entry points that take paths or loaded traces: ``tv.diff(a, b)``, ``tv.compare([...])``.

Both return a :class:`~traceview.report.Report`: ``report["by_category"]`` is a
DataFrame, ``print(report)`` shows what the CLI shows, and a notebook renders it
as HTML.
"""
from __future__ import annotations

import os

from .analyses.select import Selection
from .model import Trace


def _trace(t, load_kw: dict) -> Trace:
    if isinstance(t, Trace):
        return t
    from .load import load

    return load(os.fspath(t), **load_kw)


def _selection(sel, step, annotation, device, stream) -> Selection | None:
    if sel is not None:
        return sel
    if step is None and annotation is None and device is None and stream is None:
        return None
    return Selection(step, annotation, device, stream)


def diff(a, b, *, sel: Selection | None = None, step: int | None = None, annotation: str | None = None,
         device: int | None = None, stream: int | None = None, annotation_b: str | None = None,
         top: int | None = 20, **load_kw):
    """What changed from ``a`` to ``b`` (paths or Traces), per step.

    ``step``/``annotation``/``device``/``stream`` (or a ready ``sel``) narrow both traces;
    ``annotation_b`` names B's annotation when it differs from A's. ``top`` caps the
    per-kernel/per-op tables (None: every row). Other keywords go to ``traceview.load``.
    """
    from .analyses.diff import diff as _diff

    s = _selection(sel, step, annotation, device, stream)
    sel_b = None
    if annotation_b is not None:
        base = s or Selection()
        sel_b = Selection(base.step, annotation_b, base.device, base.stream)
    return _diff(_trace(a, load_kw), _trace(b, load_kw), s, sel_b=sel_b, top=top)


def compare(traces, *, baseline=None, sel: Selection | None = None, step: int | None = None,
            annotation: str | None = None, device: int | None = None, stream: int | None = None, **load_kw):
    """One row per trace (paths, folders of traces, or Traces), ratios to ``baseline``.

    ``baseline``: index, label, path or Trace (default: the first trace).
    """
    from .analyses.compare import compare as _compare

    items = [traces] if isinstance(traces, (str, os.PathLike, Trace)) else list(traces)
    expanded = []
    for t in items:
        if not isinstance(t, Trace) and os.path.isdir(os.fspath(t)):
            from .cli.common import expand_paths

            expanded += expand_paths([os.fspath(t)])
        else:
            expanded.append(t)
    loaded = [_trace(t, load_kw) for t in expanded]
    if baseline is not None and not isinstance(baseline, (int, Trace)):
        for t in loaded:  # a baseline given as a path that was loaded here
            if os.path.abspath(os.fspath(baseline)) == os.path.abspath(t.path):
                baseline = t
                break
    return _compare(loaded, baseline=baseline, sel=_selection(sel, step, annotation, device, stream))
