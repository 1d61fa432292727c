"""traceview: analyse saved PyTorch profiler traces as exact, linked pandas DataFrames."""
from . import render  # noqa: F401  (registers how a Report prints and shows in a notebook)
from ._version import __version__
from .analyses.region import Selection
from .api import compare, compare_runs, diff, kernels, load_run, ranks, summary, summary_run
from .classify import classify
from .errors import NotATraceError, RuleError, TraceReadError, TraceviewError
from .load import load
from .model import Trace

__all__ = ["load", "classify", "Trace", "Selection", "summary", "kernels", "diff", "compare", "load_run",
           "ranks", "summary_run", "compare_runs", "TraceviewError",
           "TraceReadError", "NotATraceError", "RuleError", "__version__"]
