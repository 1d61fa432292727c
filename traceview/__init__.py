"""traceview: analyse saved PyTorch profiler traces as exact, linked pandas DataFrames."""

from . import render  # noqa: F401  (registers how a Report prints and shows in a notebook)
from ._version import __version__
from .api import (
    LoadOptions,
    Report,
    Selection,
    annotate,
    assert_check,
    check,
    compare,
    compare_runs,
    diff,
    diff_runs,
    exposed,
    hta,
    kernels,
    load_run,
    memory,
    ranks,
    report,
    roofline,
    summary,
    summary_run,
    timeline,
)
from .classify import classify
from .errors import CheckRuleError, NotATraceError, RuleError, TraceReadError, TraceviewError
from .load import load
from .model import Trace

# ``report`` is the HTML report function; the module of that name stays ``traceview.report``
# (``from traceview.report import Report``), and ``tv.Report`` is its class.
__all__ = [
    "CheckRuleError",
    "LoadOptions",
    "NotATraceError",
    "Report",
    "RuleError",
    "Selection",
    "Trace",
    "TraceReadError",
    "TraceviewError",
    "__version__",
    "annotate",
    "assert_check",
    "check",
    "classify",
    "compare",
    "compare_runs",
    "diff",
    "diff_runs",
    "exposed",
    "hta",
    "kernels",
    "load",
    "load_run",
    "memory",
    "ranks",
    "report",
    "roofline",
    "summary",
    "summary_run",
    "timeline",
]
